-- fill_jsonl_raw: give the quarantined records of one JSON Lines file their line's text, from
-- stage_lines (sql/read_jsonl_lines.sql): only the lines of quarantined records are looked
-- up, and when none of the file's records is quarantined the lines are not read at all (the
-- join's lookup side is empty). Parameters: $source, $raw_limit (characters of a bad record
-- kept).

UPDATE quarantine
SET raw = left(l.text, $raw_limit)
FROM (
    SELECT line, text
    FROM stage_lines
    WHERE line IN (
        SELECT line FROM quarantine WHERE kind = 'logs' AND source = $source AND raw IS NULL)
) l
WHERE quarantine.kind = 'logs' AND quarantine.source = $source AND quarantine.raw IS NULL
  AND quarantine.line = l.line;
