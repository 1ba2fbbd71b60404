-- record_judge_verdict: store one verdict of the LLM judge as it arrives, replacing an earlier
-- (failed) row of the same key. The caller runs both statements in one transaction; error is
-- already free of secrets.
-- Grain: judge_verdicts, one row per verdict_key. Parameters: $verdict_key, $model,
-- $prompt_version, $lang, $claims, $attributed, $reasons, $tokens, $calls, $status, $error,
-- $created_at, $contexts (the retrieved contexts judged).

DELETE FROM judge_verdicts WHERE verdict_key = $verdict_key;

INSERT INTO judge_verdicts (verdict_key, model, prompt_version, lang, claims, attributed,
                            reasons, tokens, calls, status, error, created_at, contexts)
VALUES ($verdict_key, $model, $prompt_version, $lang, $claims, $attributed, $reasons, $tokens,
        $calls, $status, $error, $created_at, $contexts);
