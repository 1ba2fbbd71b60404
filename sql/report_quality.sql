-- report_quality: the queries behind the report's data-quality section (quality_checks, written
-- by pipeline/quality.py): the most recently checked intervals with what failed, and every
-- check of the latest one.

-- name: quality_intervals
-- The intervals with checks, newest first: how many checks, how many blocking ones failed (the
-- interval was then not loaded), how many warnings were raised, and the names of the checks
-- that did not succeed.
-- Grain: one row per interval. Parameters: $limit (intervals shown).
SELECT interval_start, interval_end,
       count(*) AS checks,
       count(*) FILTER (WHERE blocking AND NOT success) AS blocking_failures,
       count(*) FILTER (WHERE NOT blocking AND NOT success) AS warnings,
       coalesce(list(check_name ORDER BY NOT blocking, stage, check_name)
                    FILTER (WHERE NOT success), []) AS failed,
       max(checked_at) AS checked_at
FROM quality_checks
GROUP BY interval_start, interval_end
ORDER BY interval_start DESC, interval_end DESC
LIMIT $limit;

-- name: quality_interval_count
-- How many intervals have checks, so the report can say how many it did not show.
-- Grain: one row, the count. No parameters.
SELECT count(*) FROM (SELECT DISTINCT interval_start, interval_end FROM quality_checks);

-- name: quality_latest
-- Every check of the newest interval: the file checks first, then the warnings after loading;
-- within a stage the blocking checks first, failures before successes.
-- Grain: one row per stage x check. No parameters.
WITH newest AS (
    SELECT interval_start, interval_end FROM quality_checks
    ORDER BY interval_start DESC, interval_end DESC LIMIT 1
)
SELECT stage, check_name, blocking, success, observed, example, detail, checked_at
FROM quality_checks JOIN newest USING (interval_start, interval_end)
ORDER BY stage <> 'files', NOT blocking, success, check_name;
