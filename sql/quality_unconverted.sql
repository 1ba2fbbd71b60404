-- quality_unconverted: a record of a converted log file (RAGAS, OpenInference; see
-- pipeline/formats) that its converter could not turn into a request does not parse: the gate
-- names the converter's reason, the one ingest quarantines it with, rather than judging the
-- empty record left in its place as missing every field.
-- Grain: updates the rows of quality_records (sql/quality_frame.sql) of one file.
-- Parameters: $file_no (the file's place in the interval's list), $path (the converted file,
-- with its columns `line` and `problem`).

UPDATE quality_records AS q
SET parsed = false, problem = c.problem, request_id = NULL, timestamp = NULL,
    logged_timestamp = NULL, index_version = NULL, k = NULL, ranks = NULL, min_rank = NULL,
    n_retrieved = NULL, has_gold_key = NULL, digest = NULL, load_problem = NULL
FROM read_parquet($path, hive_partitioning = false) AS c
WHERE q.file_no = $file_no AND q.line = c.line AND c.problem IS NOT NULL;
