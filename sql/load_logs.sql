-- load_logs: move one validated log file from staging into the warehouse.
-- Grain: requests one row per request_id; retrieved one row per logged chunk; quarantine one
-- row per record that cannot be loaded. Parameters: $source (the file), $kind ('logs').
-- Identical re-deliveries of a request (same digest) load once; a request_id seen with two
-- different contents is a conflict: every copy in this file is quarantined, and a copy that
-- contradicts an already-loaded request is quarantined while the loaded one stays.

CREATE OR REPLACE TEMP TABLE stage_outcome AS
WITH good AS (
    SELECT c.line, c.request_id, d.record_hash
    FROM stage_checked c JOIN stage_digests d USING (line)
),
in_file AS (
    SELECT request_id,
           count(DISTINCT record_hash) AS n_versions,
           min(line) AS first_line,
           string_agg(line::VARCHAR, ', ' ORDER BY line) AS lines
    FROM good
    GROUP BY request_id
),
loaded AS (
    SELECT request_id, any_value(record_hash) AS record_hash,
           any_value(source) AS source, any_value(line) AS line
    FROM requests
    WHERE request_id IN (SELECT request_id FROM good)
    GROUP BY request_id
)
SELECT
    g.line,
    g.request_id,
    CASE
        WHEN f.n_versions > 1
            THEN 'conflicting duplicate request_id ' || g.request_id || ' (lines ' || f.lines || ')'
        WHEN l.request_id IS NOT NULL AND l.record_hash <> g.record_hash
            THEN 'conflicts with request_id ' || g.request_id || ' already loaded from '
                 || l.source || ' line ' || l.line
    END AS reason,
    (f.n_versions = 1 AND g.line = f.first_line AND l.request_id IS NULL) AS insert_it
FROM good g
JOIN in_file f USING (request_id)
LEFT JOIN loaded l USING (request_id);

INSERT INTO quarantine (kind, source, line, reason, raw)
SELECT $kind, $source, line, reason, left(raw, 65536) FROM stage_rejects
UNION ALL
SELECT $kind, $source, line, reason, left(raw, 65536) FROM stage_checked WHERE reason IS NOT NULL
UNION ALL
SELECT $kind, $source, o.line, o.reason, left(c.raw, 65536)
FROM stage_outcome o JOIN stage_checked c USING (line)
WHERE o.reason IS NOT NULL;

INSERT INTO retrieved (request_id, step, position, chunk_id, rank, score, text)
SELECT o.request_id, i.step, i.position, i.chunk_id,
       coalesce(i.rank_num, i.position)::INTEGER, i.score, i.text
FROM stage_item_checks i
JOIN stage_outcome o USING (line)
WHERE o.insert_it;

INSERT INTO requests
WITH best AS (
    SELECT i.line, i.chunk_id, min(coalesce(i.rank_num, i.position))::INTEGER AS rank
    FROM stage_item_checks i
    JOIN stage_outcome o USING (line)
    WHERE o.insert_it
    GROUP BY i.line, i.chunk_id
),
lists AS (
    SELECT line,
           list(chunk_id ORDER BY rank, chunk_id) AS chunk_ids,
           list(rank ORDER BY rank, chunk_id) AS chunk_ranks
    FROM best
    GROUP BY line
)
SELECT
    c.request_id, c.timestamp, c.query, norm_text(c.query), c.gold_id, c.index_version,
    c.index_size, c.k,
    c.n_steps,
    c.session_id, c.turn,
    CASE WHEN c.tags_json IS NOT NULL THEN CAST(c.tags_json AS MAP(VARCHAR, VARCHAR)) END,
    coalesce(l.chunk_ids, []::VARCHAR[]),
    coalesce(l.chunk_ranks, []::INTEGER[]),
    d.record_hash, $source, c.line
FROM stage_checked c
JOIN stage_outcome o USING (line)
JOIN stage_digests d USING (line)
LEFT JOIN lists l USING (line)
WHERE o.insert_it
ORDER BY c.timestamp;
