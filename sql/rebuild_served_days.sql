-- rebuild_served_days: the UTC days with requests a given index version served, so that a
-- rebuild also re-scores days before it went live where it already served (a canary).
-- Grain: one row per day, ascending. Parameters: $index_version.

SELECT DISTINCT date_trunc('day', timestamp) AS day
FROM requests
WHERE index_version = $index_version
ORDER BY day;
