-- report_gold_joins: how requests of one route and gold set found their golden: by gold_id or
-- by query text, and how many of each kind found none.
-- Grain: one row. Parameters: $route, $gold_version.

SELECT
    count(*) FILTER (WHERE s.status <> 'no_gold_match' AND r.gold_id IS NOT NULL)
        AS by_gold_id,
    count(*) FILTER (WHERE s.status <> 'no_gold_match' AND r.gold_id IS NULL)
        AS by_query,
    count(*) FILTER (WHERE s.status = 'no_gold_match' AND r.gold_id IS NOT NULL)
        AS unmatched_gold_id,
    count(*) FILTER (WHERE s.status = 'no_gold_match' AND r.gold_id IS NULL)
        AS unmatched_query
FROM request_scores AS s JOIN requests AS r USING (request_id)
WHERE s.route = $route AND s.gold_version = $gold_version
