-- report_unscored_requests: ingested requests that have no score at all under a route (not
-- yet scored, as opposed to scored and excluded).
-- Grain: one row, the count. Parameters: $route.

SELECT count(*) FROM requests AS r
WHERE NOT EXISTS (
    SELECT 1 FROM request_scores AS s
    WHERE s.request_id = r.request_id AND s.route = $route
)
