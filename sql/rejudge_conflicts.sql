-- rejudge_conflicts: after a changed log file was loaded again, the files holding a quarantined
-- copy (rejudge_candidate, from sql/rejudge_candidates.sql) whose reason no longer holds: the
-- request it conflicted with is gone, now loaded from another line, or loaded with other
-- contents (which the copy may now equal). Such a copy may be the
-- one to load, so each of those files is marked to be read again: its recorded content hash
-- is cleared, which the next ingest of it treats as a change. A reason that still holds marks
-- nothing, so files that conflict with each other settle.
-- Grain: ingest_files updated; ends with one row per marked file. No parameters.

CREATE OR REPLACE TEMP TABLE rejudged_sources AS
SELECT DISTINCT c.source
FROM rejudge_candidate c
WHERE NOT EXISTS (
    SELECT 1 FROM requests r
    WHERE c.reason = conflict_reason(r.request_id, r.source, r.line)
      AND c.digest = md5(to_json(r)::VARCHAR));

UPDATE ingest_files SET content_hash = ''
WHERE kind = 'logs' AND source IN (SELECT source FROM rejudged_sources);

SELECT source FROM rejudged_sources ORDER BY source;
