-- report_drift: the queries behind the report's drift section, one route, cutoff k and gold set
-- at a time, grain 'day': the slices drift_events holds, the daily mean-recall decisions of the
-- slices drawn, the episodes, the latest decision per slice and metric, and the retrieval
-- churn of the goldens asked on more than one day (requests and scored_requests of
-- report_macros.sql). Recall against index size reuses daily_recall of report_sections.sql.

-- name: drift_slices
-- The slices with drift rows in the scope, in the order the report draws them: 'all' first,
-- then slices with a drop or rise in any metric (most first), then the rest by name.
-- Grain: one row per slice. Parameters: $route, $k, $gold_version.
SELECT slice,
       count(*) FILTER (WHERE decision IN ('drop', 'rise')) AS moves,
       count(DISTINCT episode_id) AS episodes,
       CAST(max(window_start) AS DATE) AS latest
FROM drift_events
WHERE grain = 'day' AND route = $route AND k = $k AND gold_version = $gold_version
GROUP BY slice
ORDER BY slice <> 'all', moves = 0, moves DESC, slice;

-- name: drift_timeline
-- The daily mean-recall windows of the given slices: value, baseline, the interval of the
-- difference, the decision, the episode state and the index version serving the window.
-- Grain: one row per slice x day, by slice then day.
-- Parameters: $route, $k, $gold_version, $slices (VARCHAR[]).
SELECT slice, CAST(window_start AS DATE) AS day, index_version, change_point, n,
       CAST(baseline_start AS DATE) AS baseline_start, CAST(baseline_end AS DATE) AS baseline_end,
       baseline_n, value, baseline_value, delta, delta_low, delta_high, margin, method,
       decision, state, episode_id, min_detectable_delta, n_needed
FROM drift_events
WHERE grain = 'day' AND route = $route AND k = $k AND gold_version = $gold_version
  AND metric = 'mean_recall' AND list_contains($slices, slice)
ORDER BY slice, window_start;

-- name: drift_episodes
-- Every episode of the scope, in all three metrics: the day it opened, the day it resolved
-- (NULL while open), its direction (the decision that opened it), how many windows it held,
-- the method of the window that opened it, and its worst window (the largest move in its
-- direction) with the interval of the difference; `quiet_since` is the slice's last day when
-- the slice has had no windows since (an index version retired: nothing can resolve it).
-- Grain: one row per slice x metric x episode_id, by day opened.
-- Parameters: $route, $k, $gold_version.
WITH scope_rows AS (
    SELECT slice, window_start FROM drift_events
    WHERE grain = 'day' AND route = $route AND k = $k AND gold_version = $gold_version
),
last_days AS (
    SELECT slice, max(window_start) AS last_day,
           max(max(window_start)) OVER () AS scope_last_day
    FROM scope_rows GROUP BY slice
),
episode_rows AS (
    SELECT *,
           first_value(decision) OVER (
               PARTITION BY slice, metric, episode_id ORDER BY window_start
           ) AS direction
    FROM drift_events
    WHERE grain = 'day' AND route = $route AND k = $k AND gold_version = $gold_version
      AND episode_id IS NOT NULL
)
SELECT slice, metric, episode_id, any_value(direction) AS direction,
       CAST(coalesce(min(window_start) FILTER (WHERE state = 'opened'), min(window_start))
            AS DATE) AS opened,
       CAST(min(window_start) FILTER (WHERE state = 'resolved') AS DATE) AS resolved,
       count(*) FILTER (WHERE state IN ('opened', 'ongoing')) AS windows,
       arg_min(method, window_start) AS method,
       arg_min({'day': CAST(window_start AS DATE), 'delta': delta, 'low': delta_low,
                'high': delta_high, 'n': n},
               CASE WHEN direction = 'rise' THEN -delta ELSE delta END)
           FILTER (WHERE state IN ('opened', 'ongoing') AND delta IS NOT NULL) AS worst,
       CAST(any_value(l.last_day) FILTER (WHERE l.last_day < l.scope_last_day) AS DATE)
           AS quiet_since
FROM episode_rows
JOIN last_days l USING (slice)
GROUP BY slice, metric, episode_id
ORDER BY opened, slice <> 'all', slice, metric, episode_id;

-- name: drift_latest
-- The latest window of every slice and metric: its decision, and for an insufficient one the
-- smallest drop it could detect and the requests a window would need.
-- Grain: one row per slice x metric. Parameters: $route, $k, $gold_version.
SELECT slice, metric, CAST(window_start AS DATE) AS day, n, value, baseline_value, delta,
       delta_low, delta_high, margin, method, decision, state, min_detectable_delta, n_needed,
       index_version
FROM drift_events
WHERE grain = 'day' AND route = $route AND k = $k AND gold_version = $gold_version
QUALIFY row_number() OVER (PARTITION BY slice, metric ORDER BY window_start DESC) = 1
ORDER BY slice, metric;

-- name: retrieval_churn
-- How much the served chunks of the same golden move from one day it is asked to the next:
-- per golden and day (and index version), the set of the served top-k chunk IDs of its scored
-- requests (a chunk is served when its best place in its step's ranking is within the request's
-- k; for a one-step request that is list_slice(chunk_ids, 1, k)), compared by Jaccard overlap
-- |A ∩ B| / |A ∪ B| with the set over the previous day the golden was asked (any version).
-- Two empty sets overlap fully (1), as in scipy.spatial.distance.jaccard. The sets are rows
-- (golden, day, chunk), never lists, so that joins and counts that can spill to disk do the
-- work: |A ∩ B| is a join with the previous day's rows, |A ∪ B| = |A| + |B| − |A ∩ B|.
-- Grain: one row per day x index version with at least one golden compared, by day.
-- Columns: goldens (compared), mean_jaccard, requests (scored requests behind the compared
-- goldens that day), across_versions (goldens whose previous day had none of this version).
-- Parameters: $route, $gold_version.
WITH asked AS (
    SELECT s.gold_id, CAST(r.timestamp AS DATE) AS day, r.index_version,
           list_filter(r.chunk_ids, lambda c, i: r.chunk_ranks[i] <= r.k) AS served
    FROM scored_requests($route, $gold_version) AS s
    JOIN ranked_requests AS r USING (request_id)
),
per_version AS (
    SELECT gold_id, day, index_version, count(*) AS requests
    FROM asked
    GROUP BY gold_id, day, index_version
),
version_chunks AS (
    SELECT DISTINCT gold_id, day, index_version, chunk_id
    FROM (SELECT gold_id, day, index_version, unnest(served) AS chunk_id FROM asked)
),
day_chunks AS (
    SELECT DISTINCT gold_id, day, chunk_id FROM version_chunks
),
previous AS (
    SELECT gold_id, day,
           lag(day) OVER (PARTITION BY gold_id ORDER BY day) AS previous_day,
           lag(versions) OVER (PARTITION BY gold_id ORDER BY day) AS previous_versions
    FROM (SELECT gold_id, day, list(index_version) AS versions
          FROM per_version GROUP BY gold_id, day)
),
version_sizes AS (
    SELECT gold_id, day, index_version, count(*) AS chunks
    FROM version_chunks GROUP BY gold_id, day, index_version
),
day_sizes AS (
    SELECT gold_id, day, count(*) AS chunks FROM day_chunks GROUP BY gold_id, day
),
in_common AS (
    SELECT v.gold_id, v.day, v.index_version, count(*) AS common
    FROM version_chunks AS v
    JOIN previous AS p ON p.gold_id = v.gold_id AND p.day = v.day
    JOIN day_chunks AS d
      ON d.gold_id = v.gold_id AND d.day = p.previous_day AND d.chunk_id = v.chunk_id
    GROUP BY v.gold_id, v.day, v.index_version
),
compared AS (
    SELECT g.day, g.index_version, g.requests,
           NOT list_contains(p.previous_versions, g.index_version) AS across,
           coalesce(c.common, 0) AS common,
           coalesce(vs.chunks, 0) + coalesce(ds.chunks, 0) - coalesce(c.common, 0) AS either
    FROM per_version AS g
    JOIN previous AS p ON p.gold_id = g.gold_id AND p.day = g.day
    LEFT JOIN version_sizes AS vs
      ON vs.gold_id = g.gold_id AND vs.day = g.day AND vs.index_version = g.index_version
    LEFT JOIN day_sizes AS ds ON ds.gold_id = g.gold_id AND ds.day = p.previous_day
    LEFT JOIN in_common AS c
      ON c.gold_id = g.gold_id AND c.day = g.day AND c.index_version = g.index_version
    WHERE p.previous_day IS NOT NULL
)
SELECT day, index_version, count(*) AS goldens,
       -- summed exactly, so the same rows give the same bits whatever order they come in
       sum(CAST(CASE WHEN either = 0 THEN 1.0 ELSE common / either END AS DECIMAL(38, 18)))
           ::DOUBLE / count(*) AS mean_jaccard,
       CAST(sum(requests) AS BIGINT) AS requests,
       count(*) FILTER (WHERE across) AS across_versions
FROM compared
GROUP BY day, index_version
ORDER BY day, index_version;
