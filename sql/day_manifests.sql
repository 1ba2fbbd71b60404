-- day_manifests: what each UTC day's scores depend on beyond its requests and the gold set:
-- the manifest content of every index version that served the day, and the gold chunk IDs a
-- rebuild carried to it or a gold set naming another index's chunks is compared as there
-- (pipeline/rebuild.py). Recorded per scored day in score_windows and
-- compared by sql/stale_score_days.sql, so loading a manifest makes stale only the days that
-- its index version served (the next index's manifest, loaded ahead, makes none).
-- Grain: temp table day_manifests, one row per day with requests in [$first, $last) (NULL:
-- unbounded). Parameters: $first, $last (TIMESTAMP or NULL).

CREATE OR REPLACE TEMP TABLE day_manifests AS
WITH served AS (
    SELECT date_trunc('day', timestamp) AS day, index_version, max(timestamp) AS latest
    FROM requests
    WHERE ($first IS NULL OR timestamp >= $first) AND ($last IS NULL OR timestamp < $last)
    GROUP BY ALL
),
manifest AS (
    SELECT version AS index_version,
           string_agg(content_hash, ',' ORDER BY source, content_hash) AS content
    FROM ingest_files
    WHERE kind = 'index'
    GROUP BY version
),
carried AS (
    -- served_from: a rollback's carry is no input of the days before the index went live
    -- again (sql/carry_gold_ids.sql), only of the days it served at or after then
    SELECT index_version, max(served_from) AS served_from,
           md5(string_agg(to_json(CASE WHEN served_from IS NULL
                                       THEN [gold_version, gold_chunk_id, carried_chunk_id]
                                       ELSE [gold_version, gold_chunk_id, carried_chunk_id,
                                             served_from::VARCHAR] END)::VARCHAR,
                          ',' ORDER BY gold_version, gold_chunk_id, carried_chunk_id)) AS ids
    FROM (SELECT gold_version, index_version, gold_chunk_id, carried_chunk_id, served_from
          FROM carried_gold_ids
          UNION ALL
          SELECT gold_version, index_version, gold_chunk_id, carried_chunk_id, NULL
          FROM named_gold_ids)
    GROUP BY index_version
)
SELECT day,
       md5(string_agg(to_json([s.index_version, m.content, c.ids])::VARCHAR, ','
                      ORDER BY s.index_version)) AS manifests
FROM served s
LEFT JOIN manifest m USING (index_version)
LEFT JOIN carried c
       ON c.index_version = s.index_version
      AND (c.served_from IS NULL OR s.latest >= c.served_from)
GROUP BY day;
