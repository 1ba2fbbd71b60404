-- validate_logs: judge every staged log record of one file. Grain: one row per staged record
-- in stage_checked, with `reason` NULL when the record can be loaded, and its values typed.
-- Input: stage_requests (from stage_logs_jsonl.sql or pipeline/ingest/logs.py for Parquet):
-- a record's fields as logged in the struct `logged`, its type_error, shape and items. The
-- first failing rule gives the reason, so a record gets exactly one. Parameters: the reasons
-- of the fields whose values are range-checked here, from pipeline/ingest/fields.py
-- ($rank_reason, $k_reason, $index_size_reason, $turn_reason), and the years a timestamp may
-- have ($first_year, $last_year, inclusive).
-- Every conversion is a try_cast and every number is range-checked before it is used, so one
-- odd value quarantines its record and never fails the file. `in_list_order` tells
-- sql/load_logs.sql which loadable records it may place without ranking their chunks.

-- Whether a request's chunks are ranked in list order: one list, ranks never falling, no chunk
-- twice. Most requests are: their chunks' places are 1, 2, 3, ... in list order. Checked here,
-- where `retrieved` is built, so that the load reads each record once, on plain lists of
-- integers (a lambda over integers is much cheaper than one over the items): `ranks`, and
-- `id_hashes`, the hashes of the chunk IDs in list order. A chunk is there once when the first
-- place of its hash is its own place (two IDs of one hash only send a request the general way).
CREATE OR REPLACE TEMP MACRO in_list_order(n_steps, ranks, id_hashes) AS
    n_steps = 1
    -- each rank at least the one before it (ranks are never NULL here): no sort needed
    AND coalesce(list_bool_and(list_transform(ranks[2:], lambda r, i: r >= ranks[i])), true)
    AND coalesce(list_bool_and(list_transform(id_hashes,
                                              lambda h, i: list_position(id_hashes, h) = i)),
                 true);

CREATE OR REPLACE TEMP TABLE stage_checked AS
WITH typed AS (
    SELECT
        r.*,
        -- ISO-8601 only: DuckDB also casts words such as 'infinity' and 'epoch', and offsets
        -- beyond +-18:00 (no place on earth is that far from UTC). RFC 3339 allows a lower-case
        -- t and z, which DuckDB's cast does not read: the text is cast in upper case.
        CASE WHEN regexp_full_match(
                 trim(r.logged.timestamp),
                 '\d{4}-\d{2}-\d{2}([Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?)?\s*(Z|z|[+-]((0\d|1[0-7])(:?[0-5]\d)?|18(:?00)?))?')
             THEN try_cast(upper(trim(r.logged.timestamp)) AS TIMESTAMPTZ) AT TIME ZONE 'UTC'
             END AS ts,
        try_cast(r.logged.index_size AS DOUBLE) AS index_size_num,
        try_cast(r.logged.k AS DOUBLE) AS k_num,
        try_cast(r.logged.turn AS DOUBLE) AS turn_num,
        -- parses the tags once per record; their keys are looked at only when it fails. A null
        -- value is no tag, and is not kept: a Parquet struct of tags (what pyarrow and pandas
        -- write for a column of dicts) holds every key of the column, null where a record
        -- lacks it
        map_from_entries(list_filter(
            map_entries(try_cast(r.logged.tags AS MAP(VARCHAR, VARCHAR))),
            lambda e: e.value IS NOT NULL)) AS tag_map,
        list_filter(list_transform(r.items, lambda x: CASE
            WHEN x.item_error IS NOT NULL OR x.chunk_id IS NULL OR x.chunk_id = ''
                 OR x.rank <> floor(x.rank) OR x.rank < 1 OR x.rank > 2147483647 THEN
                CASE WHEN r.shape = 'steps'
                     THEN 'retrieval step ' || x.step || ' item ' || x.position
                     ELSE 'retrieved item ' || x.position END
                || CASE
                    WHEN x.item_error IS NOT NULL THEN ' ' || x.item_error
                    WHEN x.chunk_id IS NULL THEN ' has a null or missing chunk_id'
                    WHEN x.chunk_id = '' THEN ' has an empty chunk_id'
                    WHEN x.rank <> floor(x.rank) THEN ' ' || $rank_reason
                    WHEN x.rank > 2147483647 THEN ' has a rank out of range'
                    ELSE ' has rank ' || printf('%g', x.rank) || ' (ranks start at 1)'
                END
            END), lambda reason: reason IS NOT NULL)[1] AS item_reason
    FROM stage_requests r
),
judged AS (
    SELECT
        *,
        CASE
            WHEN type_error IS NOT NULL THEN type_error
            WHEN logged.request_id IS NULL OR trim(logged.request_id) = ''
                THEN 'missing or null required field: request_id'
            WHEN logged.timestamp IS NULL THEN 'missing or null required field: timestamp'
            WHEN ts IS NULL OR year(ts) NOT BETWEEN $first_year AND $last_year
                THEN 'bad timestamp: ' || left(logged.timestamp, 80)
            WHEN logged.query IS NULL THEN 'missing or null required field: query'
            WHEN logged.index_version IS NULL OR trim(logged.index_version) = ''
                THEN 'missing or null required field: index_version'
            WHEN shape NOT IN ('list', 'steps') THEN shape
            WHEN item_reason IS NOT NULL THEN item_reason
            -- a logged k serves at least one chunk (the quality gate's k >= 1); an empty list
            -- without a k is served nothing, its k 0
            WHEN logged.k IS NOT NULL
                 AND (k_num IS NULL OR k_num <> floor(k_num) OR k_num < 1 OR k_num > 2147483647)
                THEN $k_reason || ', got ' || left(logged.k, 40)
            WHEN logged.index_size IS NOT NULL
                 AND (index_size_num IS NULL OR index_size_num <> floor(index_size_num)
                      OR index_size_num < 0 OR index_size_num > 9e18)
                THEN $index_size_reason || ', got ' || left(logged.index_size, 40)
            WHEN logged.turn IS NOT NULL
                 AND (turn_num IS NULL OR turn_num <> floor(turn_num)
                      OR abs(turn_num) > 2147483647)
                THEN $turn_reason || ', got ' || left(logged.turn, 40)
            -- a repeated key makes the whole map unreadable: say so rather than drop tags
            WHEN logged.tags IS NOT NULL AND tag_map IS NULL
                THEN coalesce('tags has a duplicate key: ' || left(list_filter(
                         json_keys(logged.tags), lambda key, i:
                         list_position(json_keys(logged.tags), key) < i)[1], 80),
                     'tags cannot be read as text keys and values')
        END AS reason
    FROM typed
),
checked AS (
    SELECT
        line, logged.request_id, ts AS timestamp, logged.query,
        -- a blank gold_id names no golden: the request joins by its query instead
        CASE WHEN trim(logged.gold_id) <> '' THEN logged.gold_id END AS gold_id,
        logged.index_version,
        -- as logged when it is an integer: a double holds integers exactly only to 2^53
        coalesce(try_cast(logged.index_size AS BIGINT), try_cast(index_size_num AS BIGINT))
            AS index_size,
        try_cast(coalesce(k_num, k_default, 0) AS INTEGER) AS k,
        n_steps,
        -- a blank session_id names no session: the request is its own cluster
        CASE WHEN trim(logged.session_id, ' ' || chr(9) || chr(10) || chr(13)) <> ''
             THEN logged.session_id END AS session_id,
        try_cast(coalesce(turn_num, 1) AS INTEGER) AS turn,
        tag_map AS tags,
        CASE WHEN reason IS NULL THEN
            coalesce(list_transform(items, lambda x: {
                'step': x.step, 'position': x.position, 'chunk_id': x.chunk_id,
                'rank': try_cast(coalesce(x.rank, x.position) AS INTEGER),
                'score': x.score, 'text': x.text}), [])
        END AS retrieved,
        reason
    FROM judged
)
SELECT * EXCLUDE (ranks, id_hashes), in_list_order(n_steps, ranks, id_hashes) AS in_list_order
FROM (SELECT *, list_transform(retrieved, lambda x: x.rank) AS ranks,
             list_transform(retrieved, lambda x: hash(x.chunk_id)) AS id_hashes
      FROM checked);

-- A digest of a normalized record, the same whichever format it came in: it tells an identical
-- re-delivery (loaded once) from a conflicting duplicate request_id (quarantined). Applied to
-- staged and to loaded rows alike, and only where a request_id repeats. JSON keeps every field
-- in its place, NULLs included, so no two different records share a digest by shifting.
CREATE OR REPLACE TEMP MACRO record_digest(request_id, ts, query, gold_id, index_version,
                                           index_size, k, session_id, turn, tags, retrieved) AS
    md5(to_json({
        'request_id': request_id, 'timestamp': strftime(ts, '%Y-%m-%dT%H:%M:%S.%f'),
        'query': query, 'gold_id': gold_id, 'index_version': index_version,
        'index_size': index_size, 'k': k,
        -- blank as stored by releases that kept it (now NULL): the same record
        'session_id': CASE WHEN trim(session_id, ' ' || chr(9) || chr(10) || chr(13)) <> ''
                             THEN session_id END, 'turn': turn,
        -- without null values, as a release that kept them stored them
        'tags': list_sort(list_filter(map_entries(tags), lambda e: e.value IS NOT NULL)),
        -- scores at float precision: a float32 column re-delivering a float64 one is the same
        'retrieved': list_transform(retrieved, lambda x: {
            'step': x.step, 'position': x.position, 'chunk_id': x.chunk_id, 'rank': x.rank,
            'score': CASE WHEN abs(x.score) <= 3.4e38 THEN x.score::FLOAT END, 'text': x.text,
            'score_as_logged': CASE WHEN NOT abs(x.score) <= 3.4e38 THEN x.score END})}
        )::VARCHAR);
