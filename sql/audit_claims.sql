-- audit_claims: the frame an audit sample is drawn from: every claim of every 'ok' verdict of
-- the LLM judge (judge_verdicts) that has no human label yet (audit_labels), with the strata it
-- falls in (the judge's attributed, model, lang) and what a person needs to label it.
-- Grain: one row per claim (verdict_key, claim_no), ordered by them. No parameters.
WITH claims AS (
    SELECT verdict_key, model, lang, claims, attributed, reasons,
           coalesce(contexts, CAST([] AS VARCHAR[])) AS contexts,
           unnest(generate_series(1, len(claims))) AS claim_no
    FROM judge_verdicts
    WHERE status = 'ok' AND len(claims) > 0
)
SELECT c.verdict_key, CAST(c.claim_no AS INTEGER) AS claim_no, c.model, c.lang,
       c.claims[c.claim_no] AS claim, c.contexts, c.attributed[c.claim_no] AS attributed,
       c.reasons[c.claim_no] AS reason
FROM claims AS c
WHERE NOT EXISTS (SELECT 1 FROM audit_labels AS l
                  WHERE l.verdict_key = c.verdict_key AND l.claim_no = c.claim_no)
ORDER BY c.verdict_key, c.claim_no;
