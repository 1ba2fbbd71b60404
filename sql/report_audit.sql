-- report_audit: the queries behind the report's "Judge audit" note: how many claims each judge
-- model has given an 'ok' verdict on (judge_verdicts), next to the audit figures of
-- sql/audit_agreement.sql.

-- name: judged_claims
-- Claims with an 'ok' verdict per judge model, with its newest verdict.
-- Grain: one row per model, by model. No parameters.
SELECT model, CAST(sum(len(claims)) AS BIGINT) AS claims, max(created_at) AS newest
FROM judge_verdicts
WHERE status = 'ok'
GROUP BY model
ORDER BY model;
