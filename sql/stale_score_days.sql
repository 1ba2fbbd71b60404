-- days_to_score: the UTC days whose scores are out of date.
-- Grain: one row per day. Parameters: $sources (files ingested or re-ingested just now),
-- $route, and the configuration in force: $gold_version, $cutoffs (e.g. '1,3,5'), $manifests.
-- A day qualifies when a file loaded requests into it, when it has requests never scored on
-- the route, when it holds scores whose request is gone or moved to another day, or when it
-- was scored with another gold set, other cutoffs or other index manifests.

SELECT DISTINCT date_trunc('day', timestamp) AS day FROM requests
WHERE source IN (SELECT unnest($sources::VARCHAR[]))
UNION
SELECT DISTINCT date_trunc('day', r.timestamp) FROM requests r
ANTI JOIN request_scores s ON s.request_id = r.request_id AND s.route = $route
UNION
SELECT DISTINCT date_trunc('day', s.timestamp) FROM request_scores s
ANTI JOIN requests r ON s.request_id = r.request_id
UNION
-- a request re-delivered with another timestamp: its old day loses it
SELECT DISTINCT date_trunc('day', s.timestamp) FROM request_scores s
JOIN requests r ON s.request_id = r.request_id
WHERE date_trunc('day', s.timestamp) <> date_trunc('day', r.timestamp)
UNION
SELECT day FROM score_windows
WHERE route = $route
  AND (gold_version <> $gold_version OR cutoffs <> $cutoffs OR manifests <> $manifests)
UNION
-- a day with requests but no record of being scored whole (only parts of it were)
SELECT DISTINCT date_trunc('day', r.timestamp) FROM requests r
WHERE NOT EXISTS (SELECT 1 FROM score_windows w
                  WHERE w.route = $route AND w.day = date_trunc('day', r.timestamp))
ORDER BY day;
