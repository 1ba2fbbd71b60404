-- days_of_source: the UTC days of the requests one log file holds.
-- Grain: one row per day. Parameters: $source (the file).

SELECT DISTINCT date_trunc('day', timestamp) AS day FROM requests WHERE source = $source;
