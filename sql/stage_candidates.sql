-- stage_candidates: the request_ids of a big staged Parquet file that are judged together, after
-- the rest of the file was judged and loaded a part at a time (pipeline/ingest/logs.py,
-- load_staged): the ones the file holds more than once, and the ones already loaded. Whether a
-- copy loads, is an identical re-delivery or a conflict depends only on the other copies of its
-- request_id, so judging these apart from the parts gives every record the outcome it gets when
-- the file is loaded in one piece. Grain: one row per request_id. Input: the view stage_file.

CREATE OR REPLACE TEMP TABLE stage_candidates AS
SELECT logged.request_id AS request_id
FROM stage_file
WHERE logged.request_id IS NOT NULL
GROUP BY ALL
HAVING count(*) > 1
UNION
-- an inner join: its hash table is built on the smaller side and spills
SELECT r.request_id
FROM requests r
JOIN (SELECT DISTINCT logged.request_id AS request_id FROM stage_file) f
  ON f.request_id = r.request_id;
