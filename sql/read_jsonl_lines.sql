-- read_jsonl_lines: let DuckDB read the lines of one JSON Lines file (gzipped or not) into
-- stage_lines(line, text), the input of sql/stage_logs_jsonl.sql. Grain: one row per non-blank
-- line DuckDB returned, `line` its 1-based line number in the file; stage_line_errors (DuckDB's
-- rejects table) one row per problem with a line it did not return. Ends with the number of
-- lines returned, blank ones included, so the caller can check every line was accounted for.
-- Parameters: $path; $delimiter, a byte valid JSON never holds raw (a control character), so a
-- line is one column; $max_line_size (bytes of a line without its newline); $blank (the pattern
-- of a blank line: only what Python's bytes.strip() strips).
-- A line that is not UTF-8, over the size or holds the delimiter byte is left out and recorded
-- in stage_line_errors; pipeline/ingest/logs.py reads those lines again and judges them. A blank
-- line is counted, as every line is, and not staged.

DROP TABLE IF EXISTS stage_line_errors;

DROP TABLE IF EXISTS stage_line_scans;

CREATE OR REPLACE TEMP TABLE stage_lines AS
SELECT ordinality AS line, line AS text
FROM read_csv($path, columns = {'line': 'VARCHAR'}, delim = $delimiter, quote = '',
              escape = '', header = false, auto_detect = false, max_line_size = $max_line_size,
              hive_partitioning = false,
              store_rejects = true, rejects_table = 'stage_line_errors',
              rejects_scan = 'stage_line_scans')
     WITH ORDINALITY;

-- DuckDB numbers the rows it returns, and a rejected line is not one of them: the n-th row
-- returned is line n plus the number of rejected lines before it. A rejected line r_j (j-th in
-- order) has r_j - j returned rows before it.
CREATE OR REPLACE TEMP TABLE stage_line_gaps AS
SELECT line - row_number() OVER (ORDER BY line) AS rows_before,
       row_number() OVER (ORDER BY line) AS n_rejected
FROM (SELECT DISTINCT line FROM stage_line_errors);

UPDATE stage_lines SET line = stage_lines.line + shift.n_rejected
FROM (
    SELECT s.line AS row_no, g.n_rejected
    FROM stage_lines s
    ASOF JOIN (SELECT rows_before, max(n_rejected) AS n_rejected
               FROM stage_line_gaps GROUP BY rows_before) g
      ON s.line > g.rows_before
) shift
WHERE stage_lines.line = shift.row_no;

CREATE OR REPLACE TEMP TABLE stage_line_count AS SELECT count(*) AS n_lines FROM stage_lines;

DELETE FROM stage_lines WHERE text IS NULL OR regexp_full_match(text, $blank);

SELECT n_lines FROM stage_line_count;
