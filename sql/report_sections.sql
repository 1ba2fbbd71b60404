-- report_sections: the queries behind the report's figures and tables, one route, cutoff k
-- and gold set at a time: the daily series and the latest day per slice (window_metrics), the
-- recall@k curve, miss causes and worst goldens (scored_requests of report_macros.sql), and
-- the per-index-version table the CLI prints after a run.

-- name: daily_recall
-- The daily series (mean recall, pass and full-coverage rates with their intervals, index
-- versions and size) from window_metrics, slice 'all'.
-- Grain: one row per day, ascending. Parameters: $route, $k, $gold_version.
SELECT CAST(window_start AS DATE) AS day, n, n_excluded, mean_recall, ci_low, ci_high,
       ci_method, pass_mark, pass_rate, pass_ci_low, pass_ci_high,
       full_coverage_rate, fc_ci_low, fc_ci_high, index_versions, max_index_size
FROM window_metrics
WHERE grain = 'day' AND slice = 'all' AND route = $route AND k = $k
  AND gold_version = $gold_version
ORDER BY window_start;

-- name: recall_curve
-- The recall@k curve of the scored requests of one route and gold set: mean recall,
-- precision and hit rate at every cutoff, overall and per index version (as recall_at_k
-- gives them, read from request_cutoffs, one row per request, so that the join with the
-- scores is one row per request rather than one per request and cutoff).
-- Grain: one row per cutoff k (index_version NULL: all requests) and per index version x k.
-- Parameters: $route, $gold_version.
WITH counts AS (
    -- how many requests had each combination of counts at each cutoff: few distinct ones, so
    -- the means below add few exact terms, the same whatever order the rows come in
    SELECT index_version, k, needed, covered, served, relevant, count(*) AS n
    FROM (
        SELECT s.index_version, c.needed, unnest(c.cutoffs) AS k,
               unnest(c.covered) AS covered, unnest(c.served) AS served,
               unnest(c.relevant) AS relevant
        FROM request_cutoffs AS c
        JOIN scored_requests($route, $gold_version) AS s
          ON s.request_id = c.request_id AND s.route = c.route
    )
    WHERE covered IS NOT NULL   -- a cutoff the route did not measure (recall_at_k has no row)
    GROUP BY ALL
)
SELECT CASE WHEN grouping(index_version) = 1 THEN NULL ELSE index_version END
           AS index_version,
       -- means of exact sums (each term to 18 decimals, as recall_at_k's values): the same
       -- rows in any order, or summed on any number of threads, give the same bits
       k, CAST(sum(n) AS BIGINT) AS n,
       sum(n * CAST(covered / needed AS DECIMAL(38, 18)))::DOUBLE / sum(n) AS recall,
       sum(n * CAST(relevant / nullif(served, 0) AS DECIMAL(38, 18)))::DOUBLE
           / sum(n) FILTER (WHERE relevant / nullif(served, 0) IS NOT NULL) AS precision,
       CAST(coalesce(sum(n) FILTER (WHERE relevant / nullif(served, 0) IS NOT NULL), 0)
            AS BIGINT) AS n_precision,
       coalesce(sum(n) FILTER (WHERE covered > 0), 0) / sum(n) AS hit_rate
FROM counts
GROUP BY GROUPING SETS ((k), (index_version, k))
ORDER BY k;

-- name: curve_sizes
-- n per curve of the recall@k chart (scored requests of one route and gold set with at least
-- one recall_at_k row: request_cutoffs holds one row per request and route), with the index
-- version's first use to order the legend.
-- Grain: one row for all requests (index_version NULL, first), then one per index version.
-- Parameters: $route, $gold_version.
SELECT CASE WHEN grouping(s.index_version) = 1 THEN NULL ELSE s.index_version END
           AS index_version,
       count(*) AS n, min(s.timestamp) AS first_seen
FROM request_cutoffs AS c
JOIN scored_requests($route, $gold_version) AS s
  ON s.request_id = c.request_id AND s.route = c.route
WHERE len(list_filter(c.covered, lambda covered: covered IS NOT NULL)) > 0
GROUP BY GROUPING SETS ((), (s.index_version))
ORDER BY index_version IS NOT NULL, first_seen, index_version;

-- name: miss_counts
-- Missing gold chunks per index version and cause. Only misses of requests scored under this
-- route and gold set: stale rows never count.
-- Grain: one row per index_version x cause. Parameters: $route, $gold_version.
SELECT m.index_version, m.cause, count(*) AS misses,
       count(DISTINCT m.request_id) AS requests
FROM miss_causes AS m
WHERE m.route = $route AND m.gold_version = $gold_version
  AND m.request_id IN (SELECT request_id FROM scored_requests($route, $gold_version))
GROUP BY ALL;

-- name: scored_by_version
-- Scored requests of one route and gold set per index version, with the version's first use,
-- to order and scale the miss-cause bars.
-- Grain: one row per index version, by first use. Parameters: $route, $gold_version.
SELECT index_version, count(*) AS n, min(timestamp) AS first_seen
FROM scored_requests($route, $gold_version)
GROUP BY index_version ORDER BY first_seen, index_version;

-- name: requests_with_miss
-- Scored requests of one route and gold set that miss at least one gold chunk.
-- Grain: one row, the count. Parameters: $route, $gold_version.
-- grouped, then counted: a GROUP BY spills to disk under a small memory limit, where an
-- ungrouped count(DISTINCT ...) over millions of requests runs out of it
SELECT count(*)
FROM (SELECT request_id FROM miss_causes
      WHERE route = $route AND gold_version = $gold_version
      GROUP BY request_id) AS m
JOIN scored_requests($route, $gold_version) AS s
  ON s.request_id = m.request_id AND s.route = $route;

-- name: worst_goldens
-- The goldens with the lowest mean recall among the scored requests of one route and gold
-- set, with their question.
-- Grain: one row per gold_id with at least $min_n scored requests, lowest mean recall first.
-- Parameters: $route, $gold_version, $min_n, $limit (rows at most).
WITH question AS (
    SELECT gold_id, any_value(question) AS question FROM goldens
    WHERE gold_version = $gold_version GROUP BY gold_id
)
SELECT s.gold_id, any_value(q.question) AS question, count(*) AS n,
       -- an exact sum: goldens of the same mean rank by gold_id whatever the rows' order
       sum(CAST(s.recall AS DECIMAL(38, 18)))::DOUBLE / count(*) AS mean_recall
FROM scored_requests($route, $gold_version) AS s LEFT JOIN question AS q USING (gold_id)
GROUP BY s.gold_id
HAVING count(*) >= $min_n
ORDER BY mean_recall, s.gold_id
LIMIT $limit;

-- name: worst_missing_chunks
-- The gold chunks the scored requests of the given goldens miss, with the cause and how
-- often.
-- Grain: one row per gold_id x chunk_id x cause.
-- Parameters: $route, $gold_version, $gold_ids (VARCHAR[]).
SELECT m.gold_id, m.chunk_id, m.cause, count(*) AS misses
FROM miss_causes AS m
JOIN scored_requests($route, $gold_version) AS s
  ON s.request_id = m.request_id AND s.route = m.route
WHERE m.route = $route AND m.gold_version = $gold_version
  AND list_contains($gold_ids, m.gold_id)
GROUP BY ALL;

-- name: worst_examples
-- One example request per given golden: the lowest-recall request shows the failure best;
-- the newest one breaks ties.
-- Grain: one row per gold_id. Parameters: $route, $gold_version, $gold_ids (VARCHAR[]).
SELECT s.gold_id, s.request_id, s.recall, s.timestamp, r.query
FROM scored_requests($route, $gold_version) AS s JOIN requests AS r USING (request_id)
WHERE list_contains($gold_ids, s.gold_id)
QUALIFY row_number() OVER (
    PARTITION BY s.gold_id ORDER BY s.recall, s.timestamp DESC, s.request_id
) = 1;

-- name: latest_slices
-- Every slice of window_metrics on the latest day, for the per-slice table.
-- Grain: one row per slice of the latest day: 'all' first, then index versions, then the rest
-- by name. Parameters: $route, $k, $gold_version.
SELECT CAST(window_start AS DATE) AS day, slice, n, n_excluded, mean_recall, ci_low,
       ci_high, ci_method, pass_mark, pass_rate, pass_ci_low, pass_ci_high,
       full_coverage_rate, fc_ci_low, fc_ci_high, rate_ci_method
FROM window_metrics
WHERE grain = 'day' AND route = $route AND k = $k AND gold_version = $gold_version
QUALIFY window_start = max(window_start) OVER ()
ORDER BY slice <> 'all', NOT starts_with(slice, 'index_version='), slice;

-- name: absent_slices
-- The slices of window_metrics with no row on the latest day (no request of theirs that day),
-- with the last day they had, for the note under the per-slice table.
-- Grain: one row per such slice, by name. Parameters: $route, $k, $gold_version.
SELECT slice, CAST(max(window_start) AS DATE) AS last_day
FROM window_metrics
WHERE grain = 'day' AND route = $route AND k = $k AND gold_version = $gold_version
GROUP BY slice
HAVING max(window_start) < (SELECT max(window_start) FROM window_metrics
                            WHERE grain = 'day' AND route = $route AND k = $k
                              AND gold_version = $gold_version)
ORDER BY slice;

-- name: index_version_summary
-- The shape of drift at a glance, for the table the CLI prints after a run: per index version
-- and gold set, the days on which requests used that version (its own slice, so a day that
-- mixes versions, as in a canary or blue/green rollout, counts for each with its own
-- requests), their requests, mean recall on the first, last and lowest day, and the largest
-- index size. Every gold set is listed, not only the report's: the table shows what the
-- warehouse holds.
-- Grain: one row per index version x gold version, by first day; slices 'index_version=<v>',
-- grain 'day'. Parameters: $route, $k (the headline cutoff).
WITH days AS (
    SELECT window_start, n, mean_recall, gold_version,
           index_versions[1] AS index_version, max_index_size
    FROM window_metrics
    WHERE grain = 'day' AND starts_with(slice, 'index_version=') AND route = $route AND k = $k
      AND n > 0
)
SELECT index_version, gold_version, count(*) AS days, CAST(sum(n) AS BIGINT) AS n,
       arg_min(mean_recall, window_start) AS first_recall,
       arg_max(mean_recall, window_start) AS last_recall,
       min(mean_recall) AS lowest, max(max_index_size) AS index_size
FROM days
GROUP BY ALL
ORDER BY min(window_start), index_version;
