-- report_daily_recall: the daily series of the report (mean recall, pass and full-coverage
-- rates with their intervals, index versions and size) from window_metrics, slice 'all'.
-- Grain: one row per day, ascending. Parameters: $route, $k, $gold_version.

SELECT CAST(window_start AS DATE) AS day, n, n_excluded, mean_recall, ci_low, ci_high,
       ci_method, pass_mark, pass_rate, pass_ci_low, pass_ci_high,
       full_coverage_rate, fc_ci_low, fc_ci_high, index_versions, max_index_size
FROM window_metrics
WHERE grain = 'day' AND slice = 'all' AND route = $route AND k = $k
  AND gold_version = $gold_version
ORDER BY window_start
