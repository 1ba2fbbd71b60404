-- report_worst_missing_chunks: the gold chunks the scored requests of the given goldens miss,
-- with the cause and how often.
-- Grain: one row per gold_id x chunk_id x cause.
-- Parameters: $route, $gold_version, $gold_ids (VARCHAR[]).

SELECT m.gold_id, m.chunk_id, m.cause, count(*) AS misses
FROM miss_causes AS m
JOIN request_scores AS s ON s.request_id = m.request_id AND s.route = m.route
WHERE m.route = $route AND m.gold_version = $gold_version
  AND s.gold_version = $gold_version AND s.status = 'scored'
  AND list_contains($gold_ids, m.gold_id)
GROUP BY ALL
