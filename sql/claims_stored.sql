-- claims_stored: the fixed claims of the goldens of one gold-set version, in order, with where
-- they came from (gold | judge | import).
-- Grain: one row per golden with claims. Parameters: $gold_version.

SELECT gold_id, list(claim ORDER BY claim_no) AS claims, min(source) AS source
FROM golden_claims
WHERE gold_version = $gold_version
GROUP BY gold_id
ORDER BY gold_id;
