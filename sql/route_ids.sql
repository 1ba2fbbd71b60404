-- route_ids: the `ids` route for one window: the best place of each gold chunk ID in the
-- request's logged ranking, then the cause of every gold chunk missing from the served top k.
-- Grain: route_window one row per request of the window (see pipeline/routes); miss_causes one
-- row per missing gold chunk of a scored request.
-- Parameters: $route, $start, $end (TIMESTAMP, UTC), $gold_version, $needs.
-- Causes: beyond_k (logged, but placed past k), not_in_index (the manifest of the request's
-- index version lacks it), not_retrieved (otherwise).
-- After a rebuild (carried_gold_ids, sql/carry_gold_ids.sql) a request of the rebuilt index
-- (and, for a gold set that names one index's chunks, a request of any other index:
-- named_gold_ids, sql/carry_named_gold.sql)
-- compares each gold chunk as the IDs it was carried to (its best place among them; none for a
-- gone chunk, which stays a miss, not_in_index); needed_items and miss_causes keep the gold ID.

CREATE OR REPLACE TEMP TABLE route_window AS
WITH compared_ids AS (
    -- a gold set is carried by rebuilds or names one index's chunks, never both
    SELECT gold_version, index_version, gold_chunk_id, carried_chunk_id, served_from
    FROM carried_gold_ids
    UNION ALL
    SELECT gold_version, index_version, gold_chunk_id, carried_chunk_id, NULL
    FROM named_gold_ids
),
carried_items AS (
    -- each gold chunk of the gold set's goldens on each index a rebuild carried the gold set
    -- to, with the IDs it is compared as there (none for a gone chunk)
    SELECT g.gold_id, v.index_version, v.served_from, g.position,
           CASE WHEN count(k.gold_chunk_id) = 0 THEN [g.chunk_id]
                ELSE list_filter(list(k.carried_chunk_id), lambda c: c IS NOT NULL)
           END AS compared
    FROM (SELECT gold_version, gold_id, unnest(gold_chunk_ids) AS chunk_id,
                 generate_subscripts(gold_chunk_ids, 1) AS position
          FROM goldens) g
    JOIN (SELECT gold_version, index_version, max(served_from) AS served_from
          FROM compared_ids GROUP BY ALL) v
      ON v.gold_version = $gold_version AND g.gold_version = v.gold_version
    LEFT JOIN compared_ids k
      ON k.gold_version = g.gold_version AND k.index_version = v.index_version
     AND k.gold_chunk_id = g.chunk_id
    GROUP BY g.gold_id, v.index_version, v.served_from, g.position, g.chunk_id
),
carried_goldens AS (
    SELECT gold_id, index_version, served_from,
           list(compared ORDER BY position) AS compared_items
    FROM carried_items
    GROUP BY gold_id, index_version, served_from
)
SELECT
    m.request_id, m.timestamp, m.gold_id, m.index_version, m.k, m.chunk_ranks, m.status,
    m.gold_chunk_ids AS needed_items,
    cg.compared_items,   -- NULL: no rebuild carried this golden's chunks to the index
    -- best place of each gold chunk among the logged candidates, NULL when never logged
    CASE WHEN m.status = 'scored' AND cg.compared_items IS NULL THEN
        list_transform(m.gold_chunk_ids, lambda g: m.chunk_ranks[list_position(m.chunk_ids, g)])
    WHEN m.status = 'scored' THEN
        list_transform(cg.compared_items, lambda ids: list_min(
            list_transform(ids, lambda c: m.chunk_ranks[list_position(m.chunk_ids, c)])))
    END AS places,
    -- after a rebuild two gold chunks of one content are compared as the same chunk: the
    -- logged chunks holding a needed item are then fewer than the items found (NULL: one
    -- chunk per found item, as without a rebuild)
    CASE WHEN m.status = 'scored' AND cg.compared_items IS NOT NULL THEN
        list_filter(list_transform(list_distinct(flatten(cg.compared_items)),
                                   lambda c: m.chunk_ranks[list_position(m.chunk_ids, c)]),
                    lambda r: r IS NOT NULL)
    END AS relevant_places
FROM score_matched($start, $end, $gold_version, $needs) m
-- a rollback's carry applies from when the index went live again (served_from), not to what
-- it served in its first stint, before any rebuild (sql/carry_gold_ids.sql)
LEFT JOIN carried_goldens cg
       ON cg.gold_id = m.gold_id AND cg.index_version = m.index_version
      AND (cg.served_from IS NULL OR m.timestamp >= cg.served_from);

INSERT INTO miss_causes
WITH missing AS (
    -- one row per gold chunk of a scored request (unnest runs the lists side by side; a NULL
    -- compared_items gives NULLs): the covered ones drop out below
    SELECT request_id, gold_id, index_version, k,
           unnest(needed_items) AS chunk_id, unnest(places) AS rank,
           unnest(compared_items) AS compared, compared_items IS NULL AS as_logged
    FROM route_window
    WHERE status = 'scored'
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
-- a chunk carried by content is in the manifest by construction, a gone one (compared as
-- nothing) is not: the first ID compared stands for the gold chunk
LEFT JOIN index_chunks c
       ON c.index_version = m.index_version
      AND c.chunk_id = CASE WHEN m.as_logged THEN m.chunk_id ELSE m.compared[1] END
WHERE m.rank IS NULL OR m.rank > m.k;
