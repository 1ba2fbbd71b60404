-- report_macros: the scope every per-request number of the report is read in, defined once.
-- TEMP, so it lives only on the report's connection and works on a read-only warehouse.
-- Parameters are named _route and _gold_version: a bare route or gold_version inside the body
-- is the column, never the parameter.

-- scored_requests: the request_scores rows of one route scored against one gold set. Rows of
-- another route, another gold set or another status (no_gold_match, no_evidence) are left out.
-- Grain: one row per scored request of the route. Parameters: _route, _gold_version.
CREATE OR REPLACE TEMP MACRO scored_requests(_route, _gold_version) AS TABLE
SELECT * FROM request_scores
WHERE route = _route AND gold_version = _gold_version AND status = 'scored';
