-- score_write: a route's scores of one window, from the places its route found
-- (route_window, see pipeline/routes). Last step of scoring a window; score_clear ran first.
-- Grain: request_scores one row per request of the window; request_cutoffs one row per scored
-- request (its counts at every cutoff, seen as recall/precision/hit through recall_at_k).
-- Parameters: $route, $gold_version, $cutoffs (INTEGER[]).
-- An item is covered when its place is within the served k; at a cutoff c the served k still
-- caps it, so candidates beyond k never count and a list shorter than c keeps its full value.

INSERT INTO request_scores
SELECT
    -- the gold set looked up, also when no golden matched: the row belongs to that run
    request_id, timestamp, gold_id, $gold_version, index_version, $route, k,
    CASE WHEN status = 'scored' THEN len(places) END AS needed,
    CASE WHEN status = 'scored' THEN len(list_filter(places, lambda r: r <= k)) END AS covered,
    CASE WHEN status = 'scored' THEN covered / needed END,
    CASE WHEN status = 'scored' THEN covered = needed END,
    CASE WHEN status = 'scored'
         THEN covered / nullif(len(list_filter(chunk_ranks, lambda r: r <= k)), 0) END,
    status
FROM route_window;

INSERT INTO request_cutoffs
SELECT
    request_id, $route, len(places), $cutoffs::INTEGER[],
    list_transform($cutoffs::INTEGER[],
                   lambda c: len(list_filter(places, lambda r: r <= least(c, k)))),
    CASE
        -- the common case, ranks 1..n, needs no counting
        WHEN chunk_ranks = range(1, len(chunk_ranks) + 1)::INTEGER[]
            THEN list_transform($cutoffs::INTEGER[], lambda c: least(c, k, len(chunk_ranks)))
        ELSE list_transform($cutoffs::INTEGER[],
                            lambda c: len(list_filter(chunk_ranks, lambda r: r <= least(c, k))))
    END
FROM route_window
WHERE status = 'scored';
