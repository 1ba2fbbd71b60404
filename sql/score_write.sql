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

-- Each count is taken once per request: `covered_places`, the places within the served k, and
-- `served_places`, the logged places within it; a cutoff only caps them further.
INSERT INTO request_scores
SELECT
    -- the gold set looked up, also when no golden matched: the row belongs to that run
    request_id, timestamp, gold_id, $gold_version, index_version, $route, k,
    needed, covered, covered / needed, covered = needed,
    CASE WHEN status = 'scored' AND NOT $whole_context
         -- without relevant_places, one chunk per covered item
         THEN coalesce(len(list_filter(relevant_places, lambda r: r <= k)), covered)
              / nullif(len(list_filter(chunk_ranks, lambda r: r <= k)), 0) END,
    status
FROM (
    SELECT *,
           CASE WHEN status = 'scored' THEN len(places) END AS needed,
           CASE WHEN status = 'scored' THEN len(list_filter(places, lambda r: r <= k)) END
               AS covered
    FROM route_scored
);

INSERT INTO request_cutoffs (request_id, route, needed, cutoffs, covered, served, relevant)
SELECT
    request_id, $route, len(places), $cutoffs::INTEGER[], covered,
    CASE
        -- the common case, places 1..n, needs no counting
        WHEN served_places = range(1, len(served_places) + 1)::INTEGER[]
            THEN list_transform($cutoffs::INTEGER[], lambda c: least(c, len(served_places)))
        ELSE list_transform($cutoffs::INTEGER[],
                            lambda c: len(list_filter(served_places, lambda r: r <= c)))
    END,
    CASE
        WHEN $whole_context THEN NULL
        WHEN relevant_places IS NULL THEN covered
        ELSE list_transform($cutoffs::INTEGER[], lambda c: len(list_filter(
            relevant_places, lambda r: r <= least(c, k))))
    END
FROM (
    SELECT *,
           CASE
               WHEN $whole_context THEN list_transform($cutoffs::INTEGER[], lambda c:
                   CASE WHEN least(c, k) >= coalesce(list_max(served_places), 0)
                        THEN len(covered_places) END)
               ELSE list_transform($cutoffs::INTEGER[],
                                   lambda c: len(list_filter(covered_places, lambda r: r <= c)))
           END AS covered
    FROM (
        SELECT *, list_filter(places, lambda r: r <= k) AS covered_places,
               list_filter(chunk_ranks, lambda r: r <= k) AS served_places
        FROM route_scored
        WHERE status = 'scored'
    )
);

-- read by nothing else: its memory goes back to the steps that follow
DROP VIEW route_scored;
DROP TABLE route_window;
