-- rejudge_conflicts: before a changed log file is read again, the other files whose copies of
-- its requests were quarantined as conflicting with them ("conflicts with request_id R already
-- loaded from F line L", sql/load_logs.sql). Once this file no longer delivers R, such a copy
-- may be the one to load, so each of those files is marked to be read again: its recorded
-- content hash is cleared, which the next ingest of it treats as a change.
-- Grain: ingest_files updated; ends with one row per such file. Parameters: $source (the file).

CREATE OR REPLACE TEMP TABLE rejudged_sources AS
SELECT DISTINCT q.source
FROM quarantine q
JOIN requests r
  ON q.reason = 'conflicts with request_id ' || r.request_id || ' already loaded from '
                || r.source || ' line ' || r.line
WHERE q.kind = 'logs' AND r.source = $source AND q.source <> $source;

UPDATE ingest_files SET content_hash = ''
WHERE kind = 'logs' AND source IN (SELECT source FROM rejudged_sources);

SELECT source FROM rejudged_sources ORDER BY source;
