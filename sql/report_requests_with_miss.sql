-- report_requests_with_miss: scored requests of one route and gold set that miss at least one
-- gold chunk.
-- Grain: one row, the count. Parameters: $route, $gold_version.

SELECT count(DISTINCT m.request_id) FROM miss_causes AS m
JOIN request_scores AS s ON s.request_id = m.request_id AND s.route = m.route
WHERE m.route = $route AND m.gold_version = $gold_version
  AND s.gold_version = $gold_version AND s.status = 'scored'
