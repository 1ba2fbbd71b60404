-- route_passages: the `passages` route for one window, first part: what to compare. The gold
-- passages of each scored request and the texts of its logged candidates; pipeline/routes/
-- passages.py streams their pairs (sql/route_passages_pairs.sql), scores them and hands the
-- covering places to sql/route_passages_write.sql.
-- Grain: passages_matched one row per request of the window (score_matched); passage_items one
-- row per gold passage of a scored request; passage_candidates (a view) one row per distinct
-- (request, chunk, place, text) of a scored request's logged candidates, beyond k too (the
-- chunk is kept so precision can count the chunks that cover a passage: chunks of different
-- retrieval steps share places).
-- Parameters: $start, $end (TIMESTAMP, UTC), $gold_version, $needs.
-- A candidate's text is its logged `text` (unless blank), else the manifest's text of that
-- chunk_id in the request's index version (index_chunks); a chunk with neither has nothing to
-- compare and so covers no passage. A chunk logged with its text in one copy (a step, or a
-- repeat in a list) and without it in another is read as logged, as the claims route reads
-- it: the manifest's text is what the index holds now, not what the generator was given. Its place is the chunk's best place over all steps (requests.chunk_ranks),
-- the same place the ids route uses. A request whose served chunks (placed within k) all have
-- no text gets status 'no_context_text': what was served is unknown, not empty, so it is not
-- measured (counted, excluded from means, never 0). A request served nothing is a real 0.

CREATE OR REPLACE TEMP TABLE passages_matched AS
SELECT * FROM score_matched($start, $end, $gold_version, $needs);

CREATE OR REPLACE TEMP VIEW passage_candidates AS
WITH logged AS (
    SELECT m.request_id, m.index_version, m.chunk_ids, m.chunk_ranks,
           unnest(r.retrieved) AS chunk
    FROM passages_matched m
    JOIN requests r USING (request_id)
    WHERE m.status = 'scored'
)
, texts AS (
    SELECT DISTINCT
        l.request_id,
        l.chunk.chunk_id AS chunk_id,
        l.chunk_ranks[list_position(l.chunk_ids, l.chunk.chunk_id)] AS place,
        text_or_null(l.chunk.text) AS logged,
        text_or_null(c.text) AS manifest
    FROM logged l
    LEFT JOIN index_chunks c
           ON c.index_version = l.index_version AND c.chunk_id = l.chunk.chunk_id
)
SELECT DISTINCT request_id, chunk_id, place, coalesce(logged, manifest) AS text
FROM texts t
WHERE coalesce(logged, manifest) IS NOT NULL
  -- the manifest's text only for a chunk that no copy logged with its own
  AND (logged IS NOT NULL
       OR NOT EXISTS (SELECT 1 FROM texts o
                      WHERE o.request_id = t.request_id AND o.chunk_id = t.chunk_id
                        AND o.logged IS NOT NULL));

-- a request served chunks (placed within k) of which none has a text: not measured
UPDATE passages_matched m SET status = 'no_context_text'
WHERE m.status = 'scored'
  AND len(list_filter(m.chunk_ranks, lambda r: r <= m.k)) > 0
  AND NOT EXISTS (SELECT 1 FROM passage_candidates c
                  WHERE c.request_id = m.request_id AND c.place <= m.k);

CREATE OR REPLACE TEMP TABLE passage_items AS
SELECT request_id, generate_subscripts(gold_passages, 1) AS passage_no,
       unnest(gold_passages) AS passage
FROM passages_matched
WHERE status = 'scored';

SELECT count(*) FROM passage_items;
