-- report_other_gold_versions: scores of a route under a gold set other than the report's,
-- which the report leaves out.
-- Grain: one row, the count. Parameters: $route, $gold_version.

SELECT count(*) FROM request_scores
WHERE route = $route AND gold_version IS DISTINCT FROM $gold_version
