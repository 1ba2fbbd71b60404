-- summary_by_index_version: the shape of drift at a glance, for the CLI's closing table.
-- Grain: one row per index version (days whose requests all used that version), slice 'all',
-- route 'ids', grain 'day'. Parameters: $k (the headline cutoff).

WITH days AS (
    SELECT window_start, n, mean_recall, gold_version,
           index_versions[1] AS index_version, max_index_size
    FROM window_metrics
    WHERE grain = 'day' AND slice = 'all' AND route = 'ids' AND k = $k
      AND len(index_versions) = 1 AND n > 0
)
SELECT index_version, gold_version, count(*) AS days, sum(n) AS n,
       arg_min(mean_recall, window_start) AS first_recall,
       arg_max(mean_recall, window_start) AS last_recall,
       min(mean_recall) AS lowest, max(max_index_size) AS index_size
FROM days
GROUP BY ALL
ORDER BY min(window_start);
