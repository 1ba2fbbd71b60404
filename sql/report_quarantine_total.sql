-- report_quarantine_total: how many input records were quarantined.
-- Grain: one row, the count. No parameters.

SELECT count(*) FROM quarantine
