-- report_churn: the retrieval churn of the report's drift section. How much the served chunks
-- of the same golden move from one day it is asked to the next: per golden and day (and index
-- version), the set of the served top-k chunk IDs of its scored requests (a chunk is served
-- when its best place over all steps, ranked_requests.chunk_ranks, is within the request's
-- k), compared by Jaccard overlap |A ∩ B| / |A ∪ B| with the set over the previous day the
-- golden was asked (any version). Two empty sets overlap fully (1), as in
-- scipy.spatial.distance.jaccard.
-- The sets are rows (golden, chunk, day and version), never lists, each step one statement
-- into a TEMP table (TEMP objects work on a read-only warehouse too). The served chunks are
-- read once and sorted once, by golden and chunk, then day and version (a window, which
-- spills to disk under the memory limit): in that order each (golden, chunk, day, version)
-- is counted once (the row before it is not the same), each (golden, chunk, day) once for
-- the day's set, and the last earlier day the chunk was served to the golden is the frame
-- before the row's day. A chunk is in A ∩ B when that day is the previous day the golden was
-- asked (it was asked on every day it was served). Only tables of goldens and days join:
-- CTEs read several times by one statement, and a join of two tables of chunks, ran out of
-- 500MB at 10M requests; a GROUP BY bringing A's and B's chunks together took twice as long.
-- |A ∪ B| = |A| + |B| − |A ∩ B|.
-- pipeline/report/drift.py drops the TEMP tables after.
-- Grain of the last statement: one row per day x index version with at least one golden
-- compared, by day. Columns: goldens (compared), mean_jaccard, requests (scored requests
-- behind the compared goldens that day), across_versions (goldens whose previous day had none
-- of this version). Parameters: $route, $gold_version.

-- scored requests per golden, day and index version
CREATE OR REPLACE TEMP TABLE churn_per_version AS
SELECT s.gold_id, CAST(r.timestamp AS DATE) AS day, r.index_version, count(*) AS requests
FROM scored_requests($route, $gold_version) AS s
JOIN requests AS r USING (request_id)
GROUP BY s.gold_id, day, r.index_version;

-- each golden, day and version compared: its requests, the golden's previous day asked, and
-- whether that day had none of this version
CREATE OR REPLACE TEMP TABLE churn_asked AS
WITH previous AS (
    SELECT gold_id, day,
           lag(day) OVER (PARTITION BY gold_id ORDER BY day) AS previous_day,
           lag(versions) OVER (PARTITION BY gold_id ORDER BY day) AS previous_versions
    FROM (SELECT gold_id, day, list(index_version) AS versions
          FROM churn_per_version GROUP BY gold_id, day)
)
SELECT v.gold_id, v.day, v.index_version, v.requests, p.previous_day,
       NOT list_contains(p.previous_versions, v.index_version) AS across
FROM churn_per_version AS v
JOIN previous AS p USING (gold_id, day)
WHERE p.previous_day IS NOT NULL;

-- goldens and versions as numbers: a version's number orders it within a day in the sort key
-- (days since the first day × versions + version, never negative), so that one key orders by
-- day, then version
CREATE OR REPLACE TEMP TABLE churn_codes AS
SELECT gold_id, index_version,
       CAST(dense_rank() OVER (ORDER BY gold_id) AS INTEGER) AS gold,
       CAST(dense_rank() OVER (ORDER BY index_version) - 1 AS BIGINT) AS version,
       CAST(count(DISTINCT index_version) OVER () AS BIGINT) AS versions,
       (SELECT min(day) FROM churn_per_version) AS first_day
FROM (SELECT DISTINCT gold_id, index_version FROM churn_per_version WHERE gold_id IS NOT NULL);

-- per golden, day, version and the last earlier day each chunk was served to the golden: the
-- chunks (|A| summed over those days), and the chunks counted for the day's set (the first
-- version of the day each; |B| summed over the day's versions). A request whose chunk_ranks
-- are NULL was logged in ranking order with no chunk twice (see ranked_requests in
-- schema.sql), so its served chunks are simply its first k. A NULL golden is never compared,
-- so it has no number and its rows are left out.
CREATE OR REPLACE TEMP TABLE churn_counts AS
SELECT gold, key // versions AS dn, version, served_before // versions AS served_before,
       count(*) FILTER (WHERE before IS DISTINCT FROM key) AS chunks,
       count(*) FILTER (WHERE before // versions IS DISTINCT FROM key // versions) AS day_chunks
FROM (
    SELECT gold, key, version, versions,
           lag(key) OVER (PARTITION BY gold, chunk_id ORDER BY key) AS before,
           max(key) OVER (PARTITION BY gold, chunk_id ORDER BY key
                          RANGE BETWEEN UNBOUNDED PRECEDING AND version + 1 PRECEDING) AS served_before
    FROM (
        SELECT c.gold, c.version, c.versions,
               (CAST(r.timestamp AS DATE) - c.first_day) * c.versions + c.version AS key,
               unnest(CASE
                   WHEN r.chunk_ranks IS NULL
                       THEN list_transform(r.retrieved[1:r.k], lambda x: x.chunk_id)
                   ELSE list_filter(r.chunk_ids, lambda c, i: r.chunk_ranks[i] <= r.k)
               END) AS chunk_id
        FROM scored_requests($route, $gold_version) AS s
        JOIN requests AS r USING (request_id)
        JOIN churn_codes AS c ON c.gold_id = s.gold_id AND c.index_version = r.index_version
    )
)
GROUP BY ALL;

-- a golden with no served chunk on a day has no churn_counts row: |A| = |A ∩ B| = 0
WITH counts AS (
    SELECT c.gold_id, c.index_version, c.first_day + CAST(n.dn AS INTEGER) AS day,
           c.first_day + CAST(n.served_before AS INTEGER) AS served_before, n.chunks,
           n.day_chunks
    FROM churn_counts AS n JOIN churn_codes AS c USING (gold, version)
),
common AS (
    SELECT n.gold_id, n.day, n.index_version, CAST(sum(n.chunks) AS BIGINT) AS chunks,
           CAST(sum(n.chunks) FILTER (WHERE n.served_before = a.previous_day) AS BIGINT)
               AS common
    FROM counts AS n JOIN churn_asked AS a USING (gold_id, day, index_version)
    GROUP BY ALL
),
day_sizes AS (
    SELECT gold_id, day, CAST(sum(day_chunks) AS BIGINT) AS chunks FROM counts GROUP BY ALL
),
compared AS (
    SELECT a.day, a.index_version, a.requests, a.across,
           coalesce(c.common, 0) AS common,
           coalesce(c.chunks, 0) + coalesce(ds.chunks, 0) - coalesce(c.common, 0) AS either
    FROM churn_asked AS a
    LEFT JOIN common AS c USING (gold_id, day, index_version)
    LEFT JOIN day_sizes AS ds ON ds.gold_id = a.gold_id AND ds.day = a.previous_day
)
SELECT day, index_version, count(*) AS goldens,
       -- summed exactly, so the same rows give the same bits whatever order they come in
       sum(CAST(CASE WHEN either = 0 THEN 1.0 ELSE common / either END AS DECIMAL(38, 18)))
           ::DOUBLE / count(*) AS mean_jaccard,
       CAST(sum(requests) AS BIGINT) AS requests,
       count(*) FILTER (WHERE across) AS across_versions
FROM compared
GROUP BY day, index_version
ORDER BY day, index_version;
