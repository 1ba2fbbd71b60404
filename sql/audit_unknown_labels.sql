-- audit_unknown_labels: the labels of a file that name no claim of a stored 'ok' verdict of
-- the judge (an unknown verdict_key, or a claim_no beyond its claims), so that an import can
-- refuse the file before it stores anything.
-- Grain: one row per such label, in file order. Parameters: $verdict_keys, $claim_nos,
-- $lines (parallel lists, one element per labelled row of the file; $lines its line numbers).
WITH given AS (
    SELECT unnest($verdict_keys) AS verdict_key, unnest($claim_nos) AS claim_no,
           unnest($lines) AS line
)
SELECT g.line, g.verdict_key, g.claim_no, v.verdict_key IS NOT NULL AS known_key,
       len(v.claims) AS claims
FROM given AS g
LEFT JOIN judge_verdicts AS v ON v.verdict_key = g.verdict_key AND v.status = 'ok'
WHERE v.verdict_key IS NULL OR g.claim_no < 1 OR g.claim_no > len(v.claims)
ORDER BY g.line;
