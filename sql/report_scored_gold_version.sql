-- report_scored_gold_version: the last-resort default gold set of a report, the most common
-- one among the scored requests of a route.
-- Grain: at most one row (ties go to the greatest name). Parameters: $route.

SELECT gold_version FROM request_scores
WHERE route = $route AND status = 'scored' AND gold_version IS NOT NULL
GROUP BY gold_version ORDER BY count(*) DESC, gold_version DESC LIMIT 1
