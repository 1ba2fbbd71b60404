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
    -- tags as <key>=<value>: '=' and '\' in a key are escaped with '\', a key named like a
    -- built-in slice (or already starting with 'tag.') gets 'tag.' in front, a null value is
    -- no tag; so two different tags never share a slice
    unnest(list_distinct(['all', 'index_version=' || r.index_version]
        || coalesce(list_transform(
               list_filter(map_entries(r.tags), lambda e: e.value IS NOT NULL),
               lambda e: CASE WHEN e.key IN ('all', 'index_version') OR starts_with(e.key, 'tag.')
                              THEN 'tag.' ELSE '' END
                         || replace(replace(e.key, '\', '\\'), '=', '\=') || '=' || e.value),
           []::VARCHAR[]))) AS slice
FROM requests r
WHERE r.timestamp >= $start AND r.timestamp < $end;
