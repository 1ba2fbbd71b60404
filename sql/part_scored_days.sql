-- part_scored_days: the days of [$start, $end) scored only in part on a route: some scores on
-- it are dated that day, yet the day has no score_windows row (sql/record_scored_days.sql
-- records a day only when all of it was scored, and ingest forgets the record of a day whose
-- requests changed). Aggregating such a day would publish the scores it holds as the whole
-- day, so pipeline/aggregate.py refuses it.
-- Grain: one row per route x day, by day. Parameters: $start, $end (TIMESTAMP: the windows
-- aggregated, whole days or hours), $routes.
-- Columns: requests (of the day within [$start, $end)), unscored (of those, without a score on
-- the route dated at the request's time: one re-delivered here from another time still holds
-- the score of where it was), stray (scores dated there whose request is no longer logged
-- there). The counts
-- are taken for such days alone (usually none), and within the span, so hours scored whole
-- aggregate by the hour though their day is scored in part.
WITH candidates AS (
    SELECT DISTINCT route, date_trunc('day', timestamp) AS day
    FROM request_scores
    WHERE timestamp >= $start AND timestamp < $end AND list_contains($routes, route)
    UNION
    -- a day a request was re-delivered to: its score is dated where it was scored before
    SELECT DISTINCT x.route, date_trunc('day', r.timestamp)
    FROM requests r
    JOIN request_scores x ON x.request_id = r.request_id AND x.timestamp <> r.timestamp
    WHERE r.timestamp >= $start AND r.timestamp < $end AND list_contains($routes, x.route)
    EXCEPT
    SELECT route, day FROM score_windows
)
SELECT * FROM (
SELECT c.route, c.day,
       (SELECT count(*) FROM requests r
        WHERE r.timestamp >= c.low AND r.timestamp < c.high) AS requests,
       (SELECT count(*) FROM requests r
        -- a score dated elsewhere is the score of the request before it moved here
        ANTI JOIN request_scores x ON x.request_id = r.request_id AND x.route = c.route
                                  AND x.timestamp = r.timestamp
        WHERE r.timestamp >= c.low AND r.timestamp < c.high) AS unscored,
       (SELECT count(*) FROM request_scores x
        LEFT JOIN requests r USING (request_id)
        WHERE x.route = c.route AND x.timestamp >= c.low AND x.timestamp < c.high
          AND (r.request_id IS NULL OR r.timestamp < c.low OR r.timestamp >= c.high)) AS stray
FROM (SELECT *, greatest(day, $start::TIMESTAMP) AS low,
             least(day + INTERVAL 1 DAY, $end::TIMESTAMP) AS high
      FROM candidates) c
)
-- a day scored whole in parts (two halves) holds a score of every request: it aggregates
WHERE unscored > 0 OR stray > 0
ORDER BY day, route;
