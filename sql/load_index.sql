-- load_index: replace the manifest of one index version with the staged file.
-- Grain: index_chunks one row per (index_version, chunk_id). Input: stage_index(line,
-- index_version, chunk_id, content_hash, text, type_error, raw), values as text, type_error the
-- reason of a value that is not text or a line that is no JSON object, raw that line's text
-- (pipeline/ingest/index.py). Parameters: $source, $version, $raw_limit
-- (characters of a bad row kept).
-- content_hash defaults to sha256 of the text, so a manifest may carry either. A blank one
-- (or a blank text) is not given: an empty hash is no content, and two chunks logged with it
-- would otherwise be carried onto each other by a rebuild.

CREATE OR REPLACE TEMP VIEW stage_index_given AS
SELECT * REPLACE (CASE WHEN trim(content_hash) <> '' THEN content_hash END AS content_hash,
                  CASE WHEN trim(text) <> '' THEN text END AS text)
FROM stage_index;

-- a version is one snapshot, whichever file it came from before
DELETE FROM index_chunks WHERE index_version = $version;

DELETE FROM quarantine WHERE kind = 'index' AND version = $version;

DELETE FROM ingest_files WHERE kind = 'index' AND version = $version;

INSERT INTO quarantine (kind, version, source, line, reason, raw)
SELECT 'index', $version, $source, line,
       CASE
           WHEN type_error IS NOT NULL THEN type_error
           WHEN chunk_id IS NULL OR trim(chunk_id) = '' THEN 'missing or null required field: chunk_id'
           WHEN index_version IS NOT NULL AND index_version <> $version
               THEN 'index_version ' || index_version || ' differs from --version ' || $version
           WHEN content_hash IS NULL AND text IS NULL THEN 'neither content_hash nor text given'
           ELSE 'conflicting duplicate chunk_id ' || chunk_id
       END,
       left(coalesce(raw, to_json({'line': line, 'index_version': index_version,
                                    'chunk_id': chunk_id, 'content_hash': content_hash,
                                    'text': text, 'type_error': type_error})::VARCHAR),
            $raw_limit)
FROM stage_index_given s
WHERE type_error IS NOT NULL OR chunk_id IS NULL OR trim(chunk_id) = ''
   OR (index_version IS NOT NULL AND index_version <> $version)
   OR (content_hash IS NULL AND text IS NULL)
   OR chunk_id IN (
       SELECT chunk_id FROM stage_index_given
       GROUP BY chunk_id
       HAVING count(DISTINCT coalesce(content_hash, sha256(text))) > 1);

INSERT INTO index_chunks (index_version, chunk_id, content_hash, text)
SELECT $version, chunk_id, any_value(coalesce(content_hash, sha256(text))), any_value(text)
FROM stage_index_given
WHERE line NOT IN (SELECT line FROM quarantine
                   WHERE kind = 'index' AND source = $source AND version = $version)
GROUP BY chunk_id;

DROP VIEW stage_index_given;
