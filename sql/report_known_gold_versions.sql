-- report_known_gold_versions: every gold-set version a report can show: loaded or scored with.
-- Grain: one row per version. No parameters.

SELECT gold_version FROM gold_versions
UNION
SELECT DISTINCT gold_version FROM request_scores WHERE gold_version IS NOT NULL
ORDER BY 1
