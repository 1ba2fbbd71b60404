-- carry_named_gold: compare the gold chunks of every gold set that names the chunks of one
-- index (gold_versions.index_version, `ingest gold --index-version`) by content on every other
-- index with a manifest, replacing what was compared before (pipeline/rebuild.py).
-- Grain: named_gold_ids one row per gold version x other index version x gold chunk x chunk
-- it is compared as there. No parameters.
-- A gold chunk's content is that of the named index's chunk of that ID; it matches a chunk of
-- the other index when a content_hash or the sha256 of the text (as sql/load_index.sql hashes
-- it) agrees, as sql/carry_gold_ids.sql matches them; how, as there (macro carry_how in
-- sql/schema.sql), with unknown for an ID the named index's manifest lacks. Without the named
-- index's manifest nothing is written: every ID is compared as it is.

DELETE FROM named_gold_ids;

INSERT INTO named_gold_ids
    (gold_version, index_version, gold_chunk_id, carried_chunk_id, how, from_version)
WITH gold_chunks AS (
    SELECT DISTINCT g.gold_version, v.index_version AS named, unnest(g.gold_chunk_ids)
                    AS gold_chunk_id
    FROM goldens g
    JOIN gold_versions v USING (gold_version)
    WHERE v.index_version IS NOT NULL
      AND v.index_version IN (SELECT index_version FROM index_chunks)
),
others AS (
    SELECT g.*, o.index_version
    FROM gold_chunks g
    JOIN (SELECT DISTINCT index_version FROM index_chunks) o ON o.index_version <> g.named
),
named_content AS (
    SELECT g.gold_version, g.gold_chunk_id,
           unnest(chunk_hashes(c.content_hash, c.text)) AS hash
    FROM gold_chunks g
    JOIN index_chunks c ON c.index_version = g.named AND c.chunk_id = g.gold_chunk_id
),
found AS (
    SELECT DISTINCT n.gold_version, n.gold_chunk_id, c.index_version, c.chunk_id
    FROM named_content n
    JOIN (SELECT index_version, chunk_id,
                 unnest(chunk_hashes(content_hash, text)) AS hash
          FROM index_chunks) c USING (hash)
),
judged AS (
    SELECT o.gold_version, o.index_version, o.gold_chunk_id, o.named,
           EXISTS (SELECT 1 FROM named_content n WHERE n.gold_version = o.gold_version
                   AND n.gold_chunk_id = o.gold_chunk_id) AS known,
           list(f.chunk_id ORDER BY f.chunk_id) FILTER (WHERE f.chunk_id IS NOT NULL) AS chunks
    FROM others o
    LEFT JOIN found f USING (gold_version, gold_chunk_id, index_version)
    GROUP BY ALL
)
SELECT gold_version, index_version, gold_chunk_id,
       unnest(carried_as(gold_chunk_id, known, chunks)), carry_how(gold_chunk_id, known, chunks),
       named
FROM judged;
