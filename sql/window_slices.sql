-- window_slices: every request of [$start, $end) with its window and each slice it belongs to.
-- Grain: one row per request x slice. Parameters: $start, $end (TIMESTAMP), $grain ('day' |
-- 'hour'). Slices: 'all', 'index_version=<v>', and '<tag>=<value>' for each tag.

CREATE OR REPLACE TEMP TABLE agg_requests AS
SELECT
    r.request_id,
    date_trunc($grain, r.timestamp) AS window_start,
    r.index_version,
    r.index_size,
    -- a request without a session is its own cluster
    coalesce('s:' || r.session_id, 'r:' || r.request_id) AS cluster_key,
    r.session_id IS NOT NULL AS in_session,
    unnest(['all', 'index_version=' || r.index_version]
           || coalesce(list_transform(map_entries(r.tags), lambda e: e.key || '=' || e.value),
                       []::VARCHAR[])) AS slice
FROM requests r
WHERE r.timestamp >= $start AND r.timestamp < $end;
