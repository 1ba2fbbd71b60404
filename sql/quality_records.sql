-- quality_records: add one staged and judged log file to the data-quality frame of an interval
-- (temp table quality_records, sql/quality_frame.sql), which pipeline/quality.py validates with
-- Great Expectations before anything is loaded.
-- Grain: one row per record read (non-blank line or Parquet row), readable or not. Input:
-- stage_requests and stage_rejects (sql/stage_logs_jsonl.sql, or pipeline/ingest/logs.py for
-- Parquet) and stage_checked (sql/validate_logs.sql).
-- Parameters: $file_no (the file's place in the interval's list), $place (the file as the
-- checks name it, followed by 'line' or 'row'), $first_year and $last_year (the years a
-- timestamp may have, as validate_logs.sql reads them: one outside is a bad timestamp).
-- Values are the record's as logged (k only where given); the timestamp is read by the rules
-- ingest applies (validate_logs.sql), so the gate and the load agree on what a timestamp is.
-- `digest` tells an identical re-delivery (loaded once by ingest) from a conflicting duplicate
-- as ingest does (validate_logs.sql's record_digest of the values as loaded: `Z` and `+00:00`,
-- k 5 and 5.0, JSON Lines and Parquet are the same record); a record ingest would quarantine
-- anyway is told apart by what was logged. `load_problem` is ingest's own reason for
-- quarantining the record (validate_logs.sql), so that the gate fails an interval ingest
-- would quarantine much of for any reason, not only those its named checks look at.

INSERT INTO quality_records
SELECT
    $file_no, r.line, $place || ' ' || r.line, true, true, NULL,
    CASE WHEN trim(r.logged.request_id) <> '' THEN r.logged.request_id END,
    CASE WHEN year(c.timestamp) BETWEEN $first_year AND $last_year THEN c.timestamp END,
    r.logged.timestamp,
    CASE WHEN trim(r.logged.index_version) <> '' THEN r.logged.index_version END,
    try_cast(r.logged.k AS DOUBLE),
    list_transform(r.items, lambda x: x.rank),
    list_min(list_transform(r.items, lambda x: x.rank)),
    len(r.items),
    coalesce(trim(r.logged.gold_id) <> '', false) OR coalesce(trim(r.logged.query) <> '', false),
    CASE WHEN c.reason IS NULL
         THEN record_digest(c.request_id, c.timestamp, c.query, c.gold_id, c.index_version,
                            c.index_size, c.k, c.session_id, c.turn, c.tags, c.retrieved)
         ELSE md5(to_json({'logged': r.logged, 'items': r.items})::VARCHAR) END,
    c.reason
FROM stage_requests AS r
JOIN stage_checked AS c USING (line);

INSERT INTO quality_records (file_no, line, place, parsed, problem)
SELECT $file_no, line, $place || ' ' || line, false, reason
FROM stage_rejects;
