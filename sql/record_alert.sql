-- record_alert: the outcome of delivering one alert message on one channel, replacing the
-- row of an earlier try. The caller carries attempts (accumulated over runs) and first_tried
-- over from that row; last_error is already free of URLs, tokens and passwords.
-- Grain: alerts, one row per episode_id x event x channel. Parameters: $episode_id, $event,
-- $channel, $status, $attempts, $last_error, $first_tried, $last_tried, $slice, $metric,
-- $window_start, $route, $k, $gold_version, $direction, $undelivered_to.
-- An opening sent again (its episode came back after it was withdrawn) clears the withdrawal
-- on that channel, so that the episode can be withdrawn, or resolved, once more; likewise a
-- sent 'unresolved' clears the resolution it takes back, and a resolution sent after it
-- clears the 'unresolved'.

DELETE FROM alerts
WHERE episode_id = $episode_id AND channel = $channel
  AND (event = $event
       OR ($status = 'sent' AND ($event, event) IN (('opened', 'withdrawn'),
                                                    ('unresolved', 'resolved'),
                                                    ('resolved', 'unresolved'))));

INSERT INTO alerts (episode_id, event, channel, status, attempts, last_error, first_tried,
                    last_tried, slice, metric, window_start, route, k, gold_version, direction,
                    undelivered_to)
VALUES ($episode_id, $event, $channel, $status, $attempts, $last_error, $first_tried,
        $last_tried, $slice, $metric, $window_start, $route, $k, $gold_version, $direction,
        $undelivered_to::VARCHAR[]);
