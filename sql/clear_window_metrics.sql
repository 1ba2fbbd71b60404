-- clear_window_metrics: the aggregate step's rows built on scores that changed: every window
-- (of any grain) that starts in one of the given UTC days, for one route (or all). pipeline.state runs
-- it when those days are re-scored; `aggregate` (or `run`) rebuilds them.
-- Grain: deletes from window_metrics and window_sums (written together). Parameters: $days (TIMESTAMP[], UTC days), $route
-- (NULL: every route).

DELETE FROM window_metrics
WHERE ($route IS NULL OR route = $route)
  AND date_trunc('day', window_start) IN (SELECT unnest($days::TIMESTAMP[]));

DELETE FROM window_sums
WHERE ($route IS NULL OR route = $route)
  AND date_trunc('day', window_start) IN (SELECT unnest($days::TIMESTAMP[]));
