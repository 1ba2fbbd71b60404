-- clear_drift_events: the drift step's rows built on window metrics that changed. A window's
-- baseline and the sequential test depend on every window before it, and all slices and
-- routes of a window are judged together, so the rows of the given days and of every later
-- window go, on every route, with the rows of any window whose baseline pooled one of the
-- days; `drift` (or `run`) rebuilds them.
-- Grain: deletes from drift_events. Parameters: $days (TIMESTAMP[], UTC days).

DELETE FROM drift_events
WHERE window_start >= (SELECT min(d) FROM unnest($days::TIMESTAMP[]) AS t(d))
   -- and an earlier window whose baseline pooled one of them (a pinned baseline: dates or
   -- an index version's first windows can lie after the window judged)
   OR EXISTS (SELECT 1 FROM unnest($days::TIMESTAMP[]) AS t(d)
              WHERE baseline_start < d + INTERVAL 1 DAY AND baseline_end > d);
