-- fill_parquet_raw: give quarantined Parquet rows their record as JSON, read back from the file
-- (only for the quarantined rows, so a clean file costs nothing) by the table macro
-- parquet_raw_rows (line, raw), which pipeline/ingest/logs.py makes from the file's schema: the
-- file's columns read by position, shown under the file's own names (DuckDB renames a column
-- or field whose name differs from an earlier one's only in case), a converted file's record
-- as its input gave it. Parameters: $source, $raw_limit (characters of a bad record kept).

UPDATE quarantine
SET raw = left(p.raw, $raw_limit)
FROM (
    SELECT line, raw FROM parquet_raw_rows()
    WHERE line IN (
        SELECT line FROM quarantine WHERE kind = 'logs' AND source = $source AND raw IS NULL)
) p
WHERE quarantine.kind = 'logs' AND quarantine.source = $source AND quarantine.line = p.line;
