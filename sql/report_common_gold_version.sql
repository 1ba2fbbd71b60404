-- report_common_gold_version: the fallback default gold set of a report when gold_versions
-- has none, the most common one in window_metrics.
-- Grain: at most one row (ties go to the greatest name). No parameters.

SELECT gold_version FROM window_metrics
GROUP BY gold_version ORDER BY count(*) DESC, gold_version DESC LIMIT 1
