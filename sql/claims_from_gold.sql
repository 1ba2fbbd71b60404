-- claims_from_gold: fix the claims of every golden of one gold-set version whose gold file gives
-- `claims` and that has none stored yet (source 'gold'). A golden with stored claims is never
-- touched: claims are fixed once per version, so the denominator never changes between runs.
-- Grain: golden_claims, one row per claim. Parameters: $gold_version.
-- Blank claims are dropped before numbering.

INSERT INTO golden_claims
WITH given AS (
    SELECT g.gold_version, g.gold_id,
           list_filter(g.claims, lambda c: text_or_null(c) IS NOT NULL) AS claims
    FROM goldens g
    WHERE g.gold_version = $gold_version
      AND NOT EXISTS (SELECT 1 FROM golden_claims s
                      WHERE s.gold_version = g.gold_version AND s.gold_id = g.gold_id)
)
SELECT gold_version, gold_id, generate_subscripts(claims, 1) AS claim_no,
       unnest(claims) AS claim, 'gold' AS source
FROM given
WHERE len(claims) > 0;
