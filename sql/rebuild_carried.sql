-- rebuild_carried: what a rebuild carried, for its summary (pipeline/rebuild.py): the gold
-- chunks per gold version and how they were carried, and the goldens whose gold chunks were
-- not carried (gone, or unknown).

-- name: carried_counts
-- Gold chunks per gold version and how (content carried to several IDs counts once).
-- Grain: one row per gold version x how. Parameters: $index_version.
SELECT gold_version, how, count(DISTINCT gold_chunk_id) AS chunks
FROM carried_gold_ids
WHERE index_version = $index_version
GROUP BY gold_version, how
ORDER BY gold_version, how;

-- name: serving_from
-- The index versions of the requests loaded from $live_from on, most requests first: what a
-- rebuild of a version no loaded request names may have meant. Parameters: $live_from.
SELECT index_version
FROM requests
WHERE timestamp >= $live_from
GROUP BY index_version
ORDER BY count(*) DESC, index_version
LIMIT 5;

-- name: not_carried
-- The gold chunks that were not carried (gone: their content is not in the new index;
-- unknown: no other manifest knows them), with every golden that needs them.
-- Grain: one row per gold version x golden x lost gold chunk, ordered.
-- Parameters: $index_version.
SELECT k.gold_version, g.gold_id, k.gold_chunk_id AS chunk_id, k.how, k.from_version
FROM carried_gold_ids k
JOIN goldens g ON g.gold_version = k.gold_version
              AND list_contains(g.gold_chunk_ids, k.gold_chunk_id)
WHERE k.index_version = $index_version AND k.how IN ('gone', 'unknown')
ORDER BY k.how, k.gold_version, g.gold_id, k.gold_chunk_id;
