-- route_passages_pairs: every (gold passage, candidate text) pair of the window's scored
-- requests, read as a stream of Arrow batches by pipeline/routes/passages.py (the pairs are
-- never stored: a window holds passages x candidates of them).
-- Grain: one row per gold passage x distinct candidate (chunk, text) of the same request. Reads the
-- temp tables of sql/route_passages.sql; no parameters.

SELECT i.request_id, i.passage_no, c.chunk_id, c.place, i.passage, c.text
FROM passage_items i
JOIN passage_candidates c USING (request_id)
