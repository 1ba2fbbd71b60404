-- metrics_latest: what `recallwatch metrics` exports (pipeline/metrics.py): the latest window
-- of every slice x route x cutoff k, with the drift state of each of its metrics.

-- name: grains
-- The grains window_metrics holds, to name them when the one asked for has no rows.
-- Grain: one row per grain. No parameters.
SELECT DISTINCT grain FROM window_metrics ORDER BY grain;

-- name: gold_versions
-- The gold-set versions window_metrics holds at a grain, newest loaded first (highest seq in
-- gold_versions; a version no longer in gold_versions last, then by name): the first is the
-- default of the export.
-- Grain: one row per gold version. Parameters: $grain.
SELECT m.gold_version
FROM (SELECT DISTINCT gold_version FROM window_metrics WHERE grain = $grain) m
LEFT JOIN gold_versions g USING (gold_version)
ORDER BY g.seq DESC NULLS LAST, m.gold_version DESC;

-- name: latest_windows
-- The latest window of each slice x route x k of one grain and gold version, with the drift
-- state of its mean recall, pass rate and full-coverage rate in that same window: -1 while a
-- drop episode is open (opened or ongoing), 1 while a rise episode is open, 0 when none is
-- (state none or resolved), NULL when drift has not judged the window. An ongoing row does not
-- say its episode's direction; the episode's opening row does (its decision).
-- Grain: one row per slice x route x k. Parameters: $grain, $gold_version.
WITH latest AS (
    SELECT *
    FROM window_metrics
    WHERE grain = $grain AND gold_version = $gold_version
    QUALIFY window_start = max(window_start) OVER (PARTITION BY slice, route, k)
),
drift_state AS (
    SELECT d.slice, d.route, d.k, d.metric,
           CASE WHEN d.state IN ('none', 'resolved') THEN 0
                WHEN opening.decision = 'drop' THEN -1
                WHEN opening.decision = 'rise' THEN 1 END AS state_value
    FROM drift_events d
    JOIN latest l USING (window_start, grain, slice, route, k, gold_version)
    LEFT JOIN drift_events opening
           ON opening.episode_id = d.episode_id AND opening.state = 'opened'
)
SELECT l.window_start, l.window_end, l.grain, l.slice, l.route, l.k, l.gold_version, l.n,
       l.n_excluded, l.mean_recall, l.ci_low, l.ci_high, l.mean_precision, l.pass_mark,
       l.pass_rate, l.pass_ci_low, l.pass_ci_high, l.full_coverage_rate, l.fc_ci_low,
       l.fc_ci_high,
       max(s.state_value) FILTER (WHERE s.metric = 'mean_recall') AS drift_mean_recall,
       max(s.state_value) FILTER (WHERE s.metric = 'pass_rate') AS drift_pass_rate,
       max(s.state_value) FILTER (WHERE s.metric = 'full_coverage_rate')
           AS drift_full_coverage_rate
FROM latest l
LEFT JOIN drift_state s USING (slice, route, k)
GROUP BY ALL
ORDER BY l.slice, l.route, l.k;
