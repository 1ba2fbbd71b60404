-- report_scored_by_version: scored requests of one route and gold set per index version, with
-- the version's first use, to order and scale the miss-cause bars.
-- Grain: one row per index version, by first use. Parameters: $route, $gold_version.

SELECT index_version, count(*) AS n, min(timestamp) AS first_seen
FROM request_scores
WHERE route = $route AND gold_version = $gold_version AND status = 'scored'
GROUP BY index_version ORDER BY first_seen, index_version
