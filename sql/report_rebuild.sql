-- report_rebuild: the queries behind the report's "Before / after the rebuild" section, one
-- route, cutoff k and gold set at a time: the rebuilds recorded (rebuilds), the
-- pooled sums of the days before and after each went live (window_sums, grain 'day', slice
-- 'all'), how the gold chunks were carried, and those that were not (with their misses on the
-- rebuilt index among the scope's scored requests, scored_requests of report_macros.sql).

-- name: rebuilds
-- Every index version gold IDs were carried to (recorded: when it went live, the manifest the
-- old content mostly came from), and every other index version that took over from an earlier
-- one (not recorded: first logged after the first day of logs; live from its first request,
-- or from midnight when that day served no other version). Grain: one row per index version after the first, by live_from.
-- Parameters: none.
WITH carried AS (
    -- recorded by `rebuild` (also when only gold sets that name one index's chunks, which no
    -- rebuild carries, are loaded), or, in a warehouse from before that table, by its rows
    SELECT index_version, min(live_from) AS live_from, mode(from_version) AS from_version
    FROM (SELECT index_version, live_from, NULL AS from_version FROM rebuilds
          UNION ALL
          SELECT index_version, live_from, from_version FROM carried_gold_ids)
    GROUP BY index_version
),
served AS (
    SELECT index_version, min(timestamp) AS first_seen, max(timestamp) AS latest
    FROM requests
    GROUP BY index_version
),
changes AS (
    SELECT s.index_version,
           CASE WHEN EXISTS (
                    SELECT 1 FROM requests r
                    WHERE r.index_version <> s.index_version
                      AND r.timestamp >= date_trunc('day', s.first_seen)
                      AND r.timestamp < date_trunc('day', s.first_seen) + INTERVAL 1 DAY)
                THEN s.first_seen ELSE date_trunc('day', s.first_seen) END AS live_from
    FROM served s
    -- an index already serving on the first day of logs (a canary's two) took over from none
    WHERE s.first_seen >= (SELECT date_trunc('day', min(first_seen)) + INTERVAL 1 DAY
                           FROM served)
      AND s.index_version NOT IN (SELECT index_version FROM carried)
      -- nor did the index a recorded rebuild replaced, first logged after that went live
      AND s.index_version NOT IN (SELECT from_version FROM carried
                                  WHERE from_version IS NOT NULL
                                    AND live_from <= s.first_seen)
      -- when no carried row names it (only gold sets naming one index's chunks are loaded),
      -- the replaced index is told as sql/carry_gold_ids.sql tells it: first logged after the
      -- rebuilt index went live, it stopped serving while that one went on
      AND NOT EXISTS (SELECT 1 FROM carried c JOIN served n USING (index_version)
                      WHERE c.from_version IS NULL AND c.live_from <= s.first_seen
                        AND s.latest < n.latest)
)
SELECT index_version, live_from, from_version, true AS recorded FROM carried
UNION ALL
SELECT index_version, live_from, NULL, false FROM changes
ORDER BY live_from, index_version;

-- name: side_bounds
-- Where the sides around one index version's go-live stop short of their whole days: the first
-- day after it went live that it served none of (a rollback, or another index taking over
-- unrecorded), and the last day before it that it served alone (a trial of it before it went
-- live). NULL when none. Grain: one row.
-- Parameters: $route, $k, $gold_version, $index_version, $before_start, $before_end,
-- $after_start, $after_end.
SELECT min(window_start) FILTER (WHERE window_start >= $after_start
                                   AND window_start < $after_end
                                   AND NOT list_contains(index_versions, $index_version))
           AS after_stop,
       max(window_start) FILTER (WHERE window_start >= $before_start
                                   AND window_start < $before_end
                                   AND index_versions = [$index_version]) AS before_stop
FROM window_metrics
WHERE grain = 'day' AND slice = 'all' AND route = $route AND k = $k
  AND gold_version = $gold_version;

-- name: rebuild_sides
-- The day windows of [$before_start, $before_end) and [$after_start, $after_end) pooled per
-- side: summed n and recall sums with the cluster sums the interval needs (a session is a
-- cluster per day, as the drift step pools days), the requests that found all they needed
-- (full_sum: when it equals recall_sum, every recall is 0 or 1), and the days with scored
-- requests.
-- Grain: one row per side with data ('before', 'after').
-- Parameters: $route, $k, $gold_version, $before_start, $before_end, $after_start, $after_end.
SELECT CASE WHEN window_start < $before_end THEN 'before' ELSE 'after' END AS side,
       count(*) FILTER (WHERE n > 0) AS days, CAST(sum(n) AS BIGINT) AS n,
       CAST(sum(n_clusters) AS BIGINT) AS n_clusters, sum(recall_sum) AS recall_sum,
       sum(recall_cluster_sq) AS recall_cluster_sq,
       sum(recall_cluster_cross) AS recall_cluster_cross, sum(size_sq) AS size_sq,
       bool_or(any_session) AS any_session, sum(full_sum) AS full_sum,
       max(max_size) AS max_size,
       -- the days' clusters by size, for the CR2 sums at the side's pooled n; a day of an
       -- earlier release without them has them from its sums when its clusters are single
       -- requests, and leaves the side on CR1 (hist_missing) when they are not
       flatten(list(coalesce(size_hist, CASE WHEN max_size <= 1 AND n > 0 THEN [
           {'size': 1::BIGINT, 'clusters': n_clusters, 'recall_s': recall_sum,
            'recall_sq': recall_cluster_sq, 'pass_s': pass_sum, 'pass_sq': pass_cluster_sq,
            'full_s': full_sum, 'full_sq': full_cluster_sq}] END))) AS size_hist,
       bool_or(size_hist IS NULL AND max_size > 1) AS hist_missing
FROM window_sums
WHERE grain = 'day' AND slice = 'all' AND route = $route AND k = $k
  AND gold_version = $gold_version
  AND ((window_start >= $before_start AND window_start < $before_end)
       OR (window_start >= $after_start AND window_start < $after_end))
GROUP BY side;

-- name: rebuild_carried
-- The gold chunks of the scope's gold set per how they were carried to one index version (a
-- chunk carried to several IDs counts once). Grain: one row per how.
-- Parameters: $index_version, $gold_version.
SELECT how, count(DISTINCT gold_chunk_id) AS chunks
FROM carried_gold_ids
WHERE index_version = $index_version AND gold_version = $gold_version
GROUP BY how;

-- name: gold_set_names
-- The index version whose chunks a gold set names (`ingest gold --index-version`), NULL when
-- it is carried by rebuilds. Parameters: $gold_version.
SELECT index_version FROM gold_versions WHERE gold_version = $gold_version;

-- name: named_compared
-- The gold chunks of a gold set that names one index's chunks per how they are compared on
-- each other index (a chunk compared as several IDs counts once).
-- Grain: one row per other index version x how. Parameters: $gold_version.
SELECT index_version, how, count(DISTINCT gold_chunk_id) AS chunks
FROM named_gold_ids
WHERE gold_version = $gold_version
GROUP BY ALL
ORDER BY index_version, how;

-- name: rebuild_not_carried
-- The gold chunks of the scope's gold set that were not carried to one index version (gone,
-- unknown), one row per golden that needs them, with its misses of that chunk among the
-- scope's scored requests the rebuilt index served; at most $limit rows, `total` counting all.
-- Grain: one row per golden x gold chunk, gone first. Parameters: $route, $gold_version,
-- $index_version, $limit.
WITH lost AS (
    SELECT k.gold_chunk_id, k.how, k.from_version, g.gold_id
    FROM carried_gold_ids k
    JOIN goldens g ON g.gold_version = k.gold_version
                  AND list_contains(g.gold_chunk_ids, k.gold_chunk_id)
    WHERE k.index_version = $index_version AND k.gold_version = $gold_version
      AND k.how IN ('gone', 'unknown')
),
misses AS (
    SELECT m.gold_id, m.chunk_id AS gold_chunk_id, count(*) AS misses
    FROM miss_causes m
    JOIN scored_requests($route, $gold_version) s USING (request_id)
    WHERE m.route = $route AND m.gold_version = $gold_version
      AND m.index_version = $index_version
      AND m.chunk_id IN (SELECT gold_chunk_id FROM lost)
    GROUP BY ALL
)
SELECT l.gold_id, l.gold_chunk_id AS chunk_id, l.how, l.from_version,
       coalesce(m.misses, 0) AS misses, count(*) OVER () AS total
FROM lost l
LEFT JOIN misses m USING (gold_id, gold_chunk_id)
ORDER BY l.how, l.gold_chunk_id, l.gold_id
LIMIT $limit;

-- name: rebuild_served
-- The scope's scored requests one index version served (n of the not-carried table).
-- Grain: one row. Parameters: $route, $gold_version, $index_version.
SELECT count(*) AS n
FROM scored_requests($route, $gold_version)
WHERE index_version = $index_version;
