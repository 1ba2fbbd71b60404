-- judge_cached_verdicts: the reusable verdicts among the keys a judge run needs (status 'ok'
-- only: a failed verdict is judged again).
-- Grain: one row per cached verdict_key. Parameters: $keys (the verdict keys wanted, a list).

SELECT verdict_key, claims, attributed, reasons, tokens, calls
FROM judge_verdicts
WHERE status = 'ok' AND list_contains($keys, verdict_key);
