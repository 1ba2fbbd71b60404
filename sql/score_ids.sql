-- score_ids: context recall by gold chunk IDs for the requests of one window [$start, $end).
-- Grain: request_scores one row per request (route 'ids'); request_cutoffs one row per scored
-- request (its counts at every cutoff, seen as recall/precision/hit through recall_at_k);
-- miss_causes one row per missing gold chunk of a scored request.
-- Parameters: $start, $end (TIMESTAMP, UTC), $gold_version, $cutoffs (INTEGER[]).
-- A request joins its golden by gold_id, else by normalized query text. A gold chunk is
-- covered when its best logged rank (over all retrieval steps) is within the served k; at a
-- cutoff c the served k still caps it, so candidates beyond k never count and a list shorter
-- than c keeps its full-list value. Run inside one transaction (score.py does).

-- the window's old rows go first: those of its requests wherever they were scored before, and
-- scores dated in the window whose request has since been removed or moved
CREATE OR REPLACE TEMP TABLE score_window_ids AS
SELECT request_id FROM requests WHERE timestamp >= $start AND timestamp < $end
UNION
SELECT request_id FROM request_scores
WHERE route = 'ids' AND timestamp >= $start AND timestamp < $end;

DELETE FROM request_cutoffs
WHERE route = 'ids' AND request_id IN (SELECT request_id FROM score_window_ids);

DELETE FROM miss_causes
WHERE route = 'ids' AND request_id IN (SELECT request_id FROM score_window_ids);

DELETE FROM request_scores
WHERE route = 'ids' AND request_id IN (SELECT request_id FROM score_window_ids);

CREATE OR REPLACE TEMP TABLE score_window AS
WITH by_question AS (
    -- two goldens with the same normalized question: the smallest gold_id answers, always
    SELECT question_norm, min(gold_id) AS gold_id
    FROM goldens
    WHERE gold_version = $gold_version
    GROUP BY question_norm
),
joined AS (
    SELECT r.request_id, r.timestamp, r.index_version, r.k, r.chunk_ids, r.chunk_ranks,
           g.gold_id, g.gold_chunk_ids
    FROM requests r
    LEFT JOIN by_question q ON q.question_norm = r.query_norm
    LEFT JOIN goldens g
           ON g.gold_version = $gold_version AND g.gold_id = coalesce(r.gold_id, q.gold_id)
    WHERE r.timestamp >= $start AND r.timestamp < $end
)
SELECT
    request_id, timestamp, index_version, k, gold_id, gold_chunk_ids, chunk_ranks,
    CASE
        WHEN gold_id IS NULL THEN 'no_gold_match'
        WHEN len(gold_chunk_ids) = 0 THEN 'no_evidence'
        ELSE 'scored'
    END AS status,
    -- best rank of each gold chunk among the logged candidates, NULL when never logged
    list_transform(gold_chunk_ids, lambda g: chunk_ranks[list_position(chunk_ids, g)])
        AS gold_ranks
FROM joined;

INSERT INTO request_scores
SELECT
    -- the gold set looked up, also when no golden matched: the row belongs to that run
    request_id, timestamp, gold_id, $gold_version, index_version, 'ids', k,
    CASE WHEN status = 'scored' THEN len(gold_chunk_ids) END AS needed,
    CASE WHEN status = 'scored' THEN len(list_filter(gold_ranks, lambda r: r <= k)) END AS covered,
    CASE WHEN status = 'scored' THEN covered / needed END,
    CASE WHEN status = 'scored' THEN covered = needed END,
    CASE WHEN status = 'scored'
         THEN covered / nullif(len(list_filter(chunk_ranks, lambda r: r <= k)), 0) END,
    status
FROM score_window;

INSERT INTO request_cutoffs
SELECT
    request_id, 'ids', len(gold_chunk_ids), $cutoffs::INTEGER[],
    list_transform($cutoffs::INTEGER[],
                   lambda c: len(list_filter(gold_ranks, lambda r: r <= least(c, k)))),
    CASE
        -- the common case, ranks 1..n, needs no counting
        WHEN chunk_ranks = range(1, len(chunk_ranks) + 1)::INTEGER[]
            THEN list_transform($cutoffs::INTEGER[], lambda c: least(c, k, len(chunk_ranks)))
        ELSE list_transform($cutoffs::INTEGER[],
                            lambda c: len(list_filter(chunk_ranks, lambda r: r <= least(c, k))))
    END
FROM score_window
WHERE status = 'scored';

INSERT INTO miss_causes
WITH missing AS (
    SELECT request_id, gold_id, index_version, k,
           unnest(gold_chunk_ids) AS chunk_id, unnest(gold_ranks) AS rank
    FROM score_window
    WHERE status = 'scored'
      AND len(list_filter(gold_ranks, lambda r: r <= k)) < len(gold_chunk_ids)
)
SELECT
    m.request_id, 'ids', $gold_version, m.gold_id, m.index_version, m.chunk_id,
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
