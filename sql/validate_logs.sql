-- validate_logs: judge every staged log record of one file. Grain: one row per staged record
-- in stage_checked, with `reason` NULL when the record can be loaded, typed values otherwise
-- NULL-safe. Input: stage_requests, stage_items (from stage_logs_jsonl / stage_logs_parquet).
-- The first failing rule gives the reason, so a record gets exactly one. No parameters.

CREATE OR REPLACE TEMP TABLE stage_item_checks AS
SELECT
    line, step, position, chunk_id, text,
    try_cast(rank_text AS DOUBLE) AS rank_num,
    try_cast(score_text AS DOUBLE) AS score,
    CASE
        WHEN item_error IS NOT NULL THEN item_error
        WHEN chunk_id IS NULL THEN 'retrieved item ' || position || ' has a null or missing chunk_id'
        WHEN rank_text IS NOT NULL AND (try_cast(rank_text AS DOUBLE) IS NULL
                                        OR try_cast(rank_text AS DOUBLE) <> floor(try_cast(rank_text AS DOUBLE)))
            THEN 'retrieved item ' || position || ' has a rank that is not an integer'
        WHEN rank_text IS NOT NULL AND try_cast(rank_text AS DOUBLE) < 1
            THEN 'retrieved item ' || position || ' has rank ' || rank_text || ' (ranks start at 1)'
        WHEN score_text IS NOT NULL AND try_cast(score_text AS DOUBLE) IS NULL
            THEN 'retrieved item ' || position || ' has a score that is not a number'
    END AS item_reason
FROM stage_items;

CREATE OR REPLACE TEMP TABLE stage_checked AS
WITH first_item_error AS (
    SELECT line, arg_min(item_reason, step * 1000000 + position) AS item_reason
    FROM stage_item_checks
    WHERE item_reason IS NOT NULL
    GROUP BY line
),
step_sizes AS (
    SELECT line, max(n) AS longest_step
    FROM (SELECT line, step, count(*) AS n FROM stage_items GROUP BY line, step)
    GROUP BY line
),
typed AS (
    SELECT
        r.*,
        try_cast(r.ts_text AS TIMESTAMPTZ) AT TIME ZONE 'UTC' AS ts,
        try_cast(r.index_size_text AS DOUBLE) AS index_size_num,
        try_cast(r.k_text AS DOUBLE) AS k_num,
        try_cast(r.turn_text AS DOUBLE) AS turn_num,
        f.item_reason,
        coalesce(s.longest_step, 0) AS longest_step
    FROM stage_requests r
    LEFT JOIN first_item_error f USING (line)
    LEFT JOIN step_sizes s USING (line)
)
SELECT
    line, raw, request_id, ts AS timestamp, query, gold_id, index_version,
    index_size_num::BIGINT AS index_size,
    coalesce(k_num, longest_step)::INTEGER AS k,
    session_id,
    coalesce(turn_num, 1)::INTEGER AS turn,
    n_steps,
    tags_json,
    CASE
        WHEN type_error IS NOT NULL THEN type_error
        WHEN request_id IS NULL OR trim(request_id) = ''
            THEN 'missing or null required field: request_id'
        WHEN ts_text IS NULL THEN 'missing or null required field: timestamp'
        WHEN ts IS NULL THEN 'bad timestamp: ' || left(ts_text, 80)
        WHEN query IS NULL THEN 'missing or null required field: query'
        WHEN index_version IS NULL OR trim(index_version) = ''
            THEN 'missing or null required field: index_version'
        WHEN shape NOT IN ('list', 'steps') THEN shape
        WHEN item_reason IS NOT NULL THEN item_reason
        WHEN k_text IS NOT NULL AND (k_num IS NULL OR k_num <> floor(k_num) OR k_num < 0)
            THEN 'k must be a non-negative integer, got ' || left(k_text, 40)
        WHEN index_size_text IS NOT NULL
             AND (index_size_num IS NULL OR index_size_num <> floor(index_size_num) OR index_size_num < 0)
            THEN 'index_size must be a non-negative integer, got ' || left(index_size_text, 40)
        WHEN turn_text IS NOT NULL AND (turn_num IS NULL OR turn_num <> floor(turn_num))
            THEN 'turn must be an integer, got ' || left(turn_text, 40)
    END AS reason
FROM typed;

-- A digest of the normalized record, the same whichever format it came in: it tells an
-- identical re-delivery (loaded once) from a conflicting duplicate request_id (quarantined).
CREATE OR REPLACE TEMP TABLE stage_digests AS
WITH item_digest AS (
    SELECT line,
           string_agg(concat_ws(chr(31), step, position, chunk_id, rank_num, score, text), chr(30)
                      ORDER BY step, position) AS items
    FROM stage_item_checks
    GROUP BY line
)
SELECT
    c.line,
    md5(concat_ws(chr(29),
        c.request_id, strftime(c.timestamp, '%Y-%m-%dT%H:%M:%S.%f'), c.query, c.gold_id,
        c.index_version, c.index_size, c.k, c.session_id, c.turn,
        CASE WHEN c.tags_json IS NOT NULL
             THEN list_sort(map_entries(CAST(c.tags_json AS MAP(VARCHAR, VARCHAR))))::VARCHAR END,
        coalesce(d.items, ''))) AS record_hash
FROM stage_checked c
LEFT JOIN item_digest d USING (line)
WHERE c.reason IS NULL;
