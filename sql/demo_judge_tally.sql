-- demo_judge_tally: what `recallwatch demo`'s judge did: the verdicts it wrote (those created at
-- the run's instant by its model) with their calls and tokens, and the claims route's requests
-- of the demo's gold set by outcome.
-- Grain: one row. Parameters: $created_at (TIMESTAMP, the demo run's instant), $model,
-- $route (the claims route's name), $gold_version.

WITH written AS (
    SELECT count(*) AS verdicts,
           count(*) FILTER (WHERE status = 'failed') AS failed,
           coalesce(sum(calls), 0)::BIGINT AS calls,
           coalesce(sum(tokens), 0)::BIGINT AS tokens
    FROM judge_verdicts
    WHERE created_at = $created_at AND model = $model
),
outcomes AS (
    -- every request of the route by outcome (not the scope's scored requests of the report)
    SELECT count_if(status = 'scored') AS scored,
           count_if(status = 'not_judged') AS not_judged,
           count_if(status = 'judge_failed') AS judge_failed
    FROM request_scores
    WHERE route = $route AND gold_version = $gold_version
)
SELECT verdicts, failed, calls, tokens, scored, not_judged, judge_failed
FROM written, outcomes;
