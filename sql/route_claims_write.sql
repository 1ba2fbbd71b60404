-- route_claims_write: the `claims` route for one window, last part: route_window from the
-- judge's outcome per request.
-- Grain: route_window one row per request of the window (see pipeline/routes).
-- Parameters: none. Reads claims_matched (sql/route_claims.sql) and
-- claim_outcomes(request_id, status, claims, attributed), registered from Arrow by
-- pipeline/routes/claims.py: status 'scored', 'judge_failed', 'not_judged', 'no_evidence'
-- or 'no_context_text' per scored request of score_matched.
-- The judge reads the whole served context at once, so an attributed claim's place is the
-- served k (covered at every cutoff from k on) and a claim not attributed has none.

CREATE OR REPLACE TEMP TABLE route_window AS
SELECT m.request_id, m.timestamp, m.gold_id, m.index_version, m.k, m.chunk_ranks,
       coalesce(o.status, m.status) AS status,
       o.claims AS needed_items,
       CASE WHEN o.status = 'scored'
            THEN list_transform(o.attributed, lambda a: CASE WHEN a THEN m.k END)::INTEGER[]
       END AS places
FROM claims_matched m
LEFT JOIN claim_outcomes o USING (request_id);
