-- report_route_versions: every route and gold set in request_scores with its scored requests,
-- so the report shows what else could be reported.
-- Grain: one row per route x gold_version. No parameters.

SELECT route, gold_version, count(*) FILTER (WHERE status = 'scored') AS scored
FROM request_scores GROUP BY ALL ORDER BY route, gold_version
