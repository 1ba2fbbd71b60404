-- gold_join_counts: how the requests of [$start, $end) found their golden on a route: by
-- logged gold_id, by normalized query text, or not at all. Grain: one row.
-- Parameters: $start, $end (TIMESTAMP), $route.

SELECT
    count(*) FILTER (WHERE s.status <> 'no_gold_match' AND r.gold_id IS NOT NULL) AS by_gold_id,
    count(*) FILTER (WHERE s.status <> 'no_gold_match' AND r.gold_id IS NULL) AS by_query,
    count(*) FILTER (WHERE s.status = 'no_gold_match') AS unmatched
FROM request_scores s
JOIN requests r USING (request_id)
WHERE s.route = $route AND s.timestamp >= $start AND s.timestamp < $end;
