-- clear_drift_events: the drift step's rows built on window metrics that changed. A window's
-- baseline and the sequential test depend on every window before it, and all slices and
-- routes of a window are judged together, so the rows of the given days and of every later
-- window go, on every route; `drift` (or `run`) rebuilds them.
-- Grain: deletes from drift_events. Parameters: $days (TIMESTAMP[], UTC days).

DELETE FROM drift_events
WHERE window_start >= (SELECT min(d) FROM unnest($days::TIMESTAMP[]) AS t(d));
