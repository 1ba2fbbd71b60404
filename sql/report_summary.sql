-- report_summary: the queries behind the report's header summary: what was ingested, how the
-- requests of the scope were scored and joined to their golden, what else the warehouse holds
-- (other routes and gold sets), and what was quarantined. Per-request numbers read
-- scored_requests (report_macros.sql).

-- name: request_span
-- Header counts: how many requests were ingested and the first and last timestamp among them.
-- Grain: one row over all of requests. No parameters.
SELECT count(*) AS n, min(timestamp) AS first, max(timestamp) AS last FROM requests;

-- name: status_counts
-- Requests per scoring status for one route and gold set (a request that matched no golden
-- carries the gold set it was looked up in).
-- Grain: one row per status, 'scored' first, then by count. Parameters: $route, $gold_version.
SELECT status, count(*) AS n FROM request_scores
WHERE route = $route AND gold_version = $gold_version
GROUP BY status ORDER BY (status = 'scored') DESC, n DESC, status;

-- name: gold_joins
-- How requests of one route and gold set found their golden: by gold_id or by query text,
-- and how many of each kind found none.
-- Grain: one row. Parameters: $route, $gold_version.
SELECT
    count(*) FILTER (WHERE s.status <> 'no_gold_match' AND r.gold_id IS NOT NULL)
        AS by_gold_id,
    count(*) FILTER (WHERE s.status <> 'no_gold_match' AND r.gold_id IS NULL)
        AS by_query,
    count(*) FILTER (WHERE s.status = 'no_gold_match' AND r.gold_id IS NOT NULL)
        AS unmatched_gold_id,
    count(*) FILTER (WHERE s.status = 'no_gold_match' AND r.gold_id IS NULL)
        AS unmatched_query
FROM request_scores AS s JOIN requests AS r USING (request_id)
WHERE s.route = $route AND s.gold_version = $gold_version;

-- name: unscored_requests
-- Ingested requests that have no score at all under a route (not yet scored, as opposed to
-- scored and excluded).
-- Grain: one row, the count. Parameters: $route.
SELECT count(*) FROM requests AS r
WHERE NOT EXISTS (
    SELECT 1 FROM request_scores AS s
    WHERE s.request_id = r.request_id AND s.route = $route
);

-- name: other_gold_versions
-- Scores of a route under a gold set other than the report's, which the report leaves out.
-- Grain: one row, the count. Parameters: $route, $gold_version.
SELECT count(*) FROM request_scores
WHERE route = $route AND gold_version IS DISTINCT FROM $gold_version;

-- name: served_k_counts
-- The served k of the scored requests of one route and gold set, the k behind the
-- per-request numbers (statuses, miss causes, worst goldens).
-- Grain: one row per served k, ascending. Parameters: $route, $gold_version.
SELECT k, count(*) AS n FROM scored_requests($route, $gold_version)
GROUP BY k ORDER BY k;

-- name: route_versions
-- Every route and gold set in request_scores with its scored requests, so the report shows
-- what else could be reported.
-- Grain: one row per route x gold_version. No parameters.
SELECT route, gold_version, count(*) FILTER (WHERE status = 'scored') AS scored
FROM request_scores GROUP BY ALL ORDER BY route, gold_version;

-- name: quarantine_total
-- How many input records were quarantined.
-- Grain: one row, the count. No parameters.
SELECT count(*) FROM quarantine;

-- name: quarantine_reasons
-- The most frequent quarantine reasons, each with the kinds of input it hit and its first
-- record (by source and line) as an example.
-- Grain: one row per reason, most frequent first. Parameters: $top (rows at most).
SELECT reason, count(*) AS n, list(DISTINCT kind ORDER BY kind) AS kinds,
       arg_min(source, (source, line)) AS source, arg_min(line, (source, line)) AS line,
       arg_min(raw, (source, line)) AS raw
FROM quarantine GROUP BY reason ORDER BY n DESC, reason LIMIT $top;

-- name: quarantine_reason_count
-- How many distinct quarantine reasons there are, so the report can say how many it did not
-- list.
-- Grain: one row, the count. No parameters.
SELECT count(DISTINCT reason) FROM quarantine;

-- name: ingest_files
-- Ingested files and their records read, loaded and quarantined.
-- Grain: one row per kind of input (logs, gold, index). No parameters.
SELECT kind, count(*) AS files, sum(n_read) AS n_read, sum(n_loaded) AS n_loaded,
       sum(n_quarantined) AS n_quarantined
FROM ingest_files GROUP BY kind ORDER BY kind;
