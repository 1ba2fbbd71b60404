-- report_scope: the queries that decide a report's scope (route, cutoff k, gold-set version):
-- the tables present, the defaults when none is asked for, and the values that may be asked.

-- name: list_tables
-- The tables and views of the open warehouse, so the report can say which of the tables it
-- reads are missing (recall_at_k is a view over request_cutoffs).
-- Grain: one row per table or view of the current database. No parameters.
SELECT table_name FROM information_schema.tables
WHERE table_catalog = current_database();

-- name: scored_routes
-- The routes a report may default to: those with a window holding a scored request.
-- Grain: one row per route. No parameters.
SELECT DISTINCT route FROM window_metrics WHERE n > 0;

-- name: newest_gold_version
-- The default gold set of a report, the newest loaded one.
-- Grain: at most one row, the gold_version with the highest seq in gold_versions (ties by
-- name). No parameters.
SELECT gold_version FROM gold_versions ORDER BY seq DESC, gold_version LIMIT 1;

-- name: common_gold_version
-- The fallback default gold set of a report when gold_versions has none, the most common one
-- in window_metrics.
-- Grain: at most one row (ties go to the greatest name). No parameters.
SELECT gold_version FROM window_metrics
GROUP BY gold_version ORDER BY count(*) DESC, gold_version DESC LIMIT 1;

-- name: scored_gold_version
-- The last-resort default gold set of a report, the most common one among the scored requests
-- of a route.
-- Grain: at most one row (ties go to the greatest name). Parameters: $route.
SELECT gold_version FROM request_scores
WHERE route = $route AND status = 'scored' AND gold_version IS NOT NULL
GROUP BY gold_version ORDER BY count(*) DESC, gold_version DESC LIMIT 1;

-- name: known_gold_versions
-- Every gold-set version a report can show: loaded or scored with.
-- Grain: one row per version. No parameters.
SELECT gold_version FROM gold_versions
UNION
SELECT DISTINCT gold_version FROM request_scores WHERE gold_version IS NOT NULL
ORDER BY 1;

-- name: common_served_k
-- The most common served k among the scored requests of a route, the default headline cutoff
-- of a report.
-- Grain: at most one row (ties go to the larger k). Parameters: $route.
SELECT k FROM request_scores WHERE status = 'scored' AND route = $route
GROUP BY k ORDER BY count(*) DESC, k DESC LIMIT 1;

-- name: window_cutoffs
-- The cutoffs k that window_metrics holds for a route: the values --k may take, and those the
-- default k is picked from.
-- Grain: one row per distinct k, ascending. Parameters: $route.
SELECT DISTINCT k FROM window_metrics WHERE route = $route ORDER BY k;
