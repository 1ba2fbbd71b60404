-- report_quarantine_reasons: the most frequent quarantine reasons, each with the kinds of input
-- it hit and its first record (by source and line) as an example.
-- Grain: one row per reason, most frequent first. Parameters: $top (rows at most).

SELECT reason, count(*) AS n, list(DISTINCT kind ORDER BY kind) AS kinds,
       arg_min(source, (source, line)) AS source, arg_min(line, (source, line)) AS line,
       arg_min(raw, (source, line)) AS raw
FROM quarantine GROUP BY reason ORDER BY n DESC, reason LIMIT $top
