"""Run: every step for new data, in order — ingest the given files (unchanged files are
skipped), score the day windows that are out of date (they gained, lost or moved requests, were
never scored, or were scored with another gold set, other cutoffs or other manifests than those
in force, whichever command loaded them), aggregate those days — and days aggregated with
another pass mark — in every grain kept, and write the report. The CLI's `run` and `demo` and
any scheduler call this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from pipeline.aggregate import aggregate
from pipeline.ingest import IngestSummary, ingest_gold, ingest_index, ingest_logs
from pipeline.score import (
    current_cutoffs,
    current_pass_mark,
    latest_gold_version,
    manifest_fingerprint,
    score,
    setting,
)
from pipeline.warehouse import sql


@dataclass(frozen=True)
class RunSummary:
    ingest: IngestSummary | None
    days_scored: tuple[datetime, ...]
    days_aggregated: tuple[datetime, ...]
    report: Path | None


def days_to_score(con, changed_sources: list[str], *, gold_version: str,
                  cutoffs: tuple[int, ...], route: str = "ids") -> list[datetime]:
    """Days with requests from files (re)ingested now, with requests never scored, with scores
    whose request is gone or moved, or scored with another gold set, cutoffs or manifests."""
    rows = con.execute(sql("days_to_score"), {
        "sources": changed_sources, "route": route, "gold_version": gold_version,
        "cutoffs": ",".join(map(str, cutoffs)), "manifests": manifest_fingerprint(con),
    }).fetchall()
    return [row[0] for row in rows]


def contiguous(days: list[datetime]) -> list[tuple[datetime, datetime]]:
    """Runs of consecutive days as [start, end) ranges, so each is one score/aggregate call."""
    ranges: list[tuple[datetime, datetime]] = []
    for day in days:
        if ranges and ranges[-1][1] == day:
            ranges[-1] = (ranges[-1][0], day + timedelta(days=1))
        else:
            ranges.append((day, day + timedelta(days=1)))
    return ranges


def run(con, *, logs: list[str] | None = None, gold: str | None = None,
        gold_version: str | None = None, index: list[tuple[str, str]] | None = None,
        cutoffs: tuple[int, ...] | None = None, pass_mark: float | None = None,
        report_dir: Path | None = None, progress=None) -> RunSummary:
    if gold:
        ingest_gold(con, gold, gold_version or "")
    for path, version in index or []:
        ingest_index(con, path, version)
    summary = ingest_logs(con, logs, progress=progress) if logs else None
    changed = [f.source for f in summary.files if not f.skipped] if summary else []
    cutoffs, pass_mark = current_cutoffs(con, cutoffs), current_pass_mark(con, pass_mark)
    days: list[datetime] = []
    if con.execute("SELECT 1 FROM requests LIMIT 1").fetchall():
        gold_version = gold_version or latest_gold_version(con)
        # out-of-date days are found in the data (score_windows), whichever command left them
        for start, end in contiguous(days_to_score(con, changed, gold_version=gold_version,
                                                   cutoffs=cutoffs)):
            scored = score(con, start=start, end=end, cutoffs=cutoffs, pass_mark=pass_mark,
                           gold_version=gold_version, progress=progress)
            days.extend(w[0] for w in scored.windows)
    aggregated: set[datetime] = set()
    for grain in setting(con, "grains", "day").split(","):  # every grain kept stays current
        stale = [row[0] for row in con.execute(sql("days_to_aggregate"), {
            "grain": grain, "pass_mark": pass_mark, "route": "ids"}).fetchall()]
        for start, end in contiguous(sorted(set(days) | set(stale))):
            aggregate(con, grain=grain, start=start, end=end, pass_mark=pass_mark,
                      progress=progress)
        aggregated |= set(days) | set(stale)
    report = None
    if report_dir is not None:
        from pipeline.report import write_report
        report = write_report(con, report_dir, gold_version=gold_version)
    return RunSummary(summary, tuple(days), tuple(sorted(aggregated)), report)
