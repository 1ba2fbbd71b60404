-- report_newest_gold_version: the default gold set of a report, the newest loaded one.
-- Grain: at most one row, the gold_version with the highest seq in gold_versions (ties by
-- name). No parameters.

SELECT gold_version FROM gold_versions ORDER BY seq DESC, gold_version LIMIT 1
