-- rejudge_candidates: before a changed log file is read again, the quarantined copies in other
-- files that conflict with requests this file delivered ("conflicts with request_id R already
-- loaded from F line L", sql/load_logs.sql). sql/rejudge_conflicts.sql decides, once the file
-- is loaded again, which of them must be judged again.
-- Grain: rejudge_candidate one row per such quarantined copy, with the digest of the request
-- it conflicted with. Parameters: $source (the file).

CREATE OR REPLACE TEMP TABLE rejudge_candidate AS
SELECT q.source, q.reason,
       -- what the copy conflicted with: if the file brings other contents at that line, the
       -- copy may now be an identical re-delivery
       md5(to_json(r)::VARCHAR) AS digest
FROM quarantine q
JOIN requests r
  ON q.reason = conflict_reason(r.request_id, r.source, r.line)
WHERE q.kind = 'logs' AND r.source = $source AND q.source <> $source;
