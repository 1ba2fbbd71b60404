"""Rebuild: an index rebuild went live, so the gold chunk IDs of every gold set are carried to
the new index by content and the affected days are re-scored.

Chunk IDs rarely survive a rebuild, and a gold ID the new index no longer uses would count as a
miss on every request it serves. So `rebuild` loads the new index's manifest, finds each gold
chunk's content in the manifest of the index that served before (sql/carry_gold_ids.sql) and the
chunks with that content in the new one, and records in `carried_gold_ids` what each gold chunk
is compared as when the new index served the request (sql/route_ids.sql): itself (`same_id`),
the IDs now holding its content (`content_hash`), nothing (`gone`: its content left the index,
so it stays needed and missed, cause not_in_index), or itself as before (`unknown`: no manifest
knows its old content). Requests of other index versions keep the gold IDs as they are.

The carried IDs are part of what a day is scored with (sql/day_manifests.sql), so
the days they change are found stale like any other; this step re-scores the stale days from
the day `live_from` falls in (and any earlier day the new index already served), re-aggregates
them and re-judges drift, as `run` does. Running it again with the same inputs changes
nothing. Days before `live_from` are left to `run` (the manifest fingerprint is one for the
whole warehouse, so `run` finds them stale too and re-scores them to the same values), except
when the gold set in force names one index's chunks: the new manifest can change how the
days before compare, and they are re-scored here too."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from pipeline import state
from pipeline.aggregate import aggregate
from pipeline.config import resolve
from pipeline.drift import drift
from pipeline.errors import RecallwatchError
from pipeline.ingest import FileResult, ingest_index
from pipeline.progress import Progress
from pipeline.score import score
from pipeline.warehouse import queries, run_script, sql, transaction

# How a gold chunk reached the new index, in the order summaries list them.
CARRY_HOWS = ("same_id", "content_hash", "gone", "unknown")


@dataclass(frozen=True)
class NotCarried:
    """A golden's gold chunk the rebuild could not carry by content."""

    gold_version: str
    gold_id: str
    chunk_id: str
    how: str                  # gone | unknown
    from_version: str | None  # the manifest that knew its content (gone); None when unknown


@dataclass(frozen=True)
class RebuildResult:
    index_version: str
    live_from: datetime
    manifest: FileResult
    carried: dict[str, int]            # how -> gold chunks (summed over gold versions)
    not_carried: tuple[NotCarried, ...]
    days_rescored: tuple[datetime, ...]
    days_aggregated: tuple[datetime, ...]
    gold_loaded: bool = True           # False: recorded, carried when a gold set is loaded
    live_again: datetime | None = None  # the --live-from given, when the index had gone live
                                        # before it (live_from is then its first go-live)
    # (gold version, index version) of each gold set that names one index's chunks: compared
    # by content on the others (sql/carry_named_gold.sql), not carried, not counted above
    named: tuple[tuple[str, str], ...] = ()
    # gold version -> how -> gold chunks: `carried` of each gold set
    carried_by_gold: dict[str, dict[str, int]] = field(default_factory=dict)
    # no loaded request was served by index_version (None: some were); else the versions that
    # served from live_from on, most first: a mistyped --version shows here
    serving_instead: tuple[str, ...] | None = None
    # every loaded request of index_version came before live_from while others are loaded
    # from it on: the first and last day it served (None otherwise); and whether live_from
    # lies in the future: a mistyped --live-from shows here
    served_before: tuple[datetime, datetime] | None = None
    in_future: bool = False
    # the manifest this load replaced, when index_version had another one and served requests
    # before live_from (a label reused for every index): (its source, first and last day)
    replaced: tuple[str, datetime, datetime] | None = None

    def as_dict(self) -> dict:
        """Plain values (ISO dates, lists, dicts) for JSON and the CLI."""
        return {
            "index_version": self.index_version,
            "live_from": self.live_from.isoformat(),
            "manifest": {"source": self.manifest.source, "read": self.manifest.read,
                         "loaded": self.manifest.loaded,
                         "quarantined": self.manifest.quarantined,
                         "skipped": self.manifest.skipped},
            "carried": dict(self.carried),
            "not_carried": [
                {"gold_version": c.gold_version, "gold_id": c.gold_id, "chunk_id": c.chunk_id,
                 "how": c.how, "from_version": c.from_version}
                for c in self.not_carried
            ],
            "days_rescored": [day.date().isoformat() for day in self.days_rescored],
            "days_aggregated": [day.date().isoformat() for day in self.days_aggregated],
            "gold_loaded": self.gold_loaded,
            "live_again": self.live_again.isoformat() if self.live_again else None,
            "named": [{"gold_version": g, "index_version": i} for g, i in self.named],
            "carried_by_gold": {g: dict(counts) for g, counts in self.carried_by_gold.items()},
            "serving_instead": (None if self.serving_instead is None
                                else list(self.serving_instead)),
            "served_before": (None if self.served_before is None
                              else [day.date().isoformat() for day in self.served_before]),
            "in_future": self.in_future,
            "replaced": (None if self.replaced is None else
                         {"source": self.replaced[0],
                          "served": [day.date().isoformat() for day in self.replaced[1:]]}),
        }


def rebuild(con, index_version: str, manifest: str, live_from: datetime | None, *,
            progress: Progress | None = None, now: datetime | None = None) -> RebuildResult:
    """Load `manifest` as `index_version` (which went live at `live_from`, naive UTC), carry
    every gold set's chunk IDs to it by content (replacing what was carried to it before), and
    re-score, re-aggregate and re-judge the affected days that are stale. Idempotent. An
    index that served before `live_from` and was recorded going live earlier goes live again
    (a rollback to it): it keeps its first go-live (sql/record_rebuild.sql). `now` (naive UTC)
    tells a `live_from` in the future (RebuildResult.in_future); None tells none."""
    if live_from is None:
        raise RecallwatchError("--live-from must say when the rebuilt index went live "
                               "(e.g. 2026-11-08 or 2026-11-08T06:00).")
    before = con.execute("SELECT source FROM ingest_files WHERE kind = 'index' "
                         "AND version = $v", {"v": index_version}).fetchall()
    loaded = ingest_index(con, manifest, index_version)
    given = live_from
    with transaction(con):   # recorded first: a gold set loaded later is carried to it
        run_script(con, "record_rebuild", {"index_version": index_version,
                                            "live_from": live_from})
        live_from = con.execute("SELECT live_from FROM rebuilds WHERE index_version = $v",
                                {"v": index_version}).fetchall()[0][0]
        run_script(con, "carry_gold_ids", {"index_version": index_version,
                                            "live_from": live_from})
    carry_again(con)   # the rebuilds that went live after it chain through it
    gold_loaded = resolve(con).gold_version is not None
    rescored, aggregated = (_catch_up(con, index_version, live_from, progress) if gold_loaded
                            else ([], []))
    named_queries = queries("rebuild_carried")
    by_gold: dict[str, dict[str, int]] = {}
    for gold_version, how, chunks in con.execute(named_queries["carried_counts"],
                                                 {"index_version": index_version}).fetchall():
        by_gold.setdefault(gold_version, dict.fromkeys(CARRY_HOWS, 0))[how] = chunks
    lost = con.execute(named_queries["not_carried"], {"index_version": index_version}).fetchall()
    ((first, last),) = con.execute(
        "SELECT min(timestamp), max(timestamp) FROM requests WHERE index_version = $v",
        {"v": index_version}).fetchall()
    instead = None if first is not None else tuple(row[0] for row in con.execute(
        named_queries["serving_from"], {"live_from": live_from}).fetchall())
    later = con.execute("SELECT 1 FROM requests WHERE timestamp >= $t LIMIT 1",
                        {"t": live_from}).fetchall()
    served_before = (first, last) if last is not None and last < live_from and later else None
    in_future = now is not None and live_from > now
    replaced = None
    if before and not loaded.skipped:
        ((earliest, latest),) = con.execute(
            "SELECT min(timestamp), max(timestamp) FROM requests WHERE index_version = $v "
            "AND timestamp < $t", {"v": index_version, "t": live_from}).fetchall()
        replaced = (before[0][0], earliest, latest) if earliest is not None else None
    return RebuildResult(
        index_version=index_version, live_from=live_from, manifest=loaded,
        carried={how: sum(counts[how] for counts in by_gold.values()) for how in CARRY_HOWS},
        carried_by_gold=by_gold, serving_instead=instead, served_before=served_before,
        in_future=in_future, replaced=replaced,
        not_carried=tuple(NotCarried(*row) for row in lost),
        days_rescored=tuple(rescored), days_aggregated=tuple(aggregated),
        gold_loaded=gold_loaded, live_again=given if given != live_from else None,
        named=tuple(con.execute("SELECT gold_version, index_version FROM gold_versions WHERE "
                                "index_version IS NOT NULL ORDER BY seq").fetchall()))


def carry_again(con) -> None:
    """Carry every gold set's chunks anew to each rebuilt index (in the order they went live,
    as rebuilds chain through the index before), and those of a gold set that names one
    index's chunks to every other index: a manifest or gold set loaded since changes what
    they match, and logs loaded since can change which index served last before each went
    live. The days it changes are found stale by the next scoring; carrying what is
    already carried changes nothing."""
    rebuilt = con.execute("SELECT index_version, live_from FROM rebuilds ORDER BY 2, 1"
                          ).fetchall()
    for index_version, live_from in rebuilt:
        with transaction(con):
            run_script(con, "carry_gold_ids", {"index_version": index_version,
                                                "live_from": live_from})
    with transaction(con):   # the gold sets that name one index's chunks
        run_script(con, "carry_named_gold")


def _catch_up(con, index_version: str, live_from: datetime,
              progress: Progress | None) -> tuple[list[datetime], list[datetime]]:
    """Re-score the stale days the rebuild affects, re-aggregate them in every grain kept and
    re-judge drift, as pipeline.run does for every stale day."""
    config = resolve(con)
    if not con.execute("SELECT 1 FROM requests LIMIT 1").fetchall():
        return [], []
    first = datetime.combine(live_from.date(), datetime.min.time())
    served = {row[0] for row in con.execute(sql("rebuild_served_days"),
                                            {"index_version": index_version}).fetchall()}
    # a gold set that names one index's chunks compares them by content on every index, so
    # the new manifest can change the days before live_from too: every stale day is re-scored
    named = bool(con.execute("SELECT 1 FROM gold_versions WHERE gold_version = $g "
                             "AND index_version IS NOT NULL",
                             {"g": config.gold_version}).fetchall())
    affected = [day for day in state.stale_score_days(con, config)
                if day >= first or day in served or named]
    rescored: list[datetime] = []
    for start, end in state.contiguous(affected):
        summary = score(con, config, start=start, end=end, progress=progress)
        rescored.extend(w[0] for w in summary.windows)
    aggregated: set[datetime] = set()
    for grain in config.grains:
        stale = set(rescored) | {day for day in state.stale_metric_days(con, config, grain)
                                 if day >= first or day in served or named}
        for start, end in state.contiguous(sorted(stale)):
            aggregate(con, config, grain=grain, start=start, end=end, progress=progress)
        aggregated |= stale
    if state.stale_drift(con, config):
        drift(con, config, progress=progress)
    return rescored, sorted(aggregated)

