-- sample_jsonl_records: how many of the first records of one JSON Lines file DuckDB's JSON
-- reader returns, and how many of those the staging would read from their line's text, so
-- that a file of mostly such records (agentic requests logging retrieval_steps) goes the line
-- way at once rather than after a whole read (pipeline/ingest/logs.py). Also defines the
-- macro sql/read_jsonl_records.sql applies to every record. Grain: one row.
-- Parameters: $path, $columns, $max_object_size, $leaf_items, $sample (records read).
-- A record needs its text when the one parse does not tell everything the line way would:
-- no list `retrieved` was read (a line the reader could not parse, `retrieved` missing or not
-- a list), it has retrieval steps, or one of its items is not an object of the leaf item
-- fields.

CREATE OR REPLACE TEMP MACRO record_needs_text(retrieved, retrieval_steps, leaf_items) AS
    retrieved IS NULL
    OR retrieval_steps IS NOT NULL
    OR NOT leaf_items
    OR coalesce(list_bool_or(list_transform(retrieved, lambda x: x.chunk_id IS NULL
        AND x.rank IS NULL AND x.score IS NULL AND x.text IS NULL)), false);

SELECT count(*), count(*) FILTER (WHERE record_needs_text(retrieved, retrieval_steps, $leaf_items))
FROM (SELECT *
      FROM read_json($path, format = 'newline_delimited', columns = $columns,
                     ignore_errors = true, maximum_object_size = $max_object_size,
                     hive_partitioning = false)
      LIMIT $sample);
