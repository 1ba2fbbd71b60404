-- window_slices: every request of [$start, $end) with its window and each slice it belongs to.
-- Grain: one row per request x slice. Parameters: $start, $end (TIMESTAMP), $grain ('day' |
-- 'hour'). Slices: 'all', 'index_version=<v>', and '<tag>=<value>' for each tag (a tag named
-- 'all' or 'index_version' becomes 'tag.<name>=<value>').

CREATE OR REPLACE TEMP TABLE agg_requests AS
SELECT
    r.request_id,
    date_trunc($grain, r.timestamp) AS window_start,
    r.index_version,
    r.index_size,
    -- a request without a session is its own cluster
    coalesce('s:' || r.session_id, 'r:' || r.request_id) AS cluster_key,
    r.session_id IS NOT NULL AS in_session,
    -- a tag named like a built-in slice is kept apart as tag.<name>=<value>
    unnest(list_distinct(['all', 'index_version=' || r.index_version]
           || coalesce(list_transform(map_entries(r.tags), lambda e:
                  CASE WHEN e.key IN ('all', 'index_version') THEN 'tag.' || e.key ELSE e.key END
                  || '=' || coalesce(e.value, 'null')), []::VARCHAR[]))) AS slice
FROM requests r
WHERE r.timestamp >= $start AND r.timestamp < $end;
