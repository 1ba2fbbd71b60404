-- void_scored_days: forget that the scores of some UTC days are current, because the requests
-- of those days changed (ingest). The scores stay readable; pipeline.state then finds the days
-- stale (no record of being scored whole) and `run` rescores them.
-- Grain: deletes from score_windows. Parameters: $days (TIMESTAMP[], UTC days), $route (NULL:
-- every route).

DELETE FROM score_windows
WHERE ($route IS NULL OR route = $route)
  AND day IN (SELECT unnest($days::TIMESTAMP[]));
