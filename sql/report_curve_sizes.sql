-- report_curve_sizes: n per curve of the recall@k chart (distinct scored requests of one
-- route and gold set), with the index version's first use to order the legend.
-- Grain: one row for all requests (index_version NULL, first), then one per index version.
-- Parameters: $route, $gold_version.

SELECT CASE WHEN grouping(s.index_version) = 1 THEN NULL ELSE s.index_version END
           AS index_version,
       count(DISTINCT s.request_id) AS n, min(s.timestamp) AS first_seen
FROM recall_at_k AS a
JOIN request_scores AS s ON s.request_id = a.request_id AND s.route = a.route
WHERE a.route = $route AND s.gold_version = $gold_version AND s.status = 'scored'
GROUP BY GROUPING SETS ((), (s.index_version))
ORDER BY index_version IS NOT NULL, first_seen, index_version
