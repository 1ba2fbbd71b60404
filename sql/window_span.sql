-- window_span: the first and last window start (of a grain) that holds requests or metrics.
-- Grain: one row. Parameters: $grain ('day' | 'hour').

SELECT min(w), max(w)
FROM (
    SELECT date_trunc($grain, timestamp) AS w FROM requests
    UNION ALL
    SELECT window_start FROM window_metrics WHERE grain = $grain
);
