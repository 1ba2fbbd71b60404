-- stage_logs_jsonl: turn the lines of one JSONL log file into the staging shape.
-- Grain: stage_requests one row per line that is a JSON object, its fields in the struct
-- `logged` and its logged chunks as one list of `items` (all steps). Input: temp table
-- stage_lines(line, text), lines already decoded as UTF-8 and under the size limit.
-- Unparseable lines go to stage_rejects here; everything else is judged by validate_logs.sql.
-- Parameters, from the field rows of pipeline/ingest/fields.py (request_* for the record,
-- item_* for each logged chunk), in the rows' order: $request_paths / $item_paths (JSON path
-- of each field), $request_rules / $item_rules (per field: json_types, reason),
-- $request_structure / $item_structure (from_json structure: each field's staged type); and
-- the shared reasons $missing_list, $both_lists, $steps_not_lists.
-- Each document is parsed once per list of paths, not once per field.

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

-- The reason of the first field whose json_type (one per rule, NULL when absent) is not
-- allowed; NULL when every field is. An absent or null value is allowed here.
CREATE OR REPLACE TEMP MACRO first_type_error(json_types, rules) AS
    list_filter(list_transform(json_types, lambda t, i: CASE
        WHEN coalesce(t, 'NULL') <> 'NULL' AND NOT list_contains(rules[i].json_types, t)
            THEN rules[i].reason
        END), lambda reason: reason IS NOT NULL)[1];

-- One logged chunk as the staging struct; type problems become item_error, judged later.
-- (Parameters cannot appear inside a macro, so the field rows come in as arguments.)
CREATE OR REPLACE TEMP MACRO json_item(x, step_no, pos, structure, paths, rules) AS
    struct_insert(from_json(x, structure),
                  step := step_no::INTEGER,
                  position := pos::INTEGER,
                  item_error := CASE
                      WHEN json_type(x) <> 'OBJECT' THEN 'is not an object'
                      ELSE first_type_error(json_type(x, paths), rules)
                  END);

CREATE OR REPLACE TEMP TABLE stage_shapes AS
SELECT
    line, text, j,
    CASE
        WHEN coalesce(json_type(j, '$.retrieval_steps'), 'NULL') <> 'NULL' THEN
            CASE
                WHEN json_type(j, '$.retrieval_steps') <> 'ARRAY'
                    THEN 'retrieval_steps is not a list'
                WHEN coalesce(json_type(j, '$.retrieved'), 'NULL') <> 'NULL' THEN $both_lists
                WHEN len(list_filter(from_json(j -> '$.retrieval_steps', '["JSON"]'),
                                     lambda s: s IS NULL OR json_type(s) <> 'ARRAY')) > 0
                    THEN $steps_not_lists
                ELSE 'steps'
            END
        WHEN coalesce(json_type(j, '$.retrieved'), 'NULL') = 'NULL' THEN $missing_list
        WHEN json_type(j, '$.retrieved') <> 'ARRAY' THEN 'retrieved is not a list'
        ELSE 'list'
    END AS shape
FROM stage_objects;

CREATE OR REPLACE TEMP TABLE stage_requests AS
SELECT
    line,
    text AS raw,
    first_type_error(json_type(j, $request_paths), $request_rules) AS type_error,
    from_json(j, $request_structure) AS logged,
    shape,
    CASE WHEN shape = 'steps' THEN json_array_length(j, '$.retrieval_steps') ELSE 1 END::INTEGER
        AS n_steps,
    CASE
        WHEN shape = 'list' THEN list_transform(
            from_json(j -> '$.retrieved', '["JSON"]'),
            lambda x, i: json_item(x, 1, i, $item_structure, $item_paths, $item_rules))
        WHEN shape = 'steps' THEN flatten(list_transform(
            from_json(j -> '$.retrieval_steps', '["JSON"]'),
            lambda s, si: list_transform(
                from_json(s, '["JSON"]'),
                lambda x, i: json_item(x, si, i, $item_structure, $item_paths, $item_rules))))
    END AS items,
    -- k defaults to the list length (the longest step's for agentic requests)
    CASE
        WHEN shape = 'list' THEN json_array_length(j, '$.retrieved')
        WHEN shape = 'steps' THEN list_max(list_transform(
            from_json(j -> '$.retrieval_steps', '["JSON"]'), lambda s: json_array_length(s)))
    END AS k_default
FROM stage_shapes;
