-- stage_logs_jsonl: turn the lines of one JSONL log file into the staging shape.
-- Grain: stage_requests one row per line that is a JSON object, its fields in the struct
-- `logged` and its logged chunks as one list of `items` (all steps). Input: temp table
-- stage_lines(line, text), the non-blank lines, already decoded as UTF-8 and under the size
-- limit. The text stays there: stage_requests.raw is NULL, except on a line that is not a
-- JSON object, which goes to stage_rejects with its text here (sql/fill_jsonl_raw.sql gives
-- the other quarantined records theirs). Everything else is judged by validate_logs.sql.
-- Parameters, from the field rows of pipeline/ingest/fields.py (request_* for the record,
-- item_* for each logged chunk), in the rows' order: $type_paths (the JSON path of each
-- request field, then '$', '$.retrieved', '$.retrieval_steps'), $item_paths (of each item
-- field), $request_rules / $item_rules (per field: json_types, reason), $request_structure /
-- $item_structure (from_json structure: each field's staged type), $item_leaves (each item
-- field as JSON), $item_allowed (per item field its json_types and 'NULL'), $leaf_items (true
-- when the item fields are the four leaf_item names); and the shared reasons $missing_list,
-- $both_lists, $steps_not_lists, $bare_cr (invalid JSON with a carriage return inside).
-- A line is parsed three times whatever its number of chunks: for the JSON type of every
-- request field and list (json_type with a list of paths), for the request's values, and for
-- each chunk's fields as JSON texts, whose first character tells their JSON type. Chunks of
-- retrieval steps, and a list holding something other than objects, are rare: they are
-- parsed chunk by chunk (json_item). leaf_item names the item fields (chunk_id, rank, score,
-- text, as validate_logs.sql and load_logs.sql do); item fields declared beyond them make
-- every chunk take json_item, which reads the declaration, until leaf_item names them too.

-- The JSON type (json_type's name) of a value given as JSON text, without parsing it: text
-- from from_json(..., 'JSON') is written compactly, so its first character tells the type, and
-- a number is an integer when it is digits, of any size (whole_types); an absent value is
-- 'NULL', as a null one. 34 is '"', 123 '{', 91 '[', 116 't', 102 'f', 110 'n'.
CREATE OR REPLACE TEMP MACRO leaf_type(leaf) AS CASE ascii(leaf::VARCHAR)
    WHEN 34 THEN 'VARCHAR' WHEN 123 THEN 'OBJECT' WHEN 91 THEN 'ARRAY'
    WHEN 116 THEN 'BOOLEAN' WHEN 102 THEN 'BOOLEAN' WHEN 110 THEN 'NULL'
    ELSE CASE
        WHEN regexp_full_match(leaf::VARCHAR, '-?[0-9]+') THEN 'BIGINT'
        WHEN leaf IS NOT NULL THEN 'DOUBLE'
        ELSE 'NULL'
    END
END;

-- json_type(json, paths) with an integer beyond 64 bits (which yyjson reads as a double, its
-- text kept) typed 'BIGINT' as one within them: an ID logged as such a number is its digits,
-- as in a gold set and from_json(..., 'VARCHAR'). The values are read only when a double is.
CREATE OR REPLACE TEMP MACRO whole_types(json, paths) AS CASE
    WHEN list_contains(json_type(json, paths), 'DOUBLE')
        THEN list_transform(json_type(json, paths), lambda type, i: CASE
            WHEN type = 'DOUBLE'
                 AND regexp_full_match(json_extract(json, paths[i])::VARCHAR, '-?[0-9]+')
                THEN 'BIGINT' ELSE type END)
    ELSE json_type(json, paths)
END;

-- Whether a value given as JSON text is of one of the `allowed` JSON types, as
-- list_contains(allowed, leaf_type(leaf)) tells; the common cases first, without leaf_type's
-- patterns (they cost more than the rest of a chunk): an absent value, a string, and a number
-- where integers and doubles are both allowed (a rank, a score).
CREATE OR REPLACE TEMP MACRO leaf_allowed(leaf, allowed) AS CASE
    WHEN leaf IS NULL THEN list_contains(allowed, 'NULL')
    WHEN starts_with(leaf::VARCHAR, '"') THEN list_contains(allowed, 'VARCHAR')
    WHEN ascii(leaf::VARCHAR) NOT IN (123, 91, 116, 102, 110)
         AND list_has_all(allowed, ['BIGINT', 'DOUBLE']) THEN true
    ELSE list_contains(allowed, leaf_type(leaf))
END;

-- A JSON value staged as VARCHAR, as from_json(..., 'VARCHAR') gives it: a string without
-- escapes is its text between the quotes, an integer its digits; anything else is parsed.
CREATE OR REPLACE TEMP MACRO leaf_text(leaf) AS CASE
    WHEN starts_with(leaf::VARCHAR, '"') AND NOT contains(leaf::VARCHAR, '\')
        THEN (leaf::VARCHAR)[2:-2]
    WHEN regexp_full_match(leaf::VARCHAR, '-?[0-9]{1,18}') THEN leaf::VARCHAR
    ELSE from_json(leaf, '"VARCHAR"')
END;

-- A JSON value staged as DOUBLE, as from_json(..., 'DOUBLE') gives it.
CREATE OR REPLACE TEMP MACRO leaf_number(leaf) AS
    coalesce(try_cast(leaf::VARCHAR AS DOUBLE), from_json(leaf, '"DOUBLE"'));

-- The reason of the first field whose json_type (one per rule, NULL when absent) is not
-- allowed; NULL when every field is. An absent or null value is allowed here.
CREATE OR REPLACE TEMP MACRO first_type_error(json_types, rules) AS
    list_filter(list_transform(json_types, lambda t, i: CASE
        WHEN coalesce(t, 'NULL') <> 'NULL' AND NOT list_contains(rules[i].json_types, t)
            THEN rules[i].reason
        END), lambda reason: reason IS NOT NULL)[1];

-- One logged chunk, given as its fields' JSON texts, as the staging struct. `allowed`: per
-- item field, the JSON types it may have ('NULL' included).
CREATE OR REPLACE TEMP MACRO leaf_item(x, step_no, pos, rules, allowed) AS {
    'chunk_id': leaf_text(x.chunk_id), 'rank': leaf_number(x.rank),
    'score': leaf_number(x.score), 'text': leaf_text(x.text),
    'step': step_no::INTEGER, 'position': pos::INTEGER,
    'item_error': CASE
        WHEN NOT leaf_allowed(x.chunk_id, allowed[1]) THEN rules[1].reason
        WHEN NOT leaf_allowed(x.rank, allowed[2]) THEN rules[2].reason
        WHEN NOT leaf_allowed(x.score, allowed[3]) THEN rules[3].reason
        WHEN NOT leaf_allowed(x.text, allowed[4]) THEN rules[4].reason
    END};

-- One logged chunk, given as JSON text, as the staging struct (parsed on its own: for the
-- rare lists leaf_item cannot read). Type problems become item_error, judged later.
-- (Parameters cannot appear inside a macro, so the field rows come in as arguments.)
CREATE OR REPLACE TEMP MACRO json_item(x, step_no, pos, structure, paths, rules) AS
    struct_insert(from_json(x, structure),
                  step := step_no::INTEGER,
                  position := pos::INTEGER,
                  item_error := CASE
                      WHEN json_type(x) <> 'OBJECT' THEN 'is not an object'
                      ELSE first_type_error(whole_types(x, paths), rules)
                  END);

CREATE OR REPLACE TEMP TABLE stage_requests AS
WITH typed AS (
    SELECT line, text, try(whole_types(text, $type_paths)) AS types
    FROM stage_lines
),
shaped AS (
    SELECT
        line, text, types,
        CASE WHEN types IS NULL AND contains(rtrim(text, chr(13)), chr(13)) THEN $bare_cr
             WHEN types IS NULL THEN 'invalid JSON'
             WHEN types[-3] <> 'OBJECT' THEN 'record is not a JSON object' END AS json_error,
        CASE
            WHEN types IS NULL OR types[-3] <> 'OBJECT' THEN NULL
            WHEN coalesce(types[-1], 'NULL') <> 'NULL' THEN
                CASE
                    WHEN types[-1] <> 'ARRAY' THEN 'retrieval_steps is not a list'
                    WHEN coalesce(types[-2], 'NULL') <> 'NULL' THEN $both_lists
                    WHEN len(list_filter(from_json(text -> '$.retrieval_steps', '["JSON"]'),
                                         lambda s: s IS NULL OR json_type(s) <> 'ARRAY')) > 0
                        THEN $steps_not_lists
                    ELSE 'steps'
                END
            WHEN coalesce(types[-2], 'NULL') = 'NULL' THEN $missing_list
            WHEN types[-2] <> 'ARRAY' THEN 'retrieved is not a list'
            ELSE 'list'
        END AS shape
    FROM typed
),
leaves AS (
    SELECT
        *,
        CASE WHEN shape = 'list' THEN from_json(text, $item_leaves).retrieved END AS leaves,
        CASE WHEN shape = 'steps' THEN text -> '$.retrieval_steps' END AS steps
    FROM shaped
)
SELECT
    line,
    CASE WHEN json_error IS NOT NULL THEN text END AS raw,
    CASE WHEN json_error IS NULL THEN first_type_error(types[1:-4], $request_rules) END
        AS type_error,
    CASE WHEN json_error IS NULL THEN from_json(text, $request_structure) END AS logged,
    shape,
    CASE WHEN shape = 'steps' THEN json_array_length(steps) ELSE 1 END::INTEGER AS n_steps,
    CASE
        -- a list of objects: each chunk's fields read from the one parse above (an item
        -- that is not an object reads as all NULL, and takes the exact way)
        WHEN shape = 'list' AND $leaf_items AND NOT list_bool_or(list_transform(leaves, lambda x:
                 x.chunk_id IS NULL AND x.rank IS NULL AND x.score IS NULL AND x.text IS NULL))
            THEN list_transform(leaves, lambda x, i: leaf_item(x, 1, i, $item_rules, $item_allowed))
        WHEN shape = 'list' THEN list_transform(
            from_json(text -> '$.retrieved', '["JSON"]'),
            lambda x, i: json_item(x, 1, i, $item_structure, $item_paths, $item_rules))
        WHEN shape = 'steps' THEN flatten(list_transform(
            from_json(steps, '["JSON"]'),
            lambda s, si: list_transform(
                from_json(s, '["JSON"]'),
                lambda x, i: json_item(x, si, i, $item_structure, $item_paths, $item_rules))))
    END AS items,
    -- k defaults to the list length (the longest step's for agentic requests)
    CASE
        WHEN shape = 'list' THEN len(leaves)
        WHEN shape = 'steps' THEN list_max(list_transform(
            from_json(steps, '["JSON"]'), lambda s: json_array_length(s)))
    END AS k_default,
    json_error
FROM leaves;

CREATE OR REPLACE TEMP TABLE stage_rejects AS
SELECT line, raw, json_error AS reason
FROM stage_requests
WHERE json_error IS NOT NULL;

DELETE FROM stage_requests WHERE json_error IS NOT NULL;
