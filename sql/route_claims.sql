-- route_claims: the `claims` route for one window, first part: each request matched to its
-- golden (claims_matched) and, per scored request, the served context the judge reads.
-- Grain: claims_matched one row per request of the window (score_matched); the result one row
-- per scored request: request_id, gold_id, contexts (VARCHAR[], possibly empty; NULL when
-- no served chunk has a text).
-- Parameters: $start, $end (TIMESTAMP, UTC), $gold_version, $needs.
-- The served context is the text of each distinct chunk placed within the served k (its best
-- place over all steps, requests.chunk_ranks, as the ids route uses), in place order: the
-- logged `text` (unless blank), else the manifest's text of that chunk in the request's index
-- version
-- (index_chunks). A chunk with neither gives the judge nothing to read and is left out; when
-- every served chunk is such a chunk, contexts is NULL: what was served is unknown, not empty
-- (pipeline/routes/claims.py gives the request status 'no_context_text'). A request served
-- nothing has contexts [] (a real 0).

CREATE OR REPLACE TEMP TABLE claims_matched AS
SELECT * FROM score_matched($start, $end, $gold_version, $needs);

WITH logged AS (
    SELECT m.request_id, m.index_version, m.k, m.chunk_ids, m.chunk_ranks,
           unnest(r.retrieved) AS chunk
    FROM claims_matched m
    JOIN requests r USING (request_id)
    WHERE m.status = 'scored'
),
served AS (
    SELECT l.request_id, l.chunk.chunk_id AS chunk_id,
           min(l.chunk_ranks[list_position(l.chunk_ids, l.chunk.chunk_id)]) AS place,
           -- a text logged in any step before the manifest's (a chunk logged with its text
           -- in one step and without it in another is read as logged)
           coalesce(min(text_or_null(l.chunk.text)), min(text_or_null(c.text))) AS text
    FROM logged l
    LEFT JOIN index_chunks c
           ON c.index_version = l.index_version AND c.chunk_id = l.chunk.chunk_id
    WHERE l.chunk_ranks[list_position(l.chunk_ids, l.chunk.chunk_id)] <= l.k
    GROUP BY l.request_id, l.chunk.chunk_id
)
SELECT m.request_id, m.gold_id,
       CASE WHEN count(s.chunk_id) > 0 AND count(s.text) = 0 THEN NULL
            ELSE coalesce(list(s.text ORDER BY s.place, s.chunk_id)
                              FILTER (WHERE s.text IS NOT NULL), []::VARCHAR[])
       END AS contexts
FROM claims_matched m
LEFT JOIN served s USING (request_id)
WHERE m.status = 'scored'
GROUP BY m.request_id, m.gold_id
ORDER BY m.request_id;
