-- record_rebuild: record that $index_version went live at $live_from (pipeline/rebuild.py).
-- Grain: rebuilds, one row per index version. Parameters: $index_version, $live_from.
-- An index goes live once as a rebuild and may go live again later (a rollback to it, after
-- the index that replaced it): its gold chunks stay carried from its first go-live, the one
-- the indexes after it were carried through, so an index that already served before
-- $live_from keeps the earlier time recorded. Before any log up to $live_from is loaded (the
-- rebuild history recorded first), the rebuilds tell it instead: one recorded going live
-- before another index recorded going live before $live_from was replaced by that index, and
-- $live_from is its going live again. Otherwise an index is being recorded for the first time
-- or corrected (a mistyped --live-from, the logs showing it served nothing before), and takes
-- $live_from.
INSERT INTO rebuilds
SELECT $index_version, CASE
    WHEN EXISTS (SELECT 1 FROM requests
                 WHERE index_version = $index_version AND timestamp < $live_from)
      OR (NOT EXISTS (SELECT 1 FROM requests WHERE timestamp < $live_from)
          AND EXISTS (SELECT 1 FROM rebuilds this
                      JOIN rebuilds other ON other.index_version <> this.index_version
                                         AND other.live_from > this.live_from
                                         AND other.live_from < $live_from
                      WHERE this.index_version = $index_version))
    THEN least($live_from::TIMESTAMP,
               (SELECT live_from FROM rebuilds WHERE index_version = $index_version))
    ELSE $live_from::TIMESTAMP
END
ON CONFLICT (index_version) DO UPDATE SET live_from = excluded.live_from;
