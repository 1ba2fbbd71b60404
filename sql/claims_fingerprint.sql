-- claims_fingerprint: what `recallwatch claims import` changed in the claims of one gold-set
-- version, as one value: the md5 of every imported golden's claims in order, '' when none was
-- imported. The claims route records it with each scored day (pipeline.state), so a day scored
-- before an import is stale. Claims from the gold file or from the judge's split are fixed once
-- and never change afterwards, so they are left out: a golden split for a new day must not
-- make every earlier day stale.
-- Grain: one row. Parameters: $gold_version.

SELECT coalesce(md5(string_agg(to_json([gold_id, claim_no::VARCHAR, claim])::VARCHAR, ','
                               ORDER BY gold_id, claim_no)), '')
FROM golden_claims
WHERE gold_version = $gold_version AND source = 'import';
