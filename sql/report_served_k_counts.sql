-- report_served_k_counts: the served k of the scored requests of one route and gold set, the k
-- behind the per-request numbers (statuses, miss causes, worst goldens).
-- Grain: one row per served k, ascending. Parameters: $route, $gold_version.

SELECT k, count(*) AS n FROM request_scores
WHERE route = $route AND gold_version = $gold_version AND status = 'scored'
GROUP BY k ORDER BY k
