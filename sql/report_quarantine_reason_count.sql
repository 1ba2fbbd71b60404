-- report_quarantine_reason_count: how many distinct quarantine reasons there are, so the report
-- can say how many it did not list.
-- Grain: one row, the count. No parameters.

SELECT count(DISTINCT reason) FROM quarantine
