-- claims_from_gold: fix the claims of every golden of one gold-set version whose gold file gives
-- `claims` and that has none stored yet (source 'gold'). A golden with stored claims is never
-- touched: claims are fixed once per version, so the denominator never changes between runs.
-- Grain: golden_claims, one row per claim. Parameters: $gold_version.
-- Each claim is stripped of blanks at its ends and blank claims are dropped before numbering; a
-- claim given twice (once stripped, in Unicode NFC) is needed once, in its first spelling, as
-- a split or an imported claim is (pipeline/claims.py).

INSERT INTO golden_claims
WITH given AS (
    SELECT g.gold_version, g.gold_id,
           list_filter(list_transform(g.claims, lambda c: stripped_text(c)),
                       lambda c: c <> '') AS claims
    FROM goldens g
    WHERE g.gold_version = $gold_version
      AND NOT EXISTS (SELECT 1 FROM golden_claims s
                      WHERE s.gold_version = g.gold_version AND s.gold_id = g.gold_id)
),
once AS (
    SELECT gold_version, gold_id,
           list_filter(claims, lambda c, i: list_position(
               list_transform(claims, lambda x: nfc_normalize(x)), nfc_normalize(c)) = i)
               AS claims
    FROM given
)
SELECT gold_version, gold_id, generate_subscripts(claims, 1) AS claim_no,
       unnest(claims) AS claim, 'gold' AS source
FROM once
WHERE len(claims) > 0;
