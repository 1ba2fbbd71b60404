-- quality_checks: the queries of the data-quality checks (pipeline/quality.py): the frame of an
-- interval's log records that Great Expectations validates, and the warnings read from the
-- warehouse once the interval is loaded and scored.

-- name: records_frame
-- The records of the interval's files, in file and line order, as the checks see them.
-- `distinct_request_id` is the request_id of each distinct record and NULL for an identical
-- re-delivery (ingest loads those once), so a request_id that repeats in it has two contents.
-- A record that logged no k (or no rank) passes the check of it: Great Expectations' `mostly`
-- leaves NULLs out, and the tolerance is a share of the interval's records, not of those that
-- logged a k (1 bad k in 4 logged among 400 records is 0.25 %, not 25 %). `load_problem` is
-- ingest's reason to quarantine a record that passes the named checks that ingest quarantines
-- for, so that a defect is reported once and by name where a check names it.
-- Grain: one row per record read. Input: temp table quality_records. No parameters.
SELECT
    place, file_read, parsed, problem, request_id,
    CASE WHEN row_number() OVER (PARTITION BY request_id, digest ORDER BY file_no, line) = 1
         THEN request_id END AS distinct_request_id,
    timestamp, logged_timestamp, index_version, coalesce(k, 1) AS k, ranks,
    coalesce(min_rank, 1) AS min_rank, n_retrieved, has_gold_key,
    CASE WHEN request_id IS NOT NULL AND timestamp IS NOT NULL AND index_version IS NOT NULL
              AND n_retrieved IS NOT NULL AND coalesce(k, 1) >= 1
              AND coalesce(min_rank, 1) >= 1
         THEN load_problem END AS load_problem
FROM quality_records
ORDER BY file_no, line;

-- name: golden_matches
-- The interval's loaded requests, those looked up in a gold set (scored on some route), those
-- that matched a golden (a status other than 'no_gold_match' on some route), and one that was
-- looked up and matched none.
-- Grain: one row. Parameters: $start, $end.
WITH interval_requests AS (
    SELECT r.request_id,
           bool_or(s.request_id IS NOT NULL) AS looked_up,
           coalesce(bool_or(s.status <> 'no_gold_match'), false) AS matched
    FROM requests AS r
    LEFT JOIN request_scores AS s USING (request_id)
    WHERE r.timestamp >= $start AND r.timestamp < $end
    GROUP BY r.request_id
)
SELECT count(*) AS requests,
       count(*) FILTER (WHERE looked_up) AS looked_up,
       count(*) FILTER (WHERE matched) AS matched,
       min(request_id) FILTER (WHERE looked_up AND NOT matched) AS example
FROM interval_requests;

-- name: interval_log_files
-- The log files of an interval as far as the warehouse can tell: files that delivered a
-- request (or an identical copy of one) timed inside it, and files under a hive partition of
-- one of its days (which also finds a file whose records were all quarantined). A file that
-- spans several intervals belongs to each.
-- Grain: one row per file (ingest_files.source). Parameters: $start, $end, $partitions
-- (VARCHAR[], e.g. ['dt=2026-11-01']).
SELECT source FROM requests WHERE timestamp >= $start AND timestamp < $end
UNION
SELECT c.source FROM request_copies AS c JOIN requests AS r USING (request_id)
WHERE r.timestamp >= $start AND r.timestamp < $end
UNION
SELECT source FROM ingest_files
WHERE kind = 'logs'
  AND list_has_any(string_split(replace(source, '\', '/'), '/'), $partitions)
ORDER BY source;

-- name: quarantine_share
-- Records read from the given log files (ingest_files) and those of them in quarantine now,
-- with the most frequent quarantine reason.
-- Grain: one row. Parameters: $sources (VARCHAR[], absolute paths as ingest_files has them).
SELECT
    (SELECT count(*) FROM ingest_files
     WHERE kind = 'logs' AND list_contains($sources, source)) AS files,
    (SELECT coalesce(sum(n_read), 0) FROM ingest_files
     WHERE kind = 'logs' AND list_contains($sources, source)) AS n_read,
    (SELECT count(*) FROM quarantine
     WHERE kind = 'logs' AND list_contains($sources, source)) AS n_quarantined,
    (SELECT mode(reason) FROM quarantine
     WHERE kind = 'logs' AND list_contains($sources, source)) AS top_reason;
