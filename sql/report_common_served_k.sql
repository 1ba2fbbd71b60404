-- report_common_served_k: the most common served k among the scored requests of a route, the
-- default headline cutoff of a report.
-- Grain: at most one row (ties go to the larger k). Parameters: $route.

SELECT k FROM request_scores WHERE status = 'scored' AND route = $route
GROUP BY k ORDER BY count(*) DESC, k DESC LIMIT 1
