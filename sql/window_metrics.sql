-- window_metrics: sufficient statistics of recall per window x slice x route x gold version x
-- cutoff k, for the interval functions of pipeline/stats.py (pipeline/aggregate.py turns the
-- final SELECT into window_metrics rows).
-- Grain of the result: one row per window x slice x route x gold version x k.
-- Parameters: $start, $end (TIMESTAMP; whole windows: pipeline/aggregate.py runs it on a few
-- whole days at a time), $grain ('day' | 'hour'), $pass_mark, and $cutoffs (the k of windows
-- with nothing scored).
-- Slices: 'all', 'index_version=<v>', and '<tag>=<value>' for each tag. Cluster sums are per
-- session (a request without one is its own cluster), for recall and for the pass and
-- full-coverage indicators.
-- A request counts at a cutoff k only where recall_at_k has its row: the claims route does not
-- measure a request below its whole served context, so there n counts the requests measured
-- at k (never a 0 for the others; they are not in n_excluded either). mean_precision averages
-- the requests with a precision: NULL when none has one (nothing served, or the claims route).
-- Fractional sums go through exact_sum: each term rounded to 18 decimals and summed exactly, so
-- the result does not depend on the order DuckDB's threads add the terms in, and aggregating a
-- window twice (or in other batches of days) gives the same bits.

CREATE OR REPLACE TEMP MACRO exact_sum(x) AS sum(CAST(x AS DECIMAL(38, 18)))::DOUBLE;

-- every request of [$start, $end) with its window and the slices it belongs to (a list: the
-- joins below stay one row per request, and each row is repeated per slice only after them)
CREATE OR REPLACE TEMP TABLE agg_requests AS
SELECT
    r.request_id,
    date_trunc($grain, r.timestamp) AS window_start,
    r.index_version,
    r.index_size,
    -- a request without a session (or with a blank one, as earlier releases stored it) is
    -- its own cluster
    CASE WHEN trim(r.session_id, ' ' || chr(9) || chr(10) || chr(13)) <> '' THEN 's:' || r.session_id
         ELSE 'r:' || r.request_id END AS cluster_key,
    coalesce(trim(r.session_id, ' ' || chr(9) || chr(10) || chr(13)) <> '', false) AS in_session,
    -- tags as <key>=<value>: '=' and '\' in a key are escaped with '\', a key named like a
    -- built-in slice (or already starting with 'tag.') gets 'tag.' in front, a null value is
    -- no tag; so two different tags never share a slice
    list_distinct(['all', 'index_version=' || r.index_version]
        || coalesce(list_transform(
               list_filter(map_entries(r.tags), lambda e: e.value IS NOT NULL),
               lambda e: CASE WHEN e.key IN ('all', 'index_version') OR starts_with(e.key, 'tag.')
                              THEN 'tag.' ELSE '' END
                         || replace(replace(e.key, '\', '\\'), '=', '\=') || '=' || e.value),
           []::VARCHAR[])) AS slices
FROM requests r
WHERE r.timestamp >= $start AND r.timestamp < $end;

-- each scored request at each cutoff it was measured at, once per slice of it
CREATE OR REPLACE TEMP VIEW agg_scored AS
SELECT a.window_start, unnest(a.slices) AS slice, s.route, s.gold_version, rk.k, a.cluster_key,
       a.in_session, a.index_version, a.index_size, rk.recall, rk.precision
FROM agg_requests a
JOIN request_scores s ON s.request_id = a.request_id AND s.status = 'scored'
JOIN recall_at_k rk ON rk.request_id = s.request_id AND rk.route = s.route;

-- the moments of each group; its n weighs the clusters of the CR2 sums below
CREATE OR REPLACE TEMP TABLE agg_moments AS
SELECT window_start, slice, route, gold_version, k,
       count(*) AS n,
       exact_sum(recall) / count(*) AS mean_recall,
       exact_sum(recall) AS recall_sum,
       CASE WHEN count(*) > 1
            THEN greatest((exact_sum(recall * recall)
                           - exact_sum(recall) ** 2 / count(*)) / (count(*) - 1), 0)
            ELSE 0 END AS var_recall,
       exact_sum(precision) / count(precision) AS mean_precision,
       count(*) FILTER (WHERE recall >= $pass_mark) AS n_pass,
       count(*) FILTER (WHERE recall >= 1.0) AS n_full,
       bool_or(in_session) AS any_session,
       list(DISTINCT index_version ORDER BY index_version) AS index_versions,
       -- the requests measured at k each version served, in this slice (the drift step
       -- labels a window with the versions serving its own requests)
       histogram(index_version)::MAP(VARCHAR, BIGINT) AS version_counts,
       max(index_size) AS max_index_size
FROM agg_scored
GROUP BY ALL;

-- Each cluster of a group: its requests n_g, its sum of recalls s_g and of the pass and
-- full-coverage indicators. A request without a session is a cluster of one (n_g = 1, s_g
-- its recall, summed exactly like a session's), taken as it is rather than grouped one by
-- one. A table macro (a view takes no parameter): the two statements below read it each on
-- its own.
CREATE OR REPLACE TEMP MACRO agg_cluster_rows(pass_mark) AS TABLE
SELECT window_start, slice, route, gold_version, k,
       count(*) AS n_g, exact_sum(recall) AS s_g,
       count(*) FILTER (WHERE recall >= pass_mark) AS pass_g,
       count(*) FILTER (WHERE recall >= 1.0) AS full_g
FROM agg_scored
WHERE in_session
GROUP BY window_start, slice, route, gold_version, k, cluster_key
UNION ALL
SELECT window_start, slice, route, gold_version, k,
       1, CAST(recall AS DECIMAL(38, 18))::DOUBLE,
       (recall >= pass_mark)::INTEGER, (recall >= 1.0)::INTEGER
FROM agg_scored
WHERE NOT in_session;

-- The sums over clusters get a statement of their own, since next to the moments' their hash
-- tables would not fit a small memory limit at once.
-- cr2_*: the same sums with each cluster weighed by 1 / (n - n_g) (n the group's requests), so
-- that n * cr2_cluster_sq ... is sum_g w_g (S_g - n_g ybar)^2 with the bias-reduced (CR2,
-- Bell-McCaffrey) weight w_g = 1 / (1 - n_g / n), and cr2_size_b2 = sum_g (n_g^2 / (n (n -
-- n_g)))^2 for its degrees of freedom (pipeline/stats.py, bias_reduced_t_interval; the pass and
-- full-coverage indicators' in cluster_wilson_interval). Every term
-- is at most n^2, within exact_sum's range. A group of one cluster (n_g = n) has no interval:
-- its terms are 0.
CREATE OR REPLACE TEMP TABLE agg_clusters AS
WITH weighed AS (
    SELECT c.*, CASE WHEN c.n_g < g.n THEN 1.0 / (g.n - c.n_g) ELSE 0.0 END AS w,
           g.n
    FROM agg_cluster_rows($pass_mark) c
    JOIN agg_moments g USING (window_start, slice, route, gold_version, k)
)
SELECT window_start, slice, route, gold_version, k,
       count(*) AS n_clusters,
       exact_sum(s_g * s_g * w) AS cr2_cluster_sq,
       exact_sum(s_g * n_g * w) AS cr2_cluster_cross,
       exact_sum(n_g * n_g * w) AS cr2_size_sq,
       exact_sum((n_g * n_g * w / n) ** 2) AS cr2_size_b2,
       exact_sum(pass_g * pass_g * w) AS cr2_pass_cluster_sq,
       exact_sum(pass_g * n_g * w) AS cr2_pass_cluster_cross,
       exact_sum(full_g * full_g * w) AS cr2_full_cluster_sq,
       exact_sum(full_g * n_g * w) AS cr2_full_cluster_cross,
       exact_sum(s_g * s_g) AS sum_cluster_sq,
       exact_sum(s_g * n_g) AS sum_cluster_cross,
       sum(n_g * n_g) AS sum_size_sq,
       max(n_g) AS max_size,
       -- the same sums for the pass and full-coverage indicators (integers: exact)
       sum(pass_g * pass_g) AS pass_cluster_sq,
       sum(pass_g * n_g) AS pass_cluster_cross,
       sum(full_g * full_g) AS full_cluster_sq,
       sum(full_g * n_g) AS full_cluster_cross
FROM weighed
GROUP BY ALL;

-- size_hist: per cluster size n_g of the group, the clusters of that size and the sums of S_g
-- and S_g^2 of recall and of the pass and full-coverage indicators. Unlike the cr2_* sums
-- (weighed by the group's own n), these add up across windows: the drift step and a
-- rebuild's before/after pool days and weigh each cluster by 1 / (1 - n_g / n) of the pooled
-- n (pipeline.drift.cr2_sums). In a statement of its own, as the sums above.
CREATE OR REPLACE TEMP TABLE agg_sizes AS
WITH by_size AS (
    SELECT window_start, slice, route, gold_version, k, n_g,
           count(*) AS clusters, exact_sum(s_g) AS recall_s, exact_sum(s_g * s_g) AS recall_sq,
           sum(pass_g) AS pass_s, sum(pass_g * pass_g) AS pass_sq,
           sum(full_g) AS full_s, sum(full_g * full_g) AS full_sq
    FROM agg_cluster_rows($pass_mark)
    GROUP BY ALL
)
SELECT window_start, slice, route, gold_version, k,
       list({'size': n_g::BIGINT, 'clusters': clusters::BIGINT, 'recall_s': recall_s,
             'recall_sq': recall_sq, 'pass_s': pass_s::DOUBLE, 'pass_sq': pass_sq::DOUBLE,
             'full_s': full_s::DOUBLE, 'full_sq': full_sq::DOUBLE} ORDER BY n_g) AS size_hist
FROM by_size
GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE agg_stats AS
SELECT m.*, c.n_clusters, c.sum_cluster_sq, c.sum_cluster_cross, c.sum_size_sq,
       c.max_size, c.pass_cluster_sq, c.pass_cluster_cross, c.full_cluster_sq,
       c.full_cluster_cross, c.cr2_cluster_sq, c.cr2_cluster_cross, c.cr2_size_sq,
       c.cr2_size_b2, c.cr2_pass_cluster_sq, c.cr2_pass_cluster_cross, c.cr2_full_cluster_sq,
       c.cr2_full_cluster_cross, h.size_hist
FROM agg_moments m
JOIN agg_clusters c USING (window_start, slice, route, gold_version, k)
JOIN agg_sizes h USING (window_start, slice, route, gold_version, k);

-- every window x slice x route x gold version with scores, and its requests not scored
CREATE OR REPLACE TEMP TABLE agg_excluded AS
SELECT window_start, slice, route, gold_version,
       count(*) FILTER (WHERE status <> 'scored') AS n_excluded
FROM (
    SELECT a.window_start, unnest(a.slices) AS slice, s.route, s.gold_version, s.status
    FROM agg_requests a
    JOIN request_scores s ON s.request_id = a.request_id
)
GROUP BY ALL;

-- A window and slice with scores but no recall at any cutoff (its requests all excluded, or
-- scored on the claims route but measured at none of the cutoffs) still gets rows (n = 0, no
-- means), so its requests are counted: one per cutoff of the last score run.
INSERT INTO agg_stats BY NAME
WITH empty AS (
    SELECT e.window_start, e.slice, e.route, e.gold_version
    FROM agg_excluded e
    ANTI JOIN agg_stats s USING (window_start, slice, route, gold_version)
)
SELECT
    e.window_start, e.slice, e.route, e.gold_version,
    unnest($cutoffs::INTEGER[]) AS k,
    0 AS n, 0.0 AS recall_sum, 0.0 AS var_recall, 0 AS n_pass, 0 AS n_full, false AS any_session,
    list(DISTINCT a.index_version ORDER BY a.index_version) AS index_versions,
    MAP {}::MAP(VARCHAR, BIGINT) AS version_counts, max(a.index_size) AS max_index_size,
    0 AS n_clusters, 0.0 AS sum_cluster_sq, 0.0 AS sum_cluster_cross, 0 AS sum_size_sq,
    0 AS pass_cluster_sq, 0 AS pass_cluster_cross, 0 AS full_cluster_sq,
    0 AS full_cluster_cross, 0 AS max_size, 0.0 AS cr2_cluster_sq, 0.0 AS cr2_cluster_cross,
    0.0 AS cr2_size_sq, 0.0 AS cr2_size_b2, 0.0 AS cr2_pass_cluster_sq,
    0.0 AS cr2_pass_cluster_cross, 0.0 AS cr2_full_cluster_sq, 0.0 AS cr2_full_cluster_cross
FROM empty e
JOIN (SELECT window_start, unnest(slices) AS slice, index_version, index_size
      FROM agg_requests) a USING (window_start, slice)
GROUP BY e.window_start, e.slice, e.route, e.gold_version;

-- the requests are not needed past here: their memory goes back to the next batch
DROP TABLE agg_moments;
DROP VIEW agg_scored;
DROP TABLE agg_requests;

SELECT s.*, coalesce(e.n_excluded, 0) AS n_excluded
FROM agg_stats s
LEFT JOIN agg_excluded e USING (window_start, slice, route, gold_version)
ORDER BY window_start, slice, route, gold_version, k;
