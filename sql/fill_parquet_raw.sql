-- fill_parquet_raw: give quarantined Parquet rows their record as JSON, read back from the file
-- (only for the quarantined rows, so a clean file costs nothing), under the file's own names
-- (the macro parquet_row_json, made from the file's schema: DuckDB renames a column or field
-- whose name differs from an earlier one's only in case). Parameters: $source, $path,
-- $raw_limit (characters of a bad record kept), $line_column (true: a file converted from
-- another format, whose column `line` holds each record's line in its input; false: the line
-- is the row).

UPDATE quarantine
SET raw = left(p.raw, $raw_limit)
FROM (
    -- a converted file's record as its input gave it (column `input`), else the row itself
    SELECT line, coalesce(CASE WHEN $line_column THEN to_json(t) ->> 'input' END,
                          parquet_row_json(t)::VARCHAR) AS raw
    -- file_row_number read as DuckDB's virtual column, which the row `r` does not hold
    FROM (SELECT CASE WHEN $line_column THEN (to_json(r) ->> 'line')::BIGINT
                      ELSE file_row_number + 1 END AS line,
                 r AS t
          FROM read_parquet($path, hive_partitioning = false) r)
    WHERE line IN (
        SELECT line FROM quarantine WHERE kind = 'logs' AND source = $source AND raw IS NULL)
) p
WHERE quarantine.kind = 'logs' AND quarantine.source = $source AND quarantine.line = p.line;
