-- report_drift: the queries behind the report's drift section, one route, cutoff k and gold set
-- at a time, grain 'day': the slices drift_events holds, the daily mean-recall decisions of the
-- slices drawn, the episodes and the latest decision per slice and metric. Recall against
-- index size reuses daily_recall of report_sections.sql; the retrieval churn is the script
-- sql/report_churn.sql.

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
       decision, state, episode_id, min_detectable_delta, n_needed,
       regexp_extract(built_with, 'baseline=([^;]*)', 1) AS baseline,
       -- windows between a trailing baseline and the window judged (anytime mode)
       coalesce(TRY_CAST(regexp_extract(built_with, ';gap=([0-9]+)', 1) AS INTEGER), 0) AS gap
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
