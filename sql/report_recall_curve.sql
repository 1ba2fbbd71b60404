-- report_recall_curve: the recall@k curve of the scored requests of one route and gold set:
-- mean recall, precision and hit rate at every cutoff, overall and per index version.
-- Grain: one row per cutoff k (index_version NULL: all requests) and per index version x k.
-- Parameters: $route, $gold_version.

SELECT CASE WHEN grouping(s.index_version) = 1 THEN NULL ELSE s.index_version END
           AS index_version,
       a.k, count(*) AS n, avg(a.recall) AS recall, avg(a.precision) AS precision,
       count(a.precision) AS n_precision, avg(CAST(a.hit AS INTEGER)) AS hit_rate
FROM recall_at_k AS a
JOIN request_scores AS s ON s.request_id = a.request_id AND s.route = a.route
WHERE a.route = $route AND s.gold_version = $gold_version AND s.status = 'scored'
GROUP BY GROUPING SETS ((a.k), (s.index_version, a.k))
ORDER BY a.k
