-- claims_to_split: the goldens among $gold_ids that have a reference answer but no stored
-- claims, so pipeline/claims.py asks the judge to split their reference once.
-- Grain: one row per golden. Parameters: $gold_version, $gold_ids (VARCHAR[]).

SELECT g.gold_id, g.reference
FROM goldens g
WHERE g.gold_version = $gold_version
  AND list_contains($gold_ids, g.gold_id)
  AND text_or_null(g.reference) IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM golden_claims s
                  WHERE s.gold_version = g.gold_version AND s.gold_id = g.gold_id)
ORDER BY g.gold_id;
