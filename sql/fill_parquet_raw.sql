-- fill_parquet_raw: give quarantined Parquet rows their record as JSON, read back from the file
-- (only for the quarantined rows, so a clean file costs nothing). Parameters: $source, $path,
-- $raw_limit (characters of a bad record kept).

UPDATE quarantine
SET raw = left(p.raw, $raw_limit)
FROM (
    SELECT file_row_number + 1 AS line, to_json(t)::VARCHAR AS raw
    FROM read_parquet($path, file_row_number = true) t
    WHERE file_row_number + 1 IN (
        SELECT line FROM quarantine WHERE kind = 'logs' AND source = $source AND raw IS NULL)
) p
WHERE quarantine.kind = 'logs' AND quarantine.source = $source AND quarantine.line = p.line;
