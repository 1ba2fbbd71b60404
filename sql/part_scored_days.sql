-- part_scored_days: the days of [$start, $end) scored only in part on a route: some of their
-- requests have a score on it, yet the day has no score_windows row (sql/record_scored_days.sql
-- records a day only when all of it was scored). Aggregating such a day would publish the
-- scored part as the whole day, so pipeline/aggregate.py refuses it.
-- Grain: one row per route x day, by day. Parameters: $start, $end (TIMESTAMP), $routes.
WITH scored AS (
    SELECT route, date_trunc('day', timestamp) AS day, count(*) AS scored
    FROM request_scores
    WHERE timestamp >= $start AND timestamp < $end AND list_contains($routes, route)
    GROUP BY ALL
)
SELECT s.route, s.day, s.scored,
       (SELECT count(*) FROM requests r
        WHERE r.timestamp >= s.day AND r.timestamp < s.day + INTERVAL 1 DAY) AS requests
FROM scored s
ANTI JOIN score_windows w ON w.route = s.route AND w.day = s.day
ORDER BY s.day, s.route;
