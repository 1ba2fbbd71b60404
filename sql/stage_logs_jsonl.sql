-- stage_logs_jsonl: turn the lines of one JSONL log file into the staging shape.
-- Grain: stage_requests one row per line that is a JSON object, its logged chunks as one list
-- of `items` (all steps). Input: temp table stage_lines(line, text), lines already
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

-- True when the json_type at `path` ('NULL' when absent or null) is one of `kinds`.
CREATE OR REPLACE TEMP MACRO json_kind_in(doc, path, kinds) AS
    list_contains(kinds, coalesce(json_type(doc, path), 'NULL'));

-- One logged chunk as the staging struct; type problems become item_error, judged later.
CREATE OR REPLACE TEMP MACRO json_item(x, step_no, pos) AS {
    'step': step_no::INTEGER,
    'position': pos::INTEGER,
    'chunk_id': CASE WHEN json_type(x) = 'OBJECT' THEN json_extract_string(x, '$.chunk_id') END,
    'rank_num': CASE WHEN json_type(x) = 'OBJECT'
                     THEN try_cast(json_extract_string(x, '$.rank') AS DOUBLE) END,
    'score': CASE WHEN json_type(x) = 'OBJECT'
                  THEN try_cast(json_extract_string(x, '$.score') AS DOUBLE) END,
    'text': CASE WHEN json_type(x) = 'OBJECT' THEN json_extract_string(x, '$.text') END,
    'item_error': CASE
        WHEN json_type(x) <> 'OBJECT' THEN 'is not an object'
        WHEN NOT json_kind_in(x, '$.chunk_id', ['VARCHAR', 'BIGINT', 'UBIGINT', 'NULL'])
            THEN 'has a chunk_id that is not a string'
        WHEN NOT json_kind_in(x, '$.rank', ['BIGINT', 'UBIGINT', 'DOUBLE', 'NULL'])
            THEN 'has a rank that is not an integer'
        WHEN NOT json_kind_in(x, '$.score', ['BIGINT', 'UBIGINT', 'DOUBLE', 'NULL'])
            THEN 'has a score that is not a number'
        WHEN NOT json_kind_in(x, '$.text', ['VARCHAR', 'NULL'])
            THEN 'has a text that is not a string'
    END
};

CREATE OR REPLACE TEMP TABLE stage_shapes AS
SELECT
    line, text, j,
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
    END AS shape
FROM stage_objects;

CREATE OR REPLACE TEMP TABLE stage_requests AS
SELECT
    line,
    text AS raw,
    CASE
        WHEN NOT json_kind_in(j, '$.request_id', ['VARCHAR', 'BIGINT', 'UBIGINT', 'NULL'])
            THEN 'request_id is not a string'
        WHEN NOT json_kind_in(j, '$.timestamp', ['VARCHAR', 'NULL'])
            THEN 'bad timestamp: not an ISO-8601 string'
        WHEN NOT json_kind_in(j, '$.query', ['VARCHAR', 'NULL'])
            THEN 'query is not a string'
        WHEN NOT json_kind_in(j, '$.gold_id', ['VARCHAR', 'BIGINT', 'UBIGINT', 'NULL'])
            THEN 'gold_id is not a string'
        WHEN NOT json_kind_in(j, '$.index_version', ['VARCHAR', 'BIGINT', 'UBIGINT', 'NULL'])
            THEN 'index_version is not a string'
        WHEN NOT json_kind_in(j, '$.session_id', ['VARCHAR', 'BIGINT', 'UBIGINT', 'NULL'])
            THEN 'session_id is not a string'
        WHEN NOT json_kind_in(j, '$.index_size', ['BIGINT', 'UBIGINT', 'NULL'])
            THEN 'index_size must be a non-negative integer'
        WHEN NOT json_kind_in(j, '$.k', ['BIGINT', 'UBIGINT', 'NULL'])
            THEN 'k must be a non-negative integer'
        WHEN NOT json_kind_in(j, '$.turn', ['BIGINT', 'UBIGINT', 'NULL'])
            THEN 'turn must be an integer'
        WHEN NOT json_kind_in(j, '$.tags', ['OBJECT', 'NULL'])
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
    shape,
    CASE WHEN shape = 'steps' THEN json_array_length(j, '$.retrieval_steps') ELSE 1 END::INTEGER
        AS n_steps,
    CASE
        WHEN shape = 'list' THEN list_transform(from_json(j -> '$.retrieved', '["JSON"]'),
                                                lambda x, i: json_item(x, 1, i))
        WHEN shape = 'steps' THEN flatten(list_transform(
            from_json(j -> '$.retrieval_steps', '["JSON"]'),
            lambda s, si: list_transform(from_json(s, '["JSON"]'),
                                         lambda x, i: json_item(x, si, i))))
    END AS items,
    -- k defaults to the list length (the longest step's for agentic requests)
    CASE
        WHEN shape = 'list' THEN json_array_length(j, '$.retrieved')
        WHEN shape = 'steps' THEN list_max(list_transform(
            from_json(j -> '$.retrieval_steps', '["JSON"]'), lambda s: json_array_length(s)))
    END AS k_default
FROM stage_shapes;
