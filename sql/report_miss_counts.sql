-- report_miss_counts: missing gold chunks per index version and cause. Only misses of
-- requests scored under this route and gold set: stale rows never count.
-- Grain: one row per index_version x cause. Parameters: $route, $gold_version.

SELECT m.index_version, m.cause, count(*) AS misses,
       count(DISTINCT m.request_id) AS requests
FROM miss_causes AS m
WHERE m.route = $route AND m.gold_version = $gold_version
  AND m.request_id IN (
      SELECT request_id FROM request_scores
      WHERE route = $route AND gold_version = $gold_version AND status = 'scored'
  )
GROUP BY ALL
