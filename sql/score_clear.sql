-- score_clear: remove a route's old rows for the requests of one window [$start, $end), first
-- step of scoring it. Grain: deletes from request_scores, request_cutoffs and miss_causes (one
-- route). Parameters: $route, $start, $end (TIMESTAMP, UTC).
-- The window's old rows are those of its requests wherever they were scored before, and scores
-- dated in the window whose request has since been removed or moved. Ends with the UTC days
-- the deleted scores were dated in, so pipeline.state can invalidate what was built on them.

-- the route must build its own route_window: none may be left from another route
DROP TABLE IF EXISTS route_window;

-- UNION ALL: an ID listed twice matches the same rows, so duplicates need not go
CREATE OR REPLACE TEMP TABLE score_window_ids AS
SELECT request_id FROM requests WHERE timestamp >= $start AND timestamp < $end
UNION ALL
SELECT request_id FROM request_scores
WHERE route = $route AND timestamp >= $start AND timestamp < $end;

-- the requests scored before on this route: request_cutoffs and miss_causes hold rows only for
-- requests with a request_scores row of the route (written and cleared together), so a window
-- scored for the first time deletes nothing and reads none of those tables
CREATE OR REPLACE TEMP TABLE score_cleared AS
SELECT request_id, timestamp FROM request_scores
WHERE route = $route AND request_id IN (SELECT request_id FROM score_window_ids);

DELETE FROM request_cutoffs
WHERE route = $route AND request_id IN (SELECT request_id FROM score_cleared);

DELETE FROM miss_causes
WHERE route = $route AND request_id IN (SELECT request_id FROM score_cleared);

DELETE FROM request_scores
WHERE route = $route AND request_id IN (SELECT request_id FROM score_cleared);

DROP TABLE score_window_ids;

SELECT DISTINCT date_trunc('day', timestamp) AS day FROM score_cleared ORDER BY day;
