-- load_requests: write the requests of one log file (or part of one) that load_logs.sql
-- judged new. Grain: requests one row per request_id. Input: stage_checked, and
-- stage_not_written and stage_loaded from load_logs.sql. Parameter: $source (the file).
-- Ends with the count of records loaded (new requests and identical re-deliveries).

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
