-- report_window_cutoffs: the cutoffs k that window_metrics holds for a route, from which the
-- report picks its default k.
-- Grain: one row per distinct k, ascending. Parameters: $route.

SELECT DISTINCT k FROM window_metrics WHERE route = $route ORDER BY k
