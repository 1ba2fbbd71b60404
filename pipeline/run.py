"""Run: catch up. Every step for new data, in order — ingest the given files (unchanged files
are skipped), score the day windows that pipeline.state finds stale, aggregate those days and
every other stale day in every grain kept, judge drift, write the report and send the alerts
due. The CLI's `run` and `demo` and any scheduler call this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pipeline import state
from pipeline.aggregate import aggregate
from pipeline.config import Config, put_in_force, require_gold, resolve
from pipeline.drift import DriftSummary, drift
from pipeline.errors import RecallwatchError
from pipeline.ingest import IngestSummary, ingest_gold, ingest_index, ingest_logs
from pipeline.progress import Progress
from pipeline.score import score
from pipeline.sources import ReadOptions


@dataclass(frozen=True)
class RunSummary:
    ingest: IngestSummary | None
    days_scored: tuple[datetime, ...]
    days_aggregated: tuple[datetime, ...]
    drift: DriftSummary | None
    report: Path | None
    alerts: object | None = None   # pipeline.alerts.AlertSummary when channels were given
    # the gold set and manifests given, as loaded: (what, version, FileResult)
    loaded: tuple[tuple[str, str, object], ...] = ()


def run(con, *, logs: list[str] | None = None, gold: str | None = None,
        gold_version: str | None = None, gold_index_version: str | None = None,
        index: list[tuple[str, str]] | None = None,
        cutoffs: tuple[int, ...] | None = None, pass_mark: float | None = None,
        report_dir: Path | None = None, progress: Progress | None = None,
        alert_channels: list | None = None, now: datetime | None = None,
        read: ReadOptions | None = None, max_record_bytes: int | None = None) -> RunSummary:
    """Bring the warehouse up to date and return what was done.

    Loads `gold` as `gold_version` (both or neither; naming the chunks of index
    `gold_index_version` when given, pipeline.ingest.gold) and each (path, version) of `index`, then
    the `logs` (files, directories, globs, s3:// prefixes, postgresql:// tables), read as
    `read` says (pipeline/sources). `cutoffs` and `pass_mark`, when given, are put in
    force first: every day built with others becomes stale. Scores with `gold_version`, else
    the newest loaded gold set. Then rescores exactly the stale days (pipeline.state: new or
    changed requests, another gold set, other cutoffs or manifests, part-scored days),
    re-aggregates them and every day with stale metrics in every grain kept, judges drift when
    drift_events lags (pipeline.drift), and writes the report to `report_dir` when given.

    Idempotent: a second run over the same inputs rescores nothing and changes nothing."""
    # blank ones are refused here, in run's own words (ingest_gold's name `ingest gold` flags)
    if gold and not (gold_version or "").strip():
        raise RecallwatchError("--gold needs --gold-version to name the gold-set version.")
    if gold_index_version is not None and not gold:
        raise RecallwatchError("--gold-index-version names the index of the gold set --gold "
                               "loads; give --gold too.")
    if gold_index_version is not None and not gold_index_version.strip():
        raise RecallwatchError("--gold-index-version must name the index version whose chunk "
                               "IDs --gold names (e.g. idx-2026-11), or be left out.")
    if report_dir is not None:   # before the work, not after it
        from pipeline.report import check_report_dir

        check_report_dir(report_dir)
    loaded = ([("gold", gold_version, ingest_gold(con, gold, gold_version, gold_index_version))]
              if gold else [])
    loaded += [("index", version, ingest_index(con, path, version))
               for path, version in index or []]
    summary = (ingest_logs(con, logs, progress=progress, options=read,
                           max_record_bytes=max_record_bytes) if logs else None)
    # everything is checked before anything is put in force
    config = resolve(con, cutoffs=cutoffs, pass_mark=pass_mark, gold_version=gold_version)
    if con.execute("SELECT 1 FROM requests LIMIT 1").fetchall():
        require_gold(config)
    if cutoffs is not None or pass_mark is not None:
        put_in_force(con, config)
    days, aggregated, judged = catch_up(con, config, progress=progress)
    report = None
    if report_dir is not None:
        from pipeline.report import write_report

        report = write_report(con, report_dir, gold_version=config.gold_version)
    sent = None
    if alert_channels:
        from pipeline.alerts import send_alerts

        if now is None:
            raise TypeError("run needs now= to send alerts")
        sent = send_alerts(con, config, alert_channels,
                           report=str(report.resolve()) if report else None, now=now)
    return RunSummary(summary, days, aggregated, judged, report, sent, tuple(loaded))


def catch_up(con, config: Config, *, progress: Progress | None = None
             ) -> tuple[tuple[datetime, ...], tuple[datetime, ...], DriftSummary | None]:
    """Carry the gold IDs again (rebuilt indexes, gold sets that name one index's chunks),
    re-score every stale day, re-aggregate every stale window in every grain kept and judge
    drift when drift_events lags: what `run` does after ingesting. Returns the days scored,
    the days aggregated and the drift summary (None: drift was current)."""
    if con.execute("SELECT 1 FROM rebuilds UNION ALL SELECT 1 FROM gold_versions "
                   "WHERE index_version IS NOT NULL LIMIT 1").fetchall():
        from pipeline.rebuild import carry_again

        # a rebuilt index's carried gold IDs (and the IDs a gold set naming one index's
        # chunks is compared as elsewhere) follow the content loaded since and the logs,
        # also those loaded by `ingest logs` before this run (late days can change which
        # index served last before a rebuild)
        carry_again(con)
    days: list[datetime] = []
    # scores left with no request (every request re-delivered away) are cleared as any
    # day's are: scoring a day without requests removes its rows
    if con.execute("SELECT 1 FROM requests UNION ALL SELECT 1 FROM request_scores "
                   "LIMIT 1").fetchall():
        for start, end in state.contiguous(state.stale_score_days(con, config)):
            scored = score(con, config, start=start, end=end, progress=progress)
            days.extend(w[0] for w in scored.windows)
    aggregated: set[datetime] = set()
    for grain in config.grains:
        stale = set(days) | set(state.stale_metric_days(con, config, grain))
        for start, end in state.contiguous(sorted(stale)):
            aggregate(con, config, grain=grain, start=start, end=end, progress=progress)
        aggregated |= stale
    judged = drift(con, config, progress=progress) if state.stale_drift(con, config) else None
    return tuple(days), tuple(sorted(aggregated)), judged
