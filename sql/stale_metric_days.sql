-- stale_metric_days: the UTC days whose window metrics of a grain are out of date
-- (pipeline.state): a window of the day has scores on the route but no metrics (scoring a day
-- invalidates its metrics; an aggregation may have covered only part of the day), or the day
-- was aggregated with another pass mark than the one in force, or before the rates' interval
-- method was recorded or its sufficient statistics kept (window_sums, with the requests each
-- index version served), or with a mean interval of an earlier release (`t`, `cluster_t`:
-- the t-interval of the recalls alone, too narrow on small skewed windows, and a point on
-- recalls that are all 0 or 1 or all equal; pipeline.stats.adjusted_t_interval), or, where
-- a session held more than one request, with CR1 (before the bias-reduced intervals:
-- window_sums.cr2_size_sq NULL; pipeline.stats.bias_reduced_t_interval), or without the
-- cluster-size histogram drift pools CR2 sums from (window_sums.size_hist NULL).
-- Grain: one row per day. Parameters: $grain, $pass_mark, $route.

SELECT DISTINCT date_trunc('day', window_start) AS day
FROM window_metrics
WHERE grain = $grain AND (pass_mark <> $pass_mark OR rate_ci_method IS NULL)
UNION
SELECT DISTINCT date_trunc('day', m.window_start) FROM window_metrics m
WHERE m.grain = $grain AND m.route = $route
  AND NOT EXISTS (
      SELECT 1 FROM window_sums w
      WHERE w.grain = m.grain AND w.route = m.route AND w.window_start = m.window_start)
UNION
SELECT DISTINCT date_trunc('day', window_start) FROM window_sums
WHERE grain = $grain AND route = $route AND version_counts IS NULL
UNION
SELECT DISTINCT date_trunc('day', window_start) FROM window_metrics
WHERE grain = $grain AND route = $route AND ci_method IN ('t', 'cluster_t')
UNION
SELECT DISTINCT date_trunc('day', window_start) FROM window_sums
WHERE grain = $grain AND route = $route AND max_size > 1
  AND (cr2_size_sq IS NULL OR size_hist IS NULL)
UNION
SELECT DISTINCT date_trunc('day', s.timestamp) FROM request_scores s
WHERE s.route = $route
  AND NOT EXISTS (
      SELECT 1 FROM window_metrics w
      WHERE w.grain = $grain AND w.route = $route
        AND w.window_start = date_trunc($grain, s.timestamp))
ORDER BY day;
