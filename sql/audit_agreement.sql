-- audit_agreement: the 2x2 table of judge and human labels per judge model (pipeline/agreement.py
-- lays it out: a = both attributed, b = judge only, c = human only, d = neither), with the
-- newest import, for the audit's figures.
-- Grain: one row per model with labels, by model. No parameters.
SELECT model,
       count(*) FILTER (WHERE judge AND human) AS a,
       count(*) FILTER (WHERE judge AND NOT human) AS b,
       count(*) FILTER (WHERE NOT judge AND human) AS c,
       count(*) FILTER (WHERE NOT judge AND NOT human) AS d,
       max(labelled_at) AS labelled_at
FROM audit_labels
GROUP BY model
ORDER BY model;
