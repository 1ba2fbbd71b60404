-- record_audit_labels: store the human labels of one labelled audit file, replacing earlier
-- labels of the same claims, with the judge's label, model and lang copied from its verdict.
-- The caller runs both statements in one transaction, after sql/audit_unknown_labels.sql
-- found every label's claim.
-- Grain: audit_labels, one row per (verdict_key, claim_no). Parameters: $verdict_keys,
-- $claim_nos, $humans (parallel lists, one element per labelled claim), $source (the file),
-- $labelled_at.

DELETE FROM audit_labels AS l
USING (SELECT unnest($verdict_keys) AS verdict_key, unnest($claim_nos) AS claim_no) AS g
WHERE l.verdict_key = g.verdict_key AND l.claim_no = g.claim_no;

INSERT INTO audit_labels (verdict_key, claim_no, model, lang, judge, human, source,
                          labelled_at)
SELECT g.verdict_key, g.claim_no, v.model, v.lang, v.attributed[g.claim_no], g.human,
       $source, $labelled_at
FROM (SELECT unnest($verdict_keys) AS verdict_key,
             CAST(unnest($claim_nos) AS INTEGER) AS claim_no, unnest($humans) AS human) AS g
JOIN judge_verdicts AS v ON v.verdict_key = g.verdict_key AND v.status = 'ok';
