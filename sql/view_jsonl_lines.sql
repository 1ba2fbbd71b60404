-- view_jsonl_lines: the lines of one JSON Lines file (gzipped or not) as the view
-- stage_lines(line, text), read by DuckDB each time the view is read, never copied into a
-- table: sql/stage_logs_jsonl.sql reads it once, and sql/fill_jsonl_raw.sql only the lines of
-- quarantined records. Grain: one row per non-blank line, `line` its 1-based line number.
-- The view cannot hold $parameters: pipeline/ingest/logs.py sets the variables it reads
-- (SET VARIABLE): stage_lines_path; stage_lines_delimiter, a byte valid JSON never holds raw
-- (a control character), so a line is one column; stage_lines_max_size (bytes of a line
-- without its newline); stage_lines_blank (the pattern of a blank line: only what Python's
-- bytes.strip() strips).
-- DuckDB numbers the rows it returns, which are the file's lines only while it rejects none
-- (not UTF-8, over the size, holding the delimiter byte): pipeline/ingest/logs.py takes this
-- way only for a file whose line scan finds none of those, and checks after the first read
-- that DuckDB rejected nothing (stage_line_errors) and that the last line staged is the last
-- line the scan found text on; otherwise it reads the file into a table instead
-- (sql/read_jsonl_lines.sql), where rejected lines are numbered and judged.

DROP TABLE IF EXISTS stage_line_errors;

DROP TABLE IF EXISTS stage_line_scans;

CREATE OR REPLACE TEMP VIEW stage_lines AS
SELECT ordinality AS line, text
FROM read_csv(getvariable('stage_lines_path'), columns = {'text': 'VARCHAR'},
              delim = getvariable('stage_lines_delimiter'), quote = '', escape = '',
              header = false, auto_detect = false,
              max_line_size = getvariable('stage_lines_max_size'),
              store_rejects = true, rejects_table = 'stage_line_errors',
              rejects_scan = 'stage_line_scans')
     WITH ORDINALITY
WHERE text IS NOT NULL AND NOT regexp_full_match(text, getvariable('stage_lines_blank'));
