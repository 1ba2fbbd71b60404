-- report_worst_examples: one example request per given golden: the lowest-recall request
-- shows the failure best; the newest one breaks ties.
-- Grain: one row per gold_id. Parameters: $route, $gold_version, $gold_ids (VARCHAR[]).

SELECT s.gold_id, s.request_id, s.recall, s.timestamp, r.query
FROM request_scores AS s JOIN requests AS r USING (request_id)
WHERE s.route = $route AND s.gold_version = $gold_version AND s.status = 'scored'
  AND list_contains($gold_ids, s.gold_id)
QUALIFY row_number() OVER (
    PARTITION BY s.gold_id ORDER BY s.recall, s.timestamp DESC, s.request_id
) = 1
