-- load_index: replace the manifest of one index version with the staged file.
-- Grain: index_chunks one row per (index_version, chunk_id). Input: stage_index(line,
-- index_version, chunk_id, content_hash, text, type_error, raw), values as text, type_error the
-- reason of a value that is not text or a line that is no JSON object, raw that line's text
-- (pipeline/ingest/index.py). Parameters: $source, $version, $raw_limit
-- (characters of a bad row kept).
-- content_hash defaults to sha256 of the text, so a manifest may carry either. A blank one
-- (or a blank text: empty, spaces, tabs or line breaks, text_or_null) is not given: an empty
-- hash is no content, and two chunks logged with it would otherwise be carried onto each
-- other by a rebuild.

CREATE OR REPLACE TEMP TABLE stage_index_checked AS
WITH given AS (
    SELECT * REPLACE (text_or_null(content_hash) AS content_hash, text_or_null(text) AS text)
    FROM stage_index
)
SELECT *,
       CASE
           WHEN type_error IS NOT NULL THEN type_error
           WHEN text_or_null(chunk_id) IS NULL THEN 'missing or null required field: chunk_id'
           WHEN index_version IS NOT NULL AND index_version <> $version
               THEN 'index_version ' || index_version || ' differs from --version ' || $version
           WHEN content_hash IS NULL AND text IS NULL THEN 'neither content_hash nor text given'
       END AS reason,
       coalesce(content_hash, sha256(text)) AS hash
FROM given;

-- Of the rows that pass, the first of a chunk_id stands; a later one with other content is
-- quarantined naming it, as a gold set's conflicting duplicate gold_id is. (A row refused for
-- another reason, say of another index version, conflicts with nothing.)
CREATE OR REPLACE TEMP TABLE stage_index_first AS
SELECT chunk_id, min(line) AS first_line, arg_min(hash, line) AS first_hash
FROM stage_index_checked
WHERE reason IS NULL
GROUP BY chunk_id;

-- a version is one snapshot, whichever file it came from before
DELETE FROM index_chunks WHERE index_version = $version;

DELETE FROM quarantine WHERE kind = 'index' AND version = $version;

DELETE FROM ingest_files WHERE kind = 'index' AND version = $version;

INSERT INTO quarantine (kind, version, source, line, reason, raw)
SELECT 'index', $version, $source, s.line,
       coalesce(s.reason, 'conflicting duplicate chunk_id ' || s.chunk_id
                          || ' (first at line ' || f.first_line || ')'),
       left(coalesce(s.raw, to_json({'line': s.line, 'index_version': s.index_version,
                                      'chunk_id': s.chunk_id, 'content_hash': s.content_hash,
                                      'text': s.text, 'type_error': s.type_error})::VARCHAR),
            $raw_limit)
FROM stage_index_checked s
LEFT JOIN stage_index_first f USING (chunk_id)
WHERE s.reason IS NOT NULL OR s.hash <> f.first_hash;

-- identical copies are one chunk; its text is the first copy's that has one
INSERT INTO index_chunks (index_version, chunk_id, content_hash, text)
SELECT $version, s.chunk_id, f.first_hash, arg_min(s.text, s.line) FILTER (s.text IS NOT NULL)
FROM stage_index_checked s
JOIN stage_index_first f USING (chunk_id)
WHERE s.reason IS NULL AND s.hash = f.first_hash
GROUP BY s.chunk_id, f.first_hash;

DROP TABLE stage_index_checked;
DROP TABLE stage_index_first;
