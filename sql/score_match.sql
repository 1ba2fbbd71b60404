-- score_match: the table macro every route reads: each request of a window matched to its
-- golden, with the golden's fields and the request's status.
-- Grain: one row per request of [_start, _end). Parameters of the macro: _start, _end
-- (TIMESTAMP, UTC), _gold_version, _needs (the golden fields the route needs, VARCHAR[]).
-- A request joins its golden by gold_id, else by normalized query text. Status:
-- 'no_gold_match' when no golden matched, 'no_evidence' when every field the route needs is
-- empty (never scored 0 or 1), else 'scored'. A golden's claims are those of the gold file or
-- those stored for it (golden_claims: split from its reference, or imported).

CREATE OR REPLACE TEMP MACRO score_matched(_start, _end, _gold_version, _needs) AS TABLE
WITH by_question AS (
    -- two goldens with the same normalized question: the smallest gold_id answers, always
    SELECT question_norm, min(gold_id) AS gold_id
    FROM goldens
    WHERE gold_version = _gold_version
    GROUP BY question_norm
),
stored AS (
    -- goldens with claims stored (only looked for when the route needs claims)
    SELECT DISTINCT gold_id
    FROM golden_claims
    WHERE gold_version = _gold_version AND list_contains(_needs, 'claims')
),
joined AS (
    SELECT r.request_id, r.timestamp, r.index_version, r.k, r.chunk_ids, r.chunk_ranks,
           g.gold_id, g.gold_chunk_ids, g.gold_passages, g.claims, g.reference,
           s.gold_id IS NOT NULL AS claims_stored
    FROM ranked_requests r
    LEFT JOIN by_question q ON q.question_norm = r.query_norm
    LEFT JOIN goldens g
           ON g.gold_version = _gold_version AND g.gold_id = coalesce(r.gold_id, q.gold_id)
    LEFT JOIN stored s ON s.gold_id = g.gold_id
    WHERE r.timestamp >= _start AND r.timestamp < _end
)
SELECT
    * EXCLUDE (claims_stored),
    CASE
        WHEN gold_id IS NULL THEN 'no_gold_match'
        WHEN (list_contains(_needs, 'gold_chunk_ids') AND len(gold_chunk_ids) > 0)
          OR (list_contains(_needs, 'gold_passages') AND len(gold_passages) > 0)
          OR (list_contains(_needs, 'claims') AND (len(claims) > 0 OR claims_stored))
          OR (list_contains(_needs, 'reference') AND text_or_null(reference) IS NOT NULL)
            THEN 'scored'
        ELSE 'no_evidence'
    END AS status
FROM joined;
