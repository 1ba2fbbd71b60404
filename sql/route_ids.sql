-- route_ids: the `ids` route for one window: the best place of each gold chunk ID in the
-- request's logged ranking, then the cause of every gold chunk missing from the served top k.
-- Grain: route_window one row per request of the window (see pipeline/routes); miss_causes one
-- row per missing gold chunk of a scored request.
-- Parameters: $route, $start, $end (TIMESTAMP, UTC), $gold_version, $needs.
-- Causes: beyond_k (logged, but placed past k), not_in_index (the manifest of the request's
-- index version lacks it), not_retrieved (otherwise).

CREATE OR REPLACE TEMP TABLE route_window AS
SELECT
    m.request_id, m.timestamp, m.gold_id, m.index_version, m.k, m.chunk_ranks, m.status,
    m.gold_chunk_ids AS needed_items,
    -- best place of each gold chunk among the logged candidates, NULL when never logged
    CASE WHEN m.status = 'scored' THEN
        list_transform(m.gold_chunk_ids, lambda g: m.chunk_ranks[list_position(m.chunk_ids, g)])
    END AS places
FROM score_matched($start, $end, $gold_version, $needs) m;

INSERT INTO miss_causes
WITH missing AS (
    SELECT request_id, gold_id, index_version, k,
           unnest(needed_items) AS chunk_id, unnest(places) AS rank
    FROM route_window
    WHERE status = 'scored'
      AND len(list_filter(places, lambda r: r <= k)) < len(places)
)
SELECT
    m.request_id, $route, $gold_version, m.gold_id, m.index_version, m.chunk_id,
    CASE
        WHEN m.rank IS NOT NULL THEN 'beyond_k'
        WHEN v.index_version IS NOT NULL AND c.chunk_id IS NULL THEN 'not_in_index'
        ELSE 'not_retrieved'
    END,
    m.rank
FROM missing m
LEFT JOIN (SELECT DISTINCT index_version FROM index_chunks) v USING (index_version)
LEFT JOIN index_chunks c USING (index_version, chunk_id)
WHERE m.rank IS NULL OR m.rank > m.k;
