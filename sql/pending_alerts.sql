-- pending_alerts: the alert messages of drift episodes, one per event (the daily window on
-- which an episode opened or resolved) and channel, in window order (a day's withdrawals
-- first), with what the alerts table already holds for it (status NULL: never tried; 'sent'
-- rows come back too, so the caller counts them as skipped, as are events sent under another
-- gold version). The value's interval comes from window_metrics (NULL when the window has no
-- metrics row); `direction` is the decision of the episode's opening window, so a resolution
-- is named after what it resolves.
-- A third event, 'withdrawn', takes back an opening that was sent and never resolved when the
-- drift step, judging that window again under the same gold version (after late or corrected
-- logs, a rescore, a changed setting), no longer finds its episode, or when the day holds no
-- request any more (now_state 'no_data'), or is judged again without the window's k among
-- the cutoffs ('not_measured') or without requests of its slice ('slice_gone'): on the
-- channels that got
-- the opening, whatever the alert cutoff and metrics are now, quoting the window as judged now
-- (`now_state`). Until the window is judged again (its drift rows are voided and not yet
-- rebuilt) nothing is withdrawn, nor while the window lies in an open episode of the same
-- direction (a late day moved the episode's start: the new opening is announced instead).
-- An episode that comes back after its withdrawal is announced again (its opening is pending
-- once more).
-- A sent resolution that judging its window again no longer bears out is put right: when the
-- episode now resolves on another day, that resolution is pending again (with the day sent
-- before, `resolution_sent_before`); when it has not resolved yet (the window is now an
-- ongoing day of it), a fourth event, 'unresolved', says so on the channels that got the
-- resolution, and the episode's next resolution goes out as news.
-- A new gold set that judges a sent episode (the same opening) resolved on another day sends
-- that resolution with the day sent before too; one that judges it still going on on the day
-- its resolution was sent sends 'unresolved' (under its own episode) until it resolves.
-- Events of the alert cutoff and metrics in force, and those of episodes paged under earlier
-- ones (so a resolution follows its opening).
-- A route taken out of force ('route_retired') withdraws its sent openings the same way.
-- Grain: one row per episode_id x event x channel. Parameters: $k (the alert cutoff),
-- $metrics (list of metric names), $channels (list of channel names, in delivery order),
-- $routes (the routes in force).

WITH openings AS (
    SELECT episode_id, arg_min(decision, window_start) AS direction,
           min(window_start) AS opened_on
    FROM drift_events
    WHERE state = 'opened' AND episode_id IS NOT NULL
    GROUP BY episode_id
),
judged AS (
    -- every daily drift row with its episode's direction and the value's interval
    SELECT d.episode_id, d.state, d.window_start, d.window_end, d.slice, d.route, d.k,
           d.gold_version, d.metric, d.index_version, d.n, d.value,
           CASE d.metric WHEN 'mean_recall' THEN w.ci_low
                         WHEN 'pass_rate' THEN w.pass_ci_low
                         WHEN 'full_coverage_rate' THEN w.fc_ci_low END AS value_low,
           CASE d.metric WHEN 'mean_recall' THEN w.ci_high
                         WHEN 'pass_rate' THEN w.pass_ci_high
                         WHEN 'full_coverage_rate' THEN w.fc_ci_high END AS value_high,
           d.baseline_value, d.baseline_start, d.baseline_end, d.baseline_n,
           d.delta, d.delta_low, d.delta_high, d.margin, d.decision, d.method, d.evidence,
           o.direction AS episode_direction, o.opened_on
    FROM drift_events d
    LEFT JOIN window_metrics w
           ON w.window_start = d.window_start AND w.grain = d.grain AND w.slice = d.slice
          AND w.route = d.route AND w.k = d.k AND w.gold_version = d.gold_version
    LEFT JOIN openings o ON o.episode_id = d.episode_id
    WHERE d.grain = 'day'
),
events AS (
    SELECT * EXCLUDE (state, episode_direction), state AS event,
           coalesce(episode_direction, decision) AS direction
    FROM judged
    WHERE state IN ('opened', 'resolved') AND episode_id IS NOT NULL
      AND ((k = $k AND list_contains($metrics::VARCHAR[], metric))
           -- an episode paged under an earlier alert cutoff or metrics: its resolution
           -- still reaches whoever got the opening
           OR episode_id IN (SELECT episode_id FROM alerts
                             WHERE event = 'opened' AND status = 'sent'))
),
withdrawals AS (
    SELECT d.* EXCLUDE (episode_id, state, episode_direction, window_start, window_end, slice,
                        route, k, gold_version, metric)
               REPLACE ('withdrawn' AS event, coalesce(d.n, 0) AS n),
           a.window_start, a.window_start + INTERVAL 1 DAY AS window_end, a.slice, a.route,
           a.k, a.gold_version, a.metric, a.episode_id, a.direction,
           CASE WHEN d.state IS NOT NULL THEN d.state
                WHEN NOT list_contains($routes::VARCHAR[], a.route) THEN 'route_retired'
                WHEN NOT a.day_has_requests THEN 'no_data'
                WHEN a.k_measured THEN 'slice_gone'
                ELSE 'not_measured' END AS now_state, a.channel
    FROM (
        -- each sent opening with what its day holds now
        SELECT a.*,
               EXISTS (SELECT 1 FROM requests r
                       WHERE r.timestamp >= a.window_start
                         AND r.timestamp < a.window_start + INTERVAL 1 DAY) AS day_has_requests,
               -- the day judged again since its rows were voided: drift rows of it stand
               EXISTS (SELECT 1 FROM drift_events e
                       WHERE e.window_start = a.window_start AND e.grain = 'day'
                         AND e.route = a.route AND e.gold_version = a.gold_version)
                   AS day_judged,
               EXISTS (SELECT 1 FROM window_metrics w
                       WHERE w.window_start = a.window_start AND w.grain = 'day'
                         AND w.route = a.route AND w.k = a.k
                         AND w.gold_version = a.gold_version) AS k_measured,
               EXISTS (SELECT 1 FROM window_metrics w
                       WHERE w.window_start = a.window_start AND w.grain = 'day'
                         AND w.slice = a.slice AND w.route = a.route AND w.k = a.k
                         AND w.gold_version = a.gold_version) AS has_metrics
        FROM alerts a
        WHERE a.event = 'opened' AND a.status = 'sent' AND a.direction IS NOT NULL
    ) a
    -- the window that opened the episode, as the drift step judges it now
    LEFT JOIN (SELECT *, NULL::VARCHAR AS event FROM judged) d
      ON d.window_start = a.window_start AND d.slice = a.slice AND d.route = a.route
     AND d.k = a.k AND d.metric = a.metric AND d.gold_version = a.gold_version
    WHERE NOT EXISTS (SELECT 1 FROM drift_events e WHERE e.episode_id = a.episode_id)
      -- the episode as the window's row names it now: a drop whose start moved earlier (a
      -- late day) still holds the window, in an episode of another id: that continues it
      AND NOT coalesce(d.state IN ('opened', 'ongoing')
                       AND d.episode_direction IS NOT DISTINCT FROM a.direction, false)
      -- no row for the window: judged again when the day holds no request at all now (no
      -- metrics to judge), or when the day has drift rows again but none at the window's k
      -- (no longer a cutoff) or slice (none of its requests left that day); otherwise its
      -- rows are voided and not yet rebuilt
      AND (d.window_start IS NOT NULL
           -- a route taken out of force (`config --routes`): its rows are gone for good
           OR (NOT a.has_metrics AND NOT list_contains($routes::VARCHAR[], a.route))
           OR (NOT a.has_metrics AND NOT a.day_has_requests)
           OR (NOT a.has_metrics AND a.day_judged))
      AND NOT EXISTS (SELECT 1 FROM alerts r
                      WHERE r.episode_id = a.episode_id AND r.channel = a.channel
                        AND r.event = 'resolved' AND r.status = 'sent')
),
unresolutions AS (
    SELECT d.* EXCLUDE (state, episode_direction) REPLACE ('unresolved' AS event),
           coalesce(a.direction, d.episode_direction) AS direction,
           d.state AS now_state, a.channel
    FROM alerts a
    -- the window the resolution was sent for, as the drift step judges it now
    JOIN (SELECT *, NULL::VARCHAR AS event FROM judged) d
      ON d.window_start = a.window_start AND d.slice = a.slice AND d.route = a.route
     AND d.k = a.k AND d.metric = a.metric
    WHERE a.event = 'resolved' AND a.status = 'sent' AND d.state = 'ongoing'
      AND ((d.gold_version = a.gold_version AND d.episode_id = a.episode_id)
           -- another gold set judging the same opening (day and direction) still going on
           -- that day: recorded under its episode, so the sent resolution stays as it was
           OR (d.gold_version <> a.gold_version AND d.episode_direction = a.direction
               AND d.opened_on = (SELECT o.window_start FROM alerts o
                                  WHERE o.episode_id = a.episode_id AND o.channel = a.channel
                                    AND o.event = 'opened' AND o.status = 'sent')))
      AND NOT EXISTS (SELECT 1 FROM drift_events e
                      WHERE e.episode_id = d.episode_id AND e.state = 'resolved')
),
channels AS (
    SELECT unnest($channels::VARCHAR[]) AS channel,
           generate_subscripts($channels::VARCHAR[], 1) AS channel_order
),
pending AS (
    SELECT e.*, NULL::VARCHAR AS now_state, c.channel, c.channel_order
    FROM events e
    CROSS JOIN channels c
    UNION ALL BY NAME
    SELECT w.*, c.channel_order
    FROM withdrawals w
    JOIN channels c USING (channel)
    UNION ALL BY NAME
    SELECT u.*, c.channel_order
    FROM unresolutions u
    JOIN channels c USING (channel)
),
withdrawn AS (
    SELECT episode_id, channel FROM alerts WHERE event = 'withdrawn' AND status = 'sent'
)
SELECT e.* EXCLUDE (channel_order),
       CASE
           -- an opening sent, withdrawn, and found again: announced again
           WHEN e.event = 'opened' AND a.status = 'sent'
                AND (e.episode_id, e.channel) IN (SELECT (episode_id, channel) FROM withdrawn)
               THEN NULL
           -- the same event (slice, route, k, metric, window, direction) sent, or recorded
           -- as past, for the episode as another gold set judged it counts as that, unless
           -- it was withdrawn: loading a new gold version re-judges the whole history and
           -- would otherwise page every past episode again
           WHEN a.status IS NULL AND e.event <> 'withdrawn' AND elsewhere.status IS NOT NULL
               THEN elsewhere.status
           -- a resolution sent for another day of the episode (it resolves later now)
           WHEN e.event = 'resolved' AND a.window_start <> e.window_start THEN NULL
           ELSE a.status
       END AS status,
       CASE WHEN e.event = 'resolved' AND a.status = 'sent' AND a.window_start <> e.window_start
            THEN a.window_start
            WHEN e.event = 'resolved' AND a.status IS NULL AND elsewhere.status IS NULL
            THEN moved.window_start END AS resolution_sent_before,
       CASE WHEN e.event = 'resolved' AND a.window_start <> e.window_start THEN NULL
            ELSE a.attempts END AS attempts,
       CASE WHEN e.event = 'resolved' AND a.window_start <> e.window_start THEN NULL
            ELSE a.first_tried END AS first_tried,
       CASE WHEN e.event = 'resolved' AND a.window_start <> e.window_start THEN NULL
            ELSE a.undelivered_to END AS undelivered_to
FROM pending e
LEFT JOIN alerts a
       ON a.episode_id = e.episode_id AND a.event = e.event AND a.channel = e.channel
-- the event as another gold set judged it: 'sent' if it went out, else 'past'. Under the same
-- gold set another episode is news (a moved start, a rise where a drop was), and so is
-- another direction (route, k, gold_version and direction are NULL in rows of earlier
-- warehouses: route, k and direction then match any, and the gold set counts as another)
LEFT JOIN LATERAL (
    SELECT max(b.status) AS status   -- 'sent' over 'past'
    FROM alerts b
    WHERE b.status IN ('sent', 'past') AND b.channel = e.channel AND b.event = e.event
      AND b.slice = e.slice AND b.metric = e.metric AND b.window_start = e.window_start
      AND coalesce(b.route, e.route) = e.route AND coalesce(b.k, e.k) = e.k
      AND coalesce(b.direction, e.direction) = e.direction
      AND b.gold_version IS DISTINCT FROM e.gold_version
      AND (b.episode_id, b.channel) NOT IN (SELECT (episode_id, channel) FROM withdrawn)
) elsewhere ON true
-- a resolution sent on another day for the episode as another gold set judged it (the same
-- opening, sent): this one names the day sent last
LEFT JOIN LATERAL (
    SELECT arg_max(b.window_start, b.last_tried) AS window_start
    FROM alerts b
    JOIN alerts o ON o.episode_id = b.episode_id AND o.channel = b.channel
                 AND o.event = 'opened' AND o.status = 'sent'
    WHERE e.event = 'resolved' AND b.event = 'resolved' AND b.status = 'sent'
      AND b.channel = e.channel AND b.slice = e.slice AND b.metric = e.metric
      AND coalesce(b.route, e.route) = e.route AND coalesce(b.k, e.k) = e.k
      AND coalesce(b.direction, e.direction) = e.direction
      AND b.gold_version IS DISTINCT FROM e.gold_version
      AND o.window_start = e.opened_on AND b.window_start <> e.window_start
) moved ON true
ORDER BY e.window_start, e.event <> 'withdrawn', e.slice, e.metric, e.route, e.gold_version,
         e.episode_id, e.event, e.channel_order;
