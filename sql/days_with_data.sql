-- days_with_data: the UTC days that hold requests, or scores of the given routes, within
-- optional bounds. Grain: one row per day. Parameters: $start, $end (TIMESTAMP or NULL for
-- unbounded), $routes (VARCHAR[]).
-- A day with scores but no requests left is included, so re-scoring it clears its old rows.

SELECT DISTINCT date_trunc('day', timestamp) AS day FROM requests
WHERE ($start IS NULL OR timestamp >= $start) AND ($end IS NULL OR timestamp < $end)
UNION
SELECT DISTINCT date_trunc('day', timestamp) FROM request_scores
WHERE list_contains($routes::VARCHAR[], route)
  AND ($start IS NULL OR timestamp >= $start) AND ($end IS NULL OR timestamp < $end)
ORDER BY day;
