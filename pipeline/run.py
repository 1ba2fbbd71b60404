"""Run: every step for new data, in order — ingest the given files (unchanged files are
skipped), score the day windows that gained, lost or moved requests or were never scored (all
of them after a new gold set, manifest, cutoffs or pass mark), aggregate those windows in every
grain kept, and write the report. The CLI's `run` and `demo` and any scheduler call this."""

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
    report: Path | None


def days_to_score(con, changed_sources: list[str], route: str = "ids") -> list[datetime]:
    """Days with requests from files (re)ingested now, with requests never scored, or with
    scores whose request is gone; a new gold version rescores everything (see run)."""
    rows = con.execute(sql("days_to_score"),
                       {"sources": changed_sources, "route": route}).fetchall()
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
    # New cutoffs, pass mark, gold set or manifests (loaded here or by `ingest` since the last
    # score) change every day's numbers: rescoring only some days would mix them in one curve.
    cutoffs, pass_mark = current_cutoffs(con, cutoffs), current_pass_mark(con, pass_mark)
    rescore_all = bool(setting(con, "cutoffs", "")) and (
        setting(con, "cutoffs", "") != ",".join(map(str, cutoffs))
        or float(setting(con, "pass_mark", str(pass_mark))) != pass_mark
        or setting(con, "gold_version", "") != latest_gold_version(con)
        or setting(con, "manifests", "") != manifest_fingerprint(con))
    changed = [f.source for f in summary.files if not f.skipped] if summary else []
    ranges = [(None, None)] if rescore_all else contiguous(days_to_score(con, changed))
    grains = ["day"] + [g for g in ("hour",) if con.execute(
        "SELECT 1 FROM window_metrics WHERE grain = $g LIMIT 1", {"g": g}).fetchall()]
    days: list[datetime] = []
    for start, end in ranges:
        scored = score(con, start=start, end=end, cutoffs=cutoffs, pass_mark=pass_mark,
                       progress=progress)
        days.extend(w[0] for w in scored.windows)
        if not scored.windows:
            continue
        # unbounded (everything rescored): aggregate everything, stale windows included
        bounds = ((None, None) if start is None
                  else (scored.windows[0][0], scored.windows[-1][1]))
        for grain in grains:  # every grain kept so far stays current
            aggregate(con, grain=grain, start=bounds[0], end=bounds[1], pass_mark=pass_mark,
                      progress=progress)
    report = None
    if report_dir is not None:
        from pipeline.report import write_report
        report = write_report(con, report_dir)
    return RunSummary(summary, tuple(days), report)
