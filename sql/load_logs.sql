-- load_logs: judge the outcome of every validated record of one log file (or part of one)
-- and write all but its requests; sql/load_requests.sql writes those next.
-- Grain: request_copies one row per identical re-delivery; quarantine one row per record that
-- cannot be loaded (its text NULL unless stage_rejects had it: filled after, see below).
-- Input: stage_rejects, stage_checked. Output for load_requests.sql: stage_not_written (the
-- good records it must leave out) and stage_loaded (the count of records loaded).
-- Parameters: $source (the file), $kind ('logs'), $raw_limit (characters of a bad record kept).
-- Identical re-deliveries of a request load once; a request_id seen with two different
-- contents is a conflict: every copy in this file is quarantined, and a copy that contradicts
-- an already-loaded request is quarantined while the loaded one stays.

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

-- a quarantined record's text: a rejected line's comes with it; the others' is filled after
-- (sql/fill_jsonl_raw.sql, sql/fill_parquet_raw.sql), for these few lines only
INSERT INTO quarantine (kind, source, line, reason, raw)
SELECT $kind, $source, line, reason, left(raw, $raw_limit)
FROM stage_rejects
UNION ALL
SELECT $kind, $source, line, reason, NULL
FROM stage_checked WHERE reason IS NOT NULL
UNION ALL
SELECT $kind, $source, line, reason, NULL
FROM stage_outcome WHERE reason IS NOT NULL;

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
