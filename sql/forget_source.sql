-- forget_source: remove everything one input file loaded, before it is ingested again because
-- its content changed. Parameters: $source (the file), $kind (logs | gold | index).

DELETE FROM requests WHERE $kind = 'logs' AND source = $source;

DELETE FROM quarantine WHERE kind = $kind AND source = $source;

DELETE FROM ingest_files WHERE kind = $kind AND source = $source;
