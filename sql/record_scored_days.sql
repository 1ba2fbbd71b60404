-- record_scored_days: after a batch of windows is scored on a route, note what each day was
-- scored with (pipeline.state reads it to find stale days).
-- Grain: score_windows one row per route and day. Parameters: $windows (list of {start, end}
-- of the batch), $route, $gold, $cutoffs, $route_inputs; the temp table day_manifests
-- (sql/day_manifests.sql) over the batch's days.
-- A day only partly scored loses its row, so `run` rescores it whole; a day is recorded only
-- when all of it was scored and it has requests.

CREATE OR REPLACE TEMP TABLE batch_days AS
SELECT date_trunc('day', w.start) AS day,
       bool_and(w.start = date_trunc('day', w.start)
                AND w."end" = date_trunc('day', w.start) + INTERVAL 1 DAY) AS whole
FROM (SELECT unnest($windows::STRUCT(start TIMESTAMP, "end" TIMESTAMP)[], recursive := true)) w
GROUP BY ALL;

DELETE FROM score_windows
WHERE route = $route AND day IN (SELECT day FROM batch_days);

INSERT INTO score_windows (route, day, gold_version, cutoffs, manifests, route_inputs)
SELECT $route, day, $gold, $cutoffs, d.manifests, $route_inputs
FROM batch_days
JOIN day_manifests d USING (day)
WHERE whole
  AND EXISTS (SELECT 1 FROM requests r
              WHERE r.timestamp >= batch_days.day AND r.timestamp < batch_days.day + INTERVAL 1 DAY);
