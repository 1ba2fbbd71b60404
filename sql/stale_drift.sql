-- stale_drift: window metrics of the grains kept that have no drift rows yet (pipeline.state).
-- Grain: at most one row. Parameters: $grains (VARCHAR[]).

SELECT 1
FROM window_metrics m
WHERE list_contains($grains::VARCHAR[], m.grain)
  AND NOT EXISTS (
      SELECT 1 FROM drift_events d
      WHERE d.grain = m.grain AND d.window_start = m.window_start AND d.slice = m.slice
        AND d.route = m.route AND d.k = m.k AND d.gold_version = m.gold_version)
LIMIT 1;
