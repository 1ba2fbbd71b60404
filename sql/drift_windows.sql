-- drift_windows: every window of one grain with its metrics' sufficient statistics, for the
-- drift step (pipeline/drift.py), which pools baseline windows and tests each window.
-- Grain: one row per window x slice x route x cutoff k x gold version (window_metrics joined
-- with window_sums, which the aggregate step writes together; size_hist NULL in a row of an
-- earlier release without sessions of more than one request). Parameters: $grain.

SELECT m.window_start, m.window_end, m.slice, m.route, m.k, m.gold_version, m.n,
       m.index_versions, s.version_counts, s.n_clusters, s.any_session, s.size_sq, s.max_size,
       s.recall_sum, s.recall_cluster_sq, s.recall_cluster_cross,
       s.pass_sum, s.pass_cluster_sq, s.pass_cluster_cross,
       s.full_sum, s.full_cluster_sq, s.full_cluster_cross, s.size_hist
FROM window_metrics m
JOIN window_sums s USING (window_start, grain, slice, route, k, gold_version)
WHERE m.grain = $grain
ORDER BY m.window_start, m.slice, m.route, m.k, m.gold_version;
