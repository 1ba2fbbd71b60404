-- load_logs: move one validated log file from staging into the warehouse.
-- Grain: requests one row per request_id; request_copies one row per identical re-delivery;
-- quarantine one row per record that cannot be loaded. Input: stage_rejects, stage_checked,
-- and stage_lines (a JSONL file's lines, sql/stage_logs_jsonl.sql: the text of its quarantined
-- records; dropped here once loaded).
-- Parameters: $source (the file), $kind ('logs'), $raw_limit (characters of a bad record kept).
-- Identical re-deliveries of a request load once; a request_id seen with two different
-- contents is a conflict: every copy in this file is quarantined, and a copy that contradicts
-- an already-loaded request is quarantined while the loaded one stays. Ends with the count of
-- records loaded (new requests and identical re-deliveries).

CREATE OR REPLACE TEMP TABLE stage_outcome AS
WITH good AS (
    SELECT line, request_id FROM stage_checked WHERE reason IS NULL
),
repeated AS (
    SELECT request_id FROM good GROUP BY request_id HAVING count(*) > 1
    UNION
    -- an inner join: its hash table is built on the smaller side and spills, where an IN
    -- (SELECT ... FROM requests) would hold every loaded request_id in memory
    SELECT g.request_id FROM good g JOIN requests r ON r.request_id = g.request_id
),
staged_digest AS (
    SELECT line, request_id,
           record_digest(request_id, timestamp, query, gold_id, index_version, index_size, k,
                         session_id, turn, tags, retrieved) AS digest
    FROM stage_checked
    WHERE reason IS NULL AND request_id IN (SELECT request_id FROM repeated)
),
in_file AS (
    SELECT request_id, count(DISTINCT digest) AS n_versions, min(line) AS first_line,
           string_agg(line::VARCHAR, ', ' ORDER BY line) AS lines
    FROM staged_digest
    GROUP BY request_id
),
loaded AS (
    SELECT request_id, source, line,
           record_digest(request_id, timestamp, query, gold_id, index_version, index_size, k,
                         session_id, turn, tags, retrieved) AS digest
    FROM requests
    WHERE request_id IN (SELECT request_id FROM repeated)
)
SELECT
    g.line,
    g.request_id,
    CASE
        WHEN f.n_versions > 1
            THEN 'conflicting duplicate request_id ' || g.request_id || ' (lines ' || f.lines || ')'
        WHEN l.request_id IS NOT NULL AND l.digest <> d.digest
            THEN conflict_reason(g.request_id, l.source, l.line)
    END AS reason,
    (f.request_id IS NULL OR (f.n_versions = 1 AND g.line = f.first_line))
        AND l.request_id IS NULL AS insert_it
FROM good g
LEFT JOIN staged_digest d USING (line)
LEFT JOIN in_file f ON f.request_id = g.request_id
LEFT JOIN loaded l ON l.request_id = g.request_id;

-- a quarantined record's text is its line's (a Parquet row's is filled by
-- fill_parquet_raw.sql): no staging table but stage_lines holds a file's text
CREATE TEMP TABLE IF NOT EXISTS stage_lines (line BIGINT, text VARCHAR);

INSERT INTO quarantine (kind, source, line, reason, raw)
SELECT $kind, $source, line, reason, left(raw, $raw_limit)
FROM stage_rejects
UNION ALL
SELECT $kind, $source, q.line, q.reason, left(l.text, $raw_limit)
FROM (SELECT line, reason FROM stage_checked WHERE reason IS NOT NULL
      UNION ALL
      SELECT line, reason FROM stage_outcome WHERE reason IS NOT NULL) q
LEFT JOIN stage_lines l USING (line);

INSERT INTO request_copies (request_id, source, line)
SELECT request_id, $source, line FROM stage_outcome WHERE reason IS NULL AND NOT insert_it;

-- the good records not written below (copies and conflicts): few, so the writes leave them out
-- by a join that holds only them, never one row per record of the file
CREATE OR REPLACE TEMP TABLE stage_not_written AS
SELECT line FROM stage_outcome WHERE NOT insert_it;

-- what the caller counts as loaded: every good record, new or an identical re-delivery
CREATE OR REPLACE TEMP TABLE stage_loaded AS
SELECT count(*) AS n FROM stage_outcome WHERE reason IS NULL;

DROP TABLE stage_outcome;

-- the file's text is not kept past its load (nor held while the requests are written)
DROP TABLE stage_lines;

-- Most requests log one list, ranked in list order (stage_checked.in_list_order): their
-- chunks' places are 1, 2, 3, ... in list order. The others are placed by the general rule:
-- sorted per step, each chunk kept at its best place. Rows are written in no particular order
-- (readers say ORDER BY), one pass over the staged records each.
INSERT INTO requests
SELECT
    request_id, timestamp, query,
    CASE WHEN gold_id IS NULL THEN norm_text(query) END,
    gold_id, index_version, index_size, k, n_steps, session_id, turn, tags, retrieved,
    NULL, NULL,   -- the IDs of retrieved, at places 1, 2, 3, ... (view ranked_requests)
    $source, line
FROM stage_checked c
ANTI JOIN stage_not_written n ON n.line = c.line
WHERE c.reason IS NULL AND c.in_list_order;

INSERT INTO requests
WITH by_step AS (
    -- each step's chunks in ranking order: by logged rank, ties by logged order
    SELECT c.*, list_sort(list_transform(c.retrieved, lambda x: {
               'step': x.step, 'rank': x.rank, 'position': x.position, 'chunk_id': x.chunk_id}))
               AS ordered
    FROM stage_checked c
    ANTI JOIN stage_not_written n ON n.line = c.line
    WHERE c.reason IS NULL AND NOT c.in_list_order
),
placed AS (
    -- a chunk's place is its position in its step's ranking (1, 2, 3, ... whatever the logged
    -- rank values: ties, gaps or an offset do not change how many chunks came before it)
    SELECT *, list_transform(ordered, lambda x: x.step) AS steps
    FROM by_step
),
by_place AS (
    SELECT *, list_sort(list_transform(ordered, lambda x, i: {
               'place': CASE WHEN n_steps = 1 THEN i ELSE i - list_position(steps, x.step) + 1 END,
               'chunk_id': x.chunk_id})) AS best_first
    FROM placed
),
flat AS (
    SELECT *, list_transform(best_first, lambda x: x.chunk_id) AS ids,
              list_transform(best_first, lambda x: x.place) AS places
    FROM by_place
),
firsts AS (
    -- the first occurrence of a chunk is its best place over all steps
    SELECT *, list_filter(range(1, len(ids) + 1), lambda i: list_position(ids, ids[i]) = i)
                  AS keep
    FROM flat
)
SELECT
    request_id, timestamp, query,
    CASE WHEN gold_id IS NULL THEN norm_text(query) END,
    gold_id, index_version, index_size, k, n_steps, session_id, turn, tags, retrieved,
    list_transform(keep, lambda i: ids[i])::VARCHAR[],
    list_transform(keep, lambda i: places[i])::INTEGER[],
    $source, line
FROM firsts;

SELECT n FROM stage_loaded;
