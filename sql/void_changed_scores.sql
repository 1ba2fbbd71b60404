-- void_changed_scores: after a changed log file is loaded again, remove the scores of its
-- requests delivered again at the same time with other content (another retrieval, golden,
-- query, k, ...), and of those no file delivers any more: each was scored from what it was,
-- and a day holding it would publish that score. Without a score the request is unscored, so
-- `aggregate` refuses its day until it is scored again (sql/part_scored_days.sql), as `run`
-- does; a request that is gone counts in no day. A request delivered at another time is found
-- there by its score's date; one delivered as it was keeps its score.
-- Grain: deletes from request_scores, request_cutoffs and miss_causes (every route). Ends with
-- the UTC days the deleted scores were dated in, so pipeline.state can void what was built on
-- them, as scoring does (sql/score_clear.sql).
-- Input: temp table forgotten_requests (sql/forget_source.sql), dropped here.
-- Parameters: $source (the file).

CREATE OR REPLACE TEMP TABLE changed_requests AS
SELECT request_id FROM (
    SELECT * EXCLUDE (source, line) FROM requests
    WHERE source = $source AND request_id IN (SELECT request_id FROM forgotten_requests)
    EXCEPT
    SELECT * FROM forgotten_requests
) AS c
JOIN forgotten_requests AS f USING (request_id, timestamp)
UNION ALL
-- no longer delivered by any file: its score is of a request that is gone, and another file
-- may bring it back later with other content
SELECT request_id FROM forgotten_requests
WHERE request_id NOT IN (SELECT request_id FROM requests);

CREATE OR REPLACE TEMP TABLE voided_score_days AS
SELECT DISTINCT date_trunc('day', timestamp) AS day FROM request_scores
WHERE request_id IN (SELECT request_id FROM changed_requests);

DELETE FROM request_cutoffs WHERE request_id IN (SELECT request_id FROM changed_requests);

DELETE FROM miss_causes WHERE request_id IN (SELECT request_id FROM changed_requests);

DELETE FROM request_scores WHERE request_id IN (SELECT request_id FROM changed_requests);

DROP TABLE changed_requests;

DROP TABLE forgotten_requests;

SELECT day FROM voided_score_days ORDER BY day;
