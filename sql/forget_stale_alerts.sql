-- forget_stale_alerts: remove the failed deliveries that are no longer due, so that `alerts`
-- ends as a fresh run over the same inputs leaves it. A message that failed on every try (a
-- channel down) and that judging again no longer calls for — an opening whose episode the
-- corrected logs took back, a withdrawal of a drop that came back before it could be
-- delivered, a held resolution or an 'unresolved' whose episode moved on — was never
-- delivered to anyone, and nothing will ever retry it: left as it was, it stayed 'failed'
-- for good. Kept: rows of channels not configured in this call (their pending messages were
-- not asked for), a mail delivered to some recipients (`undelivered_to`: it went out), and
-- rows whose day is not judged now (its drift rows voided and not yet rebuilt: the message
-- may be due again once they are), unless the day holds no request at all any more.
-- Grain: alerts, one row per episode_id x event x channel. Parameters: $channels (the
-- channel names of this call), $due (the pending messages, each 'episode_id/event/channel').

DELETE FROM alerts a
WHERE a.status = 'failed' AND a.undelivered_to IS NULL
  AND list_contains($channels::VARCHAR[], a.channel)
  AND NOT list_contains($due::VARCHAR[], a.episode_id || '/' || a.event || '/' || a.channel)
  AND (EXISTS (SELECT 1 FROM drift_events e
               WHERE e.window_start = a.window_start AND e.grain = 'day'
                 AND e.route IS NOT DISTINCT FROM a.route
                 AND e.gold_version IS NOT DISTINCT FROM a.gold_version)
       OR NOT EXISTS (SELECT 1 FROM requests r
                      WHERE r.timestamp >= a.window_start
                        AND r.timestamp < a.window_start + INTERVAL 1 DAY));
