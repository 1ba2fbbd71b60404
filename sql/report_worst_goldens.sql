-- report_worst_goldens: the goldens with the lowest mean recall among the scored requests of
-- one route and gold set, with their question.
-- Grain: one row per gold_id with at least $min_n scored requests, lowest mean recall first.
-- Parameters: $route, $gold_version, $min_n, $limit (rows at most).

WITH question AS (
    SELECT gold_id, any_value(question) AS question FROM goldens
    WHERE gold_version = $gold_version GROUP BY gold_id
)
SELECT s.gold_id, any_value(q.question) AS question, count(*) AS n,
       avg(s.recall) AS mean_recall
FROM request_scores AS s LEFT JOIN question AS q USING (gold_id)
WHERE s.route = $route AND s.gold_version = $gold_version AND s.status = 'scored'
GROUP BY s.gold_id
HAVING count(*) >= $min_n
ORDER BY mean_recall, s.gold_id
LIMIT $limit
