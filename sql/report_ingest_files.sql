-- report_ingest_files: ingested files and their records read, loaded and quarantined.
-- Grain: one row per kind of input (logs, gold, index). No parameters.

SELECT kind, count(*) AS files, sum(n_read) AS n_read, sum(n_loaded) AS n_loaded,
       sum(n_quarantined) AS n_quarantined
FROM ingest_files GROUP BY kind ORDER BY kind
