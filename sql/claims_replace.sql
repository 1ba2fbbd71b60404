-- claims_replace: store the claims of one golden, replacing any it had (the judge's split of
-- its reference, or a person's correction on import). The caller runs it in a transaction.
-- Grain: golden_claims, one row per claim. Parameters: $gold_version, $gold_id,
-- $claims (VARCHAR[], in order), $source (judge | import).

DELETE FROM golden_claims WHERE gold_version = $gold_version AND gold_id = $gold_id;

INSERT INTO golden_claims
SELECT $gold_version, $gold_id, generate_subscripts($claims::VARCHAR[], 1),
       unnest($claims::VARCHAR[]), $source;
