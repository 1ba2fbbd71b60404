-- report_latest_slices: every slice of window_metrics on the latest day, for the report's
-- per-slice table.
-- Grain: one row per slice of the latest day: 'all' first, then index versions, then the rest
-- by name. Parameters: $route, $k, $gold_version.

SELECT CAST(window_start AS DATE) AS day, slice, n, n_excluded, mean_recall, ci_low,
       ci_high, ci_method, pass_mark, pass_rate, pass_ci_low, pass_ci_high,
       full_coverage_rate, fc_ci_low, fc_ci_high
FROM window_metrics
WHERE grain = 'day' AND route = $route AND k = $k AND gold_version = $gold_version
QUALIFY window_start = max(window_start) OVER ()
ORDER BY slice <> 'all', NOT starts_with(slice, 'index_version='), slice
