-- retire_settings: remove the rows of routes and grains no longer in force, so that `run`
-- leaves what a fresh build with the settings in force would (scores of a route taken out,
-- hourly metrics once hour is no grain). The judge's verdicts (judge_verdicts) and the claims
-- (golden_claims) stay: putting the claims route back costs no call for what was judged.
-- Grain: deletes only. Parameters: $routes, $grains (VARCHAR[] in force).

DELETE FROM request_scores WHERE NOT list_contains($routes, route);
DELETE FROM request_cutoffs WHERE NOT list_contains($routes, route);
DELETE FROM miss_causes WHERE NOT list_contains($routes, route);
DELETE FROM score_windows WHERE NOT list_contains($routes, route);
DELETE FROM window_metrics
WHERE NOT list_contains($routes, route) OR NOT list_contains($grains, grain);
DELETE FROM window_sums
WHERE NOT list_contains($routes, route) OR NOT list_contains($grains, grain);
DELETE FROM drift_events
WHERE NOT list_contains($routes, route) OR NOT list_contains($grains, grain);
