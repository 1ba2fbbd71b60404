-- carry_gold_ids: carry the gold chunk IDs of every gold-set version to a rebuilt index by
-- content, replacing what was carried to that index before (pipeline/rebuild.py).
-- Grain: carried_gold_ids one row per gold version x gold chunk x chunk it is compared as in
-- $index_version. Parameters: $index_version (the rebuilt index, its manifest loaded),
-- $live_from (TIMESTAMP, UTC: when it went live).
-- The old content of a gold chunk comes from the manifests of the indexes that served before
-- $live_from, the one that served most in the day before it first, then the one that served
-- last; only when no loaded manifest's index served
-- before it (logs that start after the rebuild) from the others, the first logged first, then
-- the one whose version sorts nearest below this one's (version_order: idx-v1 before idx-v2,
-- dates in order), so the index it was rebuilt from, not the next one loaded ahead (its
-- manifest shares the rebuilt content and may re-use an old ID for other content). A
-- newer index (rebuilt to go live at or after $live_from and not serving before it, or first
-- logged on a later day than this one) is never a source, so what is carried does not depend
-- on what was loaded later. Where an earlier rebuild carried the chunk to such a version,
-- its content there is that of the chunk it was carried to, so rebuilds chain. Content matches when a content_hash or the sha256 of the text (as
-- sql/load_index.sql hashes it) agrees. how: same_id (the new manifest holds the ID with that
-- content: compared as itself only), content_hash (the content under other IDs: compared as
-- each of them), gone (no chunk holds it: compared as nothing, so always a miss), unknown (no
-- other manifest knows the chunk: compared as itself, as without a rebuild).
-- served_from: a rollback to an index that an earlier recorded rebuild replaced and that was
-- never recorded going live before (so $live_from is its going live again) carries to the
-- requests it serves from $live_from on; what it served before, in its first stint, was
-- served before any rebuild and keeps the gold IDs as they are (NULL: every request of it,
-- as a canary's served before it went live).

DELETE FROM carried_gold_ids WHERE index_version = $index_version;

INSERT INTO carried_gold_ids
    (gold_version, index_version, gold_chunk_id, carried_chunk_id, how, from_version, live_from,
     served_from)
WITH gold_chunks AS (
    -- a gold set that names one index's chunks is compared by content from that index
    -- (sql/carry_named_gold.sql), never carried as if it named the index before a rebuild
    SELECT DISTINCT gold_version, unnest(gold_chunk_ids) AS gold_chunk_id FROM goldens
    WHERE gold_version NOT IN (SELECT gold_version FROM gold_versions
                               WHERE index_version IS NOT NULL)
),
served AS (
    SELECT index_version, max(timestamp) FILTER (WHERE timestamp < $live_from) AS last_served,
           count(*) FILTER (WHERE timestamp >= $live_from::TIMESTAMP - INTERVAL 1 DAY
                              AND timestamp < $live_from) AS served_last_day,
           min(timestamp) AS first_served, max(timestamp) AS latest
    FROM requests
    GROUP BY index_version
),
candidates AS (
    -- every other loaded manifest that served before live_from, and, of those that did not
    -- (logs may start after --live-from), all but newer indexes: one rebuilt to go live at
    -- or after this one, or one first logged on a later day than this one (a bare day: two
    -- indexes of a canary are both first logged on the day the logs start, in either order)
    -- that went on serving after this one stopped.
    -- An index rolled back to later (rebuilt again after this one) served before it, so it
    -- is a source as the index it was then
    SELECT v.index_version, s.last_served, s.served_last_day, s.first_served
    FROM (SELECT DISTINCT index_version FROM index_chunks
          WHERE index_version <> $index_version) v
    LEFT JOIN served s USING (index_version)
    WHERE s.last_served IS NOT NULL
       OR ((NOT coalesce(s.first_served >= (SELECT date_trunc('day', first_served)
                                                   + INTERVAL 1 DAY
                                            FROM served
                                            WHERE index_version = $index_version), false)
            -- first logged later, but it stopped serving while this one went on: the index
            -- this one replaced, its logs begun late (an index never recorded as a rebuild)
            OR coalesce(s.latest < (SELECT latest FROM served
                                    WHERE index_version = $index_version)
                        AND v.index_version NOT IN (SELECT index_version FROM rebuilds),
                        false))
           AND v.index_version NOT IN (SELECT index_version FROM rebuilds
                                       WHERE live_from >= $live_from
                                         AND index_version <> $index_version))
),
preference AS (
    -- the ones that served before live_from, the one that served most in the day before it
    -- first (the index replaced, not a smoke test of a later one), then the last to serve;
    -- the others only when none did, the first logged first, one that served at all before
    -- one that never did; then the version sorting nearest below this one, then those above
    SELECT index_version,
           row_number() OVER (ORDER BY served_last_day DESC NULLS LAST,
                                       last_served DESC NULLS LAST, first_served NULLS LAST,
                                       version_order(index_version)
                                           < version_order($index_version) DESC,
                                       CASE WHEN version_order(index_version)
                                                 < version_order($index_version)
                                            THEN version_order(index_version) END
                                           DESC NULLS LAST,
                                       version_order(index_version), index_version)
               AS preference
    FROM candidates
    WHERE last_served IS NOT NULL
       OR NOT EXISTS (SELECT 1 FROM candidates WHERE last_served IS NOT NULL)
),
stood_for AS (
    -- the chunk that stood for a gold chunk in another version: itself, unless a rebuild
    -- that went live before this one carried it there (a gone one stands for nothing); a
    -- rebuild of it going live later (a rollback to it) is not what it was before this one
    SELECT g.gold_version, g.gold_chunk_id, p.index_version, g.gold_chunk_id AS chunk_id
    FROM gold_chunks g
    CROSS JOIN preference p
    WHERE NOT EXISTS (SELECT 1 FROM carried_gold_ids k
                      WHERE k.gold_version = g.gold_version AND k.index_version = p.index_version
                        AND k.gold_chunk_id = g.gold_chunk_id AND k.live_from < $live_from)
    UNION ALL
    SELECT k.gold_version, k.gold_chunk_id, k.index_version, k.carried_chunk_id
    FROM carried_gold_ids k
    WHERE k.index_version <> $index_version AND k.carried_chunk_id IS NOT NULL
      AND k.live_from < $live_from
),
new_hashes AS (
    SELECT DISTINCT chunk_id,
           unnest(chunk_hashes(content_hash, text)) AS hash
    FROM index_chunks
    WHERE index_version = $index_version
),
old_content AS (
    SELECT s.gold_version, s.gold_chunk_id, s.index_version AS from_version,
           list_distinct(chunk_hashes(c.content_hash, c.text)) AS hashes
    FROM stood_for s
    JOIN index_chunks c USING (index_version, chunk_id)
    JOIN preference p USING (index_version)
    QUALIFY row_number() OVER (PARTITION BY s.gold_version, s.gold_chunk_id
                               ORDER BY p.preference, c.chunk_id) = 1
),
found AS (
    SELECT DISTINCT o.gold_version, o.gold_chunk_id, n.chunk_id
    FROM (SELECT gold_version, gold_chunk_id, unnest(hashes) AS hash FROM old_content) o
    JOIN new_hashes n USING (hash)
),
replaced AS (
    -- the index each other rebuild that went live before this one replaced: of the indexes
    -- that served before it went live, the one that served most in the day before, then the
    -- last to serve (as `preference` chooses the index a rebuild is carried from)
    SELECT r.index_version AS rebuilt, q.index_version,
           row_number() OVER (PARTITION BY r.index_version
                              ORDER BY count(*) FILTER (WHERE q.timestamp >= r.live_from
                                                                - INTERVAL 1 DAY) DESC,
                                       max(q.timestamp) DESC, q.index_version) AS rank
    FROM rebuilds r
    JOIN requests q ON q.timestamp < r.live_from AND q.index_version <> r.index_version
    WHERE r.index_version <> $index_version AND r.live_from < $live_from
      -- only a rebuild this index served before can have replaced it: most rebuilds' index
      -- first served when it went live, and none is joined with the requests
      AND r.live_from > (SELECT first_served FROM served WHERE index_version = $index_version)
    GROUP BY r.index_version, r.live_from, q.index_version
),
rolled_back AS (
    -- this index is one an earlier rebuild replaced, going live again: its first stint was
    -- before that rebuild, and the carry (through the index between) is for what it serves
    -- from $live_from on. An index recorded going live before keeps its first go-live
    -- (sql/record_rebuild.sql), so none replaced it before then: its carry is for all of it
    SELECT $live_from::TIMESTAMP AS served_from
    WHERE EXISTS (SELECT 1 FROM replaced WHERE rank = 1 AND index_version = $index_version)
),
judged AS (
    SELECT g.gold_version, g.gold_chunk_id, o.from_version,
           list(f.chunk_id ORDER BY f.chunk_id) FILTER (WHERE f.chunk_id IS NOT NULL) AS chunks
    FROM gold_chunks g
    LEFT JOIN old_content o USING (gold_version, gold_chunk_id)
    LEFT JOIN found f USING (gold_version, gold_chunk_id)
    GROUP BY ALL
)
SELECT gold_version, $index_version, gold_chunk_id,
       unnest(carried_as(gold_chunk_id, from_version IS NOT NULL, chunks)),
       carry_how(gold_chunk_id, from_version IS NOT NULL, chunks),
       from_version, $live_from::TIMESTAMP, (SELECT served_from FROM rolled_back)
FROM judged;
