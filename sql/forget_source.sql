-- forget_source: remove everything one input file loaded, before it is ingested again because
-- its content or options changed. Parameters: $source (the file), $kind (logs | gold | index),
-- $version (gold-set or index version; NULL for logs).
-- A request this file delivered first stays when another file delivered the same record: the
-- earliest such copy becomes its source. The others are kept aside as temp table
-- forgotten_requests, for sql/void_changed_scores.sql.

DELETE FROM request_copies WHERE $kind = 'logs' AND source = $source;

CREATE OR REPLACE TEMP TABLE promoted_copies AS
SELECT request_id, min({'source': source, 'line': line}) AS copy
FROM request_copies
WHERE $kind = 'logs' AND request_id IN (SELECT request_id FROM requests WHERE source = $source)
GROUP BY request_id;

UPDATE requests
SET source = p.copy.source, line = p.copy.line
FROM promoted_copies p
WHERE requests.request_id = p.request_id AND requests.source = $source;

DELETE FROM request_copies c
USING promoted_copies p
WHERE c.request_id = p.request_id AND c.source = p.copy.source AND c.line = p.copy.line;

-- what the file's requests were, but their place: one delivered again at its time with other
-- content loses its score (sql/void_changed_scores.sql, after the load)
CREATE OR REPLACE TEMP TABLE forgotten_requests AS
SELECT * EXCLUDE (source, line) FROM requests WHERE $kind = 'logs' AND source = $source;

DELETE FROM requests WHERE $kind = 'logs' AND source = $source;

DELETE FROM quarantine
WHERE kind = $kind AND source = $source AND version IS NOT DISTINCT FROM $version;

DELETE FROM ingest_files
WHERE kind = $kind AND source = $source AND version IS NOT DISTINCT FROM $version;
