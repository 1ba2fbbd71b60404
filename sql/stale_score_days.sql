-- stale_score_days: the UTC days whose scores on a route are out of date (pipeline.state).
-- Grain: one row per day. Parameters: $route, and what the route's days must have been
-- scored with: $gold_version, $cutoffs (e.g. '1,3,5'), $route_inputs (the route's
-- inputs_fingerprint, pipeline/routes); $settle (VARCHAR[]): statuses that scoring again now
-- could settle. The manifests each day must have been scored with are in the temp table
-- day_manifests (sql/day_manifests.sql, unbounded).
-- A day qualifies when it has requests never scored on
-- the route, when it holds scores whose request is gone or moved to another day, when it was
-- scored with another gold set, other cutoffs, other index manifests or other route inputs
-- (NULL: scored before they were recorded), or when it was only partly scored, or when ingest
-- changed its requests since (void_scored_days forgot it), or when it holds scores in a
-- status of $settle.

SELECT DISTINCT date_trunc('day', r.timestamp) AS day FROM requests r
ANTI JOIN request_scores s ON s.request_id = r.request_id AND s.route = $route
UNION
SELECT DISTINCT date_trunc('day', s.timestamp) FROM request_scores s
ANTI JOIN requests r ON s.request_id = r.request_id
WHERE s.route = $route
UNION
-- a request re-delivered with another timestamp: its old day loses it, its new day gains it
SELECT DISTINCT unnest([date_trunc('day', s.timestamp), date_trunc('day', r.timestamp)])
FROM request_scores s
JOIN requests r ON s.request_id = r.request_id
WHERE s.route = $route AND date_trunc('day', s.timestamp) <> date_trunc('day', r.timestamp)
UNION
SELECT w.day FROM score_windows w
LEFT JOIN day_manifests d USING (day)
WHERE w.route = $route
  AND (w.gold_version <> $gold_version OR w.cutoffs <> $cutoffs
       OR w.manifests IS DISTINCT FROM d.manifests
       OR w.route_inputs IS DISTINCT FROM $route_inputs)
UNION
-- rows a scoring now could settle (claims not judged while a judge is configured)
SELECT DISTINCT date_trunc('day', timestamp) FROM request_scores
WHERE len($settle::VARCHAR[]) > 0 AND route = $route
  AND list_contains($settle::VARCHAR[], status)
UNION
-- a day with requests but no record of being scored whole (only parts of it were)
SELECT DISTINCT date_trunc('day', r.timestamp) FROM requests r
WHERE NOT EXISTS (SELECT 1 FROM score_windows w
                  WHERE w.route = $route AND w.day = date_trunc('day', r.timestamp))
ORDER BY day;
