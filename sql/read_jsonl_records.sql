-- read_jsonl_records: let DuckDB's JSON reader parse the records of one JSON Lines file
-- (gzipped or not) in one pass over every core, each field as its JSON text
-- (pipeline/ingest/fields.jsonl_record_columns). Grain: stage_records one row per line the
-- reader returned, in file order; stage_exact one row per line whose record the staging
-- reads from its text instead, exactly as sql/stage_logs_jsonl.sql reads every line;
-- stage_numbered the rows with their line.
-- Parameters: $path, $columns, $max_object_size (bytes, above the longest line),
-- $leaf_items (as in stage_logs_jsonl.sql). Ends with the count of both tables.
-- The reader skips a blank line and returns a line it cannot parse (invalid JSON, not
-- UTF-8, not an object) as a row of NULLs: pipeline/ingest/logs.py uses these rows only
-- when there is one per line of the file, so that row n is line n. Which records take the
-- exact way: record_needs_text, defined by sql/sample_jsonl_records.sql (run first).

DROP TABLE IF EXISTS stage_records;

CREATE TEMP TABLE stage_records AS
SELECT *
FROM read_json($path, format = 'newline_delimited', columns = $columns,
               ignore_errors = true, maximum_object_size = $max_object_size,
               hive_partitioning = false);

-- the rows' numbers from 1: row ids count up from where the table's (or, inside a transaction,
-- its uncommitted rows') first one starts
CREATE OR REPLACE TEMP VIEW stage_numbered AS
SELECT rowid + 1 - (SELECT min(rowid) FROM stage_records) AS line, *
FROM stage_records;

CREATE OR REPLACE TEMP TABLE stage_exact AS
SELECT line
FROM stage_numbered
WHERE record_needs_text(retrieved, retrieval_steps, $leaf_items);

SELECT (SELECT count(*) FROM stage_records), (SELECT count(*) FROM stage_exact);
