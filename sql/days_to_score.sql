-- days_to_score: the UTC days whose scores are out of date after an ingest.
-- Grain: one row per day. Parameters: $sources (files ingested or re-ingested just now),
-- $route. A day qualifies when a file loaded requests into it, when it has requests never
-- scored on the route, or when it holds scores whose request is gone or moved to another day.

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
ORDER BY day;
