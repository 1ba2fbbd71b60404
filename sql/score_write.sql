-- score_write: a route's scores of one window, from the places its route found
-- (route_window, see pipeline/routes). Last step of scoring a window; score_clear ran first.
-- Grain: request_scores one row per request of the window; request_cutoffs one row per scored
-- request (its counts at every cutoff, seen as recall/precision/hit through recall_at_k).
-- Parameters: $route, $gold_version, $cutoffs (INTEGER[]), $whole_context (BOOLEAN: the route
-- reads each served context only as a whole, pipeline/routes).
-- An item is covered when its place is within the served k; at a cutoff c the served k still
-- caps it, so candidates beyond k never count and a list shorter than c keeps its full value.
-- Precision counts served chunks that hold a needed item (route_window.relevant_places; the
-- places of the found items when the route gives none, one chunk per item as on the ids
-- route), so it never exceeds 1. A whole-context route measured a request only at the cutoffs
-- whose top min(c, k) takes in all of its served chunks: below them covered is NULL (no
-- recall_at_k row, never 0), and its precision is NULL (no chunk is known to hold an item).

-- route_window with the optional columns a route may leave out (NULL when it does)
CREATE OR REPLACE TEMP VIEW route_scored AS
SELECT * FROM (SELECT NULL::INTEGER[] AS relevant_places WHERE false)
UNION ALL BY NAME
SELECT * FROM route_window;

INSERT INTO request_scores
SELECT
    -- the gold set looked up, also when no golden matched: the row belongs to that run
    request_id, timestamp, gold_id, $gold_version, index_version, $route, k,
    CASE WHEN status = 'scored' THEN len(places) END AS needed,
    CASE WHEN status = 'scored' THEN len(list_filter(places, lambda r: r <= k)) END AS covered,
    CASE WHEN status = 'scored' THEN covered / needed END,
    CASE WHEN status = 'scored' THEN covered = needed END,
    CASE WHEN status = 'scored' AND NOT $whole_context
         THEN len(list_filter(coalesce(relevant_places, places), lambda r: r <= k))
              / nullif(len(list_filter(chunk_ranks, lambda r: r <= k)), 0) END,
    status
FROM route_scored;

INSERT INTO request_cutoffs (request_id, route, needed, cutoffs, covered, served, relevant)
SELECT
    request_id, $route, len(places), $cutoffs::INTEGER[],
    CASE
        WHEN $whole_context THEN list_transform($cutoffs::INTEGER[], lambda c:
            CASE WHEN least(c, k) >= coalesce(list_max(list_filter(chunk_ranks,
                                                                   lambda r: r <= k)), 0)
                 THEN len(list_filter(places, lambda r: r <= k)) END)
        ELSE list_transform($cutoffs::INTEGER[],
                            lambda c: len(list_filter(places, lambda r: r <= least(c, k))))
    END,
    CASE
        -- the common case, ranks 1..n, needs no counting
        WHEN chunk_ranks = range(1, len(chunk_ranks) + 1)::INTEGER[]
            THEN list_transform($cutoffs::INTEGER[], lambda c: least(c, k, len(chunk_ranks)))
        ELSE list_transform($cutoffs::INTEGER[],
                            lambda c: len(list_filter(chunk_ranks, lambda r: r <= least(c, k))))
    END,
    CASE WHEN NOT $whole_context THEN
        list_transform($cutoffs::INTEGER[], lambda c: len(list_filter(
            coalesce(relevant_places, places), lambda r: r <= least(c, k))))
    END
FROM route_scored
WHERE status = 'scored';
