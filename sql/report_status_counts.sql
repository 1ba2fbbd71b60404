-- report_status_counts: requests per scoring status for one route and gold set (a request that
-- matched no golden carries the gold set it was looked up in).
-- Grain: one row per status, 'scored' first, then by count. Parameters: $route, $gold_version.

SELECT status, count(*) AS n FROM request_scores
WHERE route = $route AND gold_version = $gold_version
GROUP BY status ORDER BY (status = 'scored') DESC, n DESC, status
