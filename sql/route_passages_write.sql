-- route_passages_write: the `passages` route for one window, last part: each gold passage's
-- place, then the cause of every passage missing from the served top k.
-- Grain: route_window one row per request of the window (see pipeline/routes); miss_causes one
-- row per missing gold passage of a scored request.
-- Parameters: $route, $gold_version. Reads passages_matched and passage_items
-- (sql/route_passages.sql) and passage_covers(request_id, passage_no, chunk_id, place): the
-- pairs whose similarity lies strictly above the threshold, registered from Arrow by the route.
-- A passage's place is the best place among the chunks that cover it, NULL when none does;
-- relevant_places holds the place of each distinct chunk that covers a passage (one chunk can
-- cover several), for precision.
-- Causes: beyond_k (covered, but only by a chunk placed past k; rank is that place) and
-- not_retrieved (no logged chunk with a text covers it). not_in_index does not apply: a
-- passage has no chunk ID to look up. miss_causes.chunk_id names the passage as
-- 'passage N', its 1-based position in the golden's gold_passages.

CREATE OR REPLACE TEMP TABLE route_window AS
WITH best AS (
    SELECT request_id, passage_no, min(place) AS place
    FROM passage_covers
    GROUP BY request_id, passage_no
),
placed AS (
    SELECT i.request_id, list(b.place ORDER BY i.passage_no) AS places
    FROM passage_items i
    LEFT JOIN best b USING (request_id, passage_no)
    GROUP BY i.request_id
),
relevant AS (
    SELECT request_id, list(place) AS relevant_places
    FROM (SELECT DISTINCT request_id, chunk_id, place FROM passage_covers)
    GROUP BY request_id
)
SELECT m.*, m.gold_passages AS needed_items,
       CASE WHEN m.status = 'scored' THEN p.places::INTEGER[] END AS places,
       CASE WHEN m.status = 'scored'
            THEN coalesce(r.relevant_places, [])::INTEGER[] END AS relevant_places
FROM passages_matched m
LEFT JOIN placed p USING (request_id)
LEFT JOIN relevant r USING (request_id);

INSERT INTO miss_causes
WITH missing AS (
    SELECT request_id, gold_id, index_version, k,
           generate_subscripts(places, 1) AS passage_no, unnest(places) AS rank
    FROM route_window
    WHERE status = 'scored'
      AND len(list_filter(places, lambda r: r <= k)) < len(places)
)
SELECT request_id, $route, $gold_version, gold_id, index_version, 'passage ' || passage_no,
       CASE WHEN rank IS NOT NULL THEN 'beyond_k' ELSE 'not_retrieved' END, rank
FROM missing
WHERE rank IS NULL OR rank > k;
