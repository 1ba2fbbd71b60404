-- report_status_counts: requests per scoring status for one route and gold set. A request
-- that matched no golden may carry no gold_version; it still belongs to this run.
-- Grain: one row per status, 'scored' first, then by count. Parameters: $route, $gold_version.

SELECT status, count(*) AS n FROM request_scores
WHERE route = $route AND (gold_version = $gold_version OR gold_version IS NULL)
GROUP BY status ORDER BY (status = 'scored') DESC, n DESC, status
