-- audit_agreement: the human labels per judge model and sampling stratum (the judge's label and
-- language, as audit sample draws them), with the claims of the judge in that stratum, so that
-- pipeline/audit.py can weigh each label by the claims it stands for.
-- Grain: one row per model x lang x judge label with labels, by them. No parameters.
-- claims: the judge's 'ok' claims of the stratum, labelled or not; never fewer than its labels
-- (the labels outlive a cleared judge cache).
WITH judged AS (
    SELECT model, lang, attributed AS judge, count(*) AS claims
    FROM (SELECT model, lang, unnest(attributed) AS attributed
          FROM judge_verdicts WHERE status = 'ok')
    WHERE attributed IS NOT NULL
    GROUP BY ALL
),
labelled AS (
    SELECT model, lang, judge,
           count(*) FILTER (WHERE human) AS human_yes,
           count(*) FILTER (WHERE NOT human) AS human_no,
           max(labelled_at) AS labelled_at
    FROM audit_labels
    GROUP BY ALL
)
SELECT l.model, l.lang, l.judge, l.human_yes, l.human_no,
       greatest(coalesce(j.claims, 0), l.human_yes + l.human_no) AS claims, l.labelled_at
FROM labelled AS l
LEFT JOIN judged AS j USING (model, lang, judge)
ORDER BY l.model, l.lang, l.judge;
