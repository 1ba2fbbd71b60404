-- report_churn: the retrieval churn of the report's drift section. How much the served chunks
-- of the same golden move from one day it is asked to the next: per golden and day (and index
-- version), the set of the served top-k chunk IDs of its scored requests (a chunk is served
-- when its best place over all steps, ranked_requests.chunk_ranks, is within the request's
-- k), compared by Jaccard overlap |A ∩ B| / |A ∪ B| with the set over the previous day the
-- golden was asked (any version). Two empty sets overlap fully (1), as in
-- scipy.spatial.distance.jaccard.
-- The sets are rows (golden, day, chunk), never lists, and each step is one statement into a
-- TEMP table (TEMP objects work on a read-only warehouse too), a DISTINCT or a GROUP BY that
-- spills to disk under the memory limit, the tables of chunks joined only with small ones: CTEs
-- read several times by one statement, and a join of two tables of chunks, ran out of 500MB at
-- 10M requests.
-- |A ∩ B| counts the chunks found on both days, |A ∪ B| = |A| + |B| − |A ∩ B|.
-- pipeline/report/drift.py drops the TEMP tables after.
-- Grain of the last statement: one row per day x index version with at least one golden
-- compared, by day. Columns: goldens (compared), mean_jaccard, requests (scored requests
-- behind the compared goldens that day), across_versions (goldens whose previous day had none
-- of this version). Parameters: $route, $gold_version.

-- (golden, day, index version, served chunk), distinct. A request whose chunk_ranks are NULL
-- was logged in ranking order with no chunk twice (see ranked_requests in schema.sql), so its
-- served chunks are simply its first k.
CREATE OR REPLACE TEMP TABLE churn_sets AS
SELECT DISTINCT gold_id, day, index_version, chunk_id
FROM (
    SELECT s.gold_id, CAST(r.timestamp AS DATE) AS day, r.index_version,
           unnest(CASE
               WHEN r.chunk_ranks IS NULL
                   THEN list_transform(r.retrieved[1:r.k], lambda x: x.chunk_id)
               ELSE list_filter(r.chunk_ids, lambda c, i: r.chunk_ranks[i] <= r.k)
           END) AS chunk_id
    FROM scored_requests($route, $gold_version) AS s
    JOIN requests AS r USING (request_id)
);

-- (golden, day, served chunk) over the day's versions: the B of the next day asked
CREATE OR REPLACE TEMP TABLE churn_days AS
SELECT DISTINCT gold_id, day, chunk_id FROM churn_sets;

-- each golden, day and version compared: its requests, the golden's previous day asked, and
-- whether that day had none of this version
CREATE OR REPLACE TEMP TABLE churn_asked AS
WITH per_version AS (
    SELECT s.gold_id, CAST(r.timestamp AS DATE) AS day, r.index_version, count(*) AS requests
    FROM scored_requests($route, $gold_version) AS s
    JOIN requests AS r USING (request_id)
    GROUP BY s.gold_id, day, r.index_version
),
previous AS (
    SELECT gold_id, day,
           lag(day) OVER (PARTITION BY gold_id ORDER BY day) AS previous_day,
           lag(versions) OVER (PARTITION BY gold_id ORDER BY day) AS previous_versions
    FROM (SELECT gold_id, day, list(index_version) AS versions
          FROM per_version GROUP BY gold_id, day)
)
SELECT v.gold_id, v.day, v.index_version, v.requests, p.previous_day,
       NOT list_contains(p.previous_versions, v.index_version) AS across
FROM per_version AS v
JOIN previous AS p USING (gold_id, day)
WHERE p.previous_day IS NOT NULL;

-- |A| and |A ∩ B| of each one compared, by aggregates alone (they spill; a join with the
-- previous day's rows ran out of 500MB at 10M requests): each chunk of the previous day asked
-- is brought forward to the day compared (and to each of its versions: a small join), and a
-- chunk counts in common when it is there from both sides
CREATE OR REPLACE TEMP TABLE churn_common AS
SELECT gold_id, day, index_version,
       count(*) FILTER (WHERE in_a) AS chunks,
       count(*) FILTER (WHERE in_a AND in_b) AS common
FROM (
    SELECT gold_id, day, index_version, chunk_id,
           bool_or(NOT from_b) AS in_a, bool_or(from_b) AS in_b
    FROM (
        SELECT c.gold_id, c.day, c.index_version, c.chunk_id, false AS from_b
        FROM churn_sets AS c
        SEMI JOIN churn_asked AS a USING (gold_id, day, index_version)
        UNION ALL
        SELECT a.gold_id, a.day, a.index_version, p.chunk_id, true AS from_b
        FROM churn_days AS p
        JOIN churn_asked AS a ON a.gold_id = p.gold_id AND a.previous_day = p.day
    )
    GROUP BY gold_id, day, index_version, chunk_id
)
GROUP BY gold_id, day, index_version;

-- |B| of every golden and day
CREATE OR REPLACE TEMP TABLE churn_day_sizes AS
SELECT gold_id, day, count(*) AS chunks FROM churn_days GROUP BY gold_id, day;

WITH compared AS (
    -- a golden with no served chunk on a day has no churn_common row: |A| = |A ∩ B| = 0
    SELECT a.day, a.index_version, a.requests, a.across,
           coalesce(c.common, 0) AS common,
           coalesce(c.chunks, 0) + coalesce(ds.chunks, 0) - coalesce(c.common, 0) AS either
    FROM churn_asked AS a
    LEFT JOIN churn_common AS c USING (gold_id, day, index_version)
    LEFT JOIN churn_day_sizes AS ds ON ds.gold_id = a.gold_id AND ds.day = a.previous_day
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
