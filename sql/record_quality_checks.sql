-- record_quality_checks: store the checks of one interval and stage, replacing that interval's
-- earlier rows of the stage (so recording the same checks twice changes nothing, and the
-- warnings of the 'loaded' stage never wipe the checks of the 'files' stage).
-- Grain: quality_checks, one row per interval x stage x check_name. Parameters: $start, $end,
-- $stage, $checked_at, $checks (a list of structs: name, blocking, success, observed,
-- example, detail).

DELETE FROM quality_checks
WHERE interval_start = $start AND interval_end = $end AND stage = $stage;

INSERT INTO quality_checks (interval_start, interval_end, stage, check_name, blocking, success,
                            observed, example, detail, checked_at)
SELECT $start, $end, $stage, c.name, c.blocking, c.success, c.observed, c.example, c.detail,
       $checked_at
FROM (SELECT unnest($checks) AS c);
