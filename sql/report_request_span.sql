-- report_request_span: header counts of the report: how many requests were ingested and the
-- first and last timestamp among them.
-- Grain: one row over all of requests. No parameters.

SELECT count(*) AS n, min(timestamp) AS first, max(timestamp) AS last FROM requests
