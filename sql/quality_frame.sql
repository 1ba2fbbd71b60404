-- quality_frame: the data-quality frame of one interval's log files, filled file by file by
-- sql/quality_records.sql and read by records_frame (sql/quality_checks.sql), on the in-memory
-- connection of pipeline/quality.py, never the warehouse.
-- Grain: temp table quality_records, one row per record read (non-blank line or Parquet row),
-- readable or not; a file that cannot be read at all is one unreadable record (line 0).
-- No parameters.

CREATE OR REPLACE TEMP TABLE quality_records (
    file_no          INTEGER NOT NULL,
    line             BIGINT  NOT NULL,
    place            VARCHAR NOT NULL,   -- e.g. 'dt=2026-11-01/p.jsonl line 3'
    file_read        BOOLEAN NOT NULL DEFAULT true,  -- false: the row of a file not readable
    parsed           BOOLEAN NOT NULL,   -- a JSON object (every Parquet row is one)
    problem          VARCHAR,            -- why a record is not: invalid JSON, not UTF-8, ...
    request_id       VARCHAR,            -- NULL when missing or blank
    timestamp        TIMESTAMP,          -- UTC; NULL when missing or unreadable
    logged_timestamp VARCHAR,
    index_version    VARCHAR,            -- NULL when missing or blank
    k                DOUBLE,             -- NULL when not logged (or not a number)
    ranks            DOUBLE[],           -- the logged rank of every retrieved chunk, all steps
    min_rank         DOUBLE,
    n_retrieved      INTEGER,            -- chunks logged, all steps; NULL when no list
    has_gold_key     BOOLEAN,            -- a gold_id, or a query to join a golden by
    digest           VARCHAR,
    load_problem     VARCHAR             -- why ingest would quarantine a parsed record, or NULL
);
