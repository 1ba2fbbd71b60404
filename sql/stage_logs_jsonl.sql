-- stage_logs_jsonl: turn the lines of one JSONL log file into the staging shape.
-- Grain: stage_requests one row per line that is a JSON object; stage_items one row per
-- logged retrieved chunk (per step). Input: temp table stage_lines(line, text), lines already
-- decoded as UTF-8 and under the size limit. Unparseable lines go to stage_rejects here;
-- everything else is judged by validate_logs.sql. No parameters.

CREATE OR REPLACE TEMP TABLE stage_rejects AS
SELECT line, text AS raw,
       CASE WHEN NOT json_valid(text) THEN 'invalid JSON'
            WHEN json_type(text::JSON) <> 'OBJECT' THEN 'record is not a JSON object' END AS reason
FROM stage_lines
WHERE NOT json_valid(text) OR json_type(text::JSON) <> 'OBJECT';

CREATE OR REPLACE TEMP TABLE stage_objects AS
SELECT line, text, text::JSON AS j
FROM stage_lines
WHERE line NOT IN (SELECT line FROM stage_rejects);

CREATE OR REPLACE TEMP TABLE stage_requests AS
SELECT
    line,
    text AS raw,
    CASE
        WHEN coalesce(json_type(j, '$.request_id'), 'NULL') NOT IN ('VARCHAR', 'BIGINT', 'UBIGINT', 'NULL')
            THEN 'request_id is not a string'
        WHEN coalesce(json_type(j, '$.timestamp'), 'NULL') NOT IN ('VARCHAR', 'NULL')
            THEN 'bad timestamp: not an ISO-8601 string'
        WHEN coalesce(json_type(j, '$.query'), 'NULL') NOT IN ('VARCHAR', 'NULL')
            THEN 'query is not a string'
        WHEN coalesce(json_type(j, '$.gold_id'), 'NULL') NOT IN ('VARCHAR', 'BIGINT', 'UBIGINT', 'NULL')
            THEN 'gold_id is not a string'
        WHEN coalesce(json_type(j, '$.index_version'), 'NULL') NOT IN ('VARCHAR', 'BIGINT', 'UBIGINT', 'NULL')
            THEN 'index_version is not a string'
        WHEN coalesce(json_type(j, '$.session_id'), 'NULL') NOT IN ('VARCHAR', 'BIGINT', 'UBIGINT', 'NULL')
            THEN 'session_id is not a string'
        WHEN coalesce(json_type(j, '$.index_size'), 'NULL') NOT IN ('BIGINT', 'UBIGINT', 'NULL')
            THEN 'index_size must be a non-negative integer'
        WHEN coalesce(json_type(j, '$.k'), 'NULL') NOT IN ('BIGINT', 'UBIGINT', 'NULL')
            THEN 'k must be a non-negative integer'
        WHEN coalesce(json_type(j, '$.turn'), 'NULL') NOT IN ('BIGINT', 'UBIGINT', 'NULL')
            THEN 'turn must be an integer'
        WHEN coalesce(json_type(j, '$.tags'), 'NULL') NOT IN ('OBJECT', 'NULL')
            THEN 'tags is not an object'
    END AS type_error,
    json_extract_string(j, '$.request_id') AS request_id,
    json_extract_string(j, '$.timestamp') AS ts_text,
    json_extract_string(j, '$.query') AS query,
    json_extract_string(j, '$.gold_id') AS gold_id,
    json_extract_string(j, '$.index_version') AS index_version,
    json_extract_string(j, '$.index_size') AS index_size_text,
    json_extract_string(j, '$.k') AS k_text,
    json_extract_string(j, '$.session_id') AS session_id,
    json_extract_string(j, '$.turn') AS turn_text,
    CASE WHEN json_type(j, '$.tags') = 'OBJECT' THEN j -> '$.tags' END AS tags_json,
    CASE
        WHEN coalesce(json_type(j, '$.retrieval_steps'), 'NULL') <> 'NULL' THEN
            CASE
                WHEN json_type(j, '$.retrieval_steps') <> 'ARRAY' THEN 'retrieval_steps is not a list'
                WHEN coalesce(json_type(j, '$.retrieved'), 'NULL') <> 'NULL'
                    THEN 'both retrieved and retrieval_steps are set: log one of them'
                WHEN len(list_filter(from_json(j -> '$.retrieval_steps', '["JSON"]'),
                                     lambda s: json_type(s) <> 'ARRAY')) > 0
                    THEN 'retrieval_steps is not a list of lists'
                ELSE 'steps'
            END
        WHEN coalesce(json_type(j, '$.retrieved'), 'NULL') = 'NULL'
            THEN 'missing or null required field: retrieved (or retrieval_steps)'
        WHEN json_type(j, '$.retrieved') <> 'ARRAY' THEN 'retrieved is not a list'
        ELSE 'list'
    END AS shape,
    CASE WHEN json_type(j, '$.retrieval_steps') = 'ARRAY'
         THEN json_array_length(j, '$.retrieval_steps') ELSE 1 END::INTEGER AS n_steps
FROM stage_objects;

CREATE OR REPLACE TEMP TABLE stage_items AS
WITH steps AS (
    SELECT o.line, 1 AS step, o.j -> '$.retrieved' AS items
    FROM stage_objects o JOIN stage_requests r USING (line)
    WHERE r.shape = 'list'
    UNION ALL
    SELECT line, generate_subscripts(arr, 1) AS step, unnest(arr) AS items
    FROM (
        SELECT o.line, from_json(o.j -> '$.retrieval_steps', '["JSON"]') AS arr
        FROM stage_objects o JOIN stage_requests r USING (line)
        WHERE r.shape = 'steps'
    )
),
items AS (
    SELECT line, step, generate_subscripts(arr, 1) AS position, unnest(arr) AS item
    FROM (SELECT line, step, from_json(items, '["JSON"]') AS arr FROM steps)
)
SELECT
    line,
    step::INTEGER AS step,
    position::INTEGER AS position,
    CASE
        WHEN json_type(item) <> 'OBJECT' THEN 'retrieved item is not an object'
        WHEN coalesce(json_type(item, '$.chunk_id'), 'NULL') NOT IN ('VARCHAR', 'BIGINT', 'UBIGINT', 'NULL')
            THEN 'chunk_id is not a string'
        WHEN coalesce(json_type(item, '$.rank'), 'NULL') NOT IN ('BIGINT', 'UBIGINT', 'NULL')
            THEN 'rank is not an integer'
        WHEN coalesce(json_type(item, '$.score'), 'NULL') NOT IN ('BIGINT', 'UBIGINT', 'DOUBLE', 'NULL')
            THEN 'score is not a number'
        WHEN coalesce(json_type(item, '$.text'), 'NULL') NOT IN ('VARCHAR', 'NULL')
            THEN 'text is not a string'
    END AS item_error,
    CASE WHEN json_type(item) = 'OBJECT' THEN json_extract_string(item, '$.chunk_id') END AS chunk_id,
    CASE WHEN json_type(item) = 'OBJECT' THEN json_extract_string(item, '$.rank') END AS rank_text,
    CASE WHEN json_type(item) = 'OBJECT' THEN json_extract_string(item, '$.score') END AS score_text,
    CASE WHEN json_type(item) = 'OBJECT' THEN json_extract_string(item, '$.text') END AS text
FROM items;
