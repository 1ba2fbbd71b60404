"""The public library API: what the `recallwatch` CLI and a scheduler (an Airflow task) call.

Each function takes plain values — a warehouse path (None: $RECALLWATCH_WAREHOUSE, else
./warehouse/recallwatch.duckdb), ISO dates or date-times (naive means UTC), file paths,
settings — opens the warehouse, resolves the configuration once, runs one step and returns its
summary. Every step replaces what it builds for its window in one transaction and is
idempotent: calling it twice with the same inputs changes nothing. DuckDB allows one writer
process per warehouse file; a second writer gets a clear error, never a half-written window."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from pipeline import config as settings
from pipeline.errors import RecallwatchError
from pipeline.ingest.fields import FIRST_YEAR, LAST_YEAR
from pipeline.progress import Progress
from pipeline.warehouse import connect

Warehouse = str | os.PathLike | None
When = str | datetime | None


def record_limit(given: int | None) -> int | None:
    """The record size limit to read logs with: the one given, else RECALLWATCH_MAX_RECORD_BYTES
    (how a DAG gets one), else None (each file's own, or the default: pipeline.ingest.logs)."""
    if given is not None:
        if given < 1:
            raise RecallwatchError(f"max_record_bytes must be at least 1, got {given}.")
        return given
    text = os.environ.get("RECALLWATCH_MAX_RECORD_BYTES", "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise RecallwatchError("RECALLWATCH_MAX_RECORD_BYTES must be a number of bytes of at "
                               f"least 1, e.g. 16777216; got {text[:40]!r}.")
    return int(text)


def instant(value: When, what: str = "time") -> datetime | None:
    """An ISO date or date-time (or a datetime) as a naive UTC datetime; None stays None."""
    if value is None or isinstance(value, datetime):
        parsed = value
    else:
        try:
            parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise RecallwatchError(
                f"{what} {value!r} is not an ISO date or date-time (e.g. 2026-11-01).") from None
    if parsed is not None and parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    if parsed is not None and not (datetime(FIRST_YEAR, 1, 1) <= parsed
                                   <= datetime(LAST_YEAR, 1, 1)):
        raise RecallwatchError(
            f"{what} {value} is outside {FIRST_YEAR}-01-01..{LAST_YEAR}-01-01, where logged "
            "timestamps can lie (others are quarantined).")
    return parsed


def ingest_logs(warehouse: Warehouse, paths: list[str], *, max_record_bytes: int | None = None,
                progress: Progress | None = None, start: When = None, end: When = None,
                fmt: str | None = None, table: str | None = None, columns: str | None = None):
    """Load request logs (JSONL[.gz] / Parquet files, directories, globs; s3:// prefixes;
    postgresql:// tables with `table`: pipeline/sources; in the native format or one `fmt`
    names or detection finds: pipeline/formats), each delivery in one transaction: a changed
    one replaces the requests it loaded (and marks their days stale), an unchanged one is
    skipped, so ingesting twice changes nothing. [start, end), when given, limits what
    sources that can choose read (S3 partitions, a table's rows). Returns an IngestSummary.
    See pipeline.ingest.logs."""
    from pipeline.ingest import ingest_logs as load
    from pipeline.sources import read_options

    options = read_options(fmt=fmt, table=table, columns=columns,
                           start=instant(start, "--start"), end=instant(end, "--end"))
    with connect(warehouse) as con:
        return load(con, paths, max_record_bytes=record_limit(max_record_bytes),
                    progress=progress, options=options)


def ingest_gold(warehouse: Warehouse, path: str, version: str,
                index_version: str | None = None):
    """Load one gold-set version in one transaction. A version is immutable: the same content
    again is a no-op (idempotent), other content under a loaded version is an error.
    `index_version`: the index whose chunk IDs the gold set names (compared by content on the
    others). See pipeline.ingest.gold."""
    from pipeline.ingest import ingest_gold as load
    from pipeline.rebuild import carry_again

    with connect(warehouse) as con:
        result = load(con, path, version, index_version)
        if not result.skipped:   # its gold chunks are carried to each rebuilt index
            carry_again(con)
        return result


def has_manifest(warehouse: Warehouse, index_version: str) -> bool:
    """Whether the chunk manifest of `index_version` is loaded."""
    with connect(warehouse) as con:
        return bool(con.execute("SELECT 1 FROM index_chunks WHERE index_version = $v LIMIT 1",
                                {"v": index_version}).fetchall())


def ingest_index(warehouse: Warehouse, path: str, version: str):
    """Replace the chunk manifest of one index version in one transaction (loading the same
    file again changes nothing). See pipeline.ingest.index."""
    from pipeline.ingest import ingest_index as load
    from pipeline.rebuild import carry_again

    with connect(warehouse) as con:
        result = load(con, path, version)
        if not result.skipped:   # a rebuilt index's carried gold IDs follow the new content
            carry_again(con)
        return result


def configure(warehouse: Warehouse, *, cutoffs: tuple[int, ...] | None = None,
              pass_mark: float | None = None, grains: tuple[str, ...] | None = None,
              **drift_settings) -> settings.Config:
    """Put the given settings in force (the others stay) and return the configuration now in
    force. Days built with other settings become stale; the next `run` rebuilds them. Drift
    and alert settings (drift_mode=, drift_margin=, detectable_drop=, baselines={slice: spec},
    alert_k=, alert_metrics=) are put in force the same way. See pipeline.config."""
    with connect(warehouse, must_exist=True) as con:
        given = {k: v for k, v in drift_settings.items() if v is not None}
        config = settings.resolve(con, cutoffs=cutoffs, pass_mark=pass_mark, grains=grains,
                                  **given)
        if cutoffs is not None or pass_mark is not None or grains is not None or given:
            settings.put_in_force(con, config)
            from pipeline.state import retire

            retire(con, config)   # rows of a route or grain taken out of force go
        return config


def drift(warehouse: Warehouse, start: When = None, end: When = None, *,
          progress: Progress | None = None):
    """Judge drift for the windows in [start, end) (all when not given) with the settings in
    force and write drift_events; see pipeline.drift."""
    from pipeline.drift import drift as judge_drift

    with connect(warehouse, must_exist=True) as con:
        return judge_drift(con, start=instant(start, "--start"), end=instant(end, "--end"),
                           progress=progress)


def slices(warehouse: Warehouse) -> list[str]:
    """The slices window_metrics holds, sorted."""
    with connect(warehouse, must_exist=True) as con:
        return _slices(con)


def served_alone(warehouse: Warehouse) -> set[tuple[str, str]]:
    """(slice, index version) of every window_metrics window one index version served alone:
    the windows an `index:VERSION` baseline pools."""
    with connect(warehouse, must_exist=True) as con:
        return set(con.execute("SELECT DISTINCT slice, index_versions[1] FROM window_metrics "
                               "WHERE len(index_versions) = 1").fetchall())


def _slices(con) -> list[str]:
    return [row[0] for row in con.execute(
        "SELECT DISTINCT slice FROM window_metrics ORDER BY slice").fetchall()]


def rebaseline(warehouse: Warehouse, slice_: str, since: When) -> settings.Config:
    """From the day `since` on, the baseline of `slice_` ('*' for every slice without one of
    its own) restarts: the first windows on or after it, as many as its baseline takes (7 by
    default). Open episodes of the slice end there. Days the slice was re-baselined on before
    stay (each holds until the next), so an earlier acceptance is never undone. Put in force;
    the next `drift` or `run` re-judges."""
    from pipeline.alerts import printable

    day = instant(since, "--from")
    with connect(warehouse, must_exist=True) as con:
        known = _slices(con)
        if slice_ != "*" and slice_ not in known:
            # logged tag values: a line break or a terminal escape would split the sentence
            shown = ", ".join(map(printable, known[:10])) + (", ..." if len(known) > 10 else "")
            raise RecallwatchError(
                f"no slice {slice_!r} in window_metrics"
                + (f" (its slices: {shown}, or '*' for all)" if known else
                   " (it has none yet: run `recallwatch run` first)") + ".")
        current = settings.in_force(con).baseline_for(slice_)
        windows = current.windows if current.kind in ("first", "trailing") else 7
        restarts = current.restarts if current.kind == "first" else ()
        restarted = settings.Baseline("first", windows,
                                      restarts=tuple(sorted({*restarts, day.date()})))
        config = settings.resolve(con, baselines={slice_: restarted.text})
        settings.put_in_force(con, config)
        return config


def score(warehouse: Warehouse, start: When = None, end: When = None, *,
          cutoffs: tuple[int, ...] | None = None, pass_mark: float | None = None,
          gold_version: str | None = None, routes: tuple[str, ...] | None = None,
          keep: bool = False, progress: Progress | None = None):
    """Score the requests of [start, end) (every day with data when not given) on every route
    in force, replacing the windows' request_scores, request_cutoffs and miss_causes (and voiding
    the window metrics built on them); idempotent. Given cutoffs are for this call only, unless
    `keep`: then the cutoffs and pass mark given are put in force (once they, the window and
    the gold set are checked), as `recallwatch score --cutoffs` does. Returns a
    ScoreSummary. `routes` picks among the routes in force (another is refused: nothing would
    keep its rows current). See pipeline.score.score."""
    from pipeline.score import score as score_windows
    from pipeline.state import check_window

    start, end = instant(start, "start"), instant(end, "end")
    with connect(warehouse, must_exist=True) as con:
        config = settings.resolve(con, cutoffs=cutoffs, pass_mark=pass_mark,
                                  gold_version=gold_version, routes=routes)
        current = settings.resolve(con)
        in_force = current.routes
        if outside := [r for r in config.routes if r not in in_force]:
            # its rows would be kept current by nothing: no run rescores or retires a route
            # out of force, and aggregate and drift would spread them
            raise RecallwatchError(
                f"route {outside[0]} is not in force (routes in force: {', '.join(in_force)}); "
                f"put it in force first: recallwatch config --routes "
                f"{','.join([*in_force, *outside])}.")
        check_window(start, end)
        settings.require_gold(config)
        if keep and (cutoffs is not None or pass_mark is not None):
            # the cutoffs and pass mark alone: `routes` picks among those in force for this
            # call (the CLI's drops claims without a judge), it takes none out of force
            settings.put_in_force(con, replace(current, cutoffs=config.cutoffs,
                                               pass_mark=config.pass_mark))
        return score_windows(con, config, start=start, end=end, progress=progress)


def aggregate(warehouse: Warehouse, start: When = None, end: When = None, *,
              grain: str = "day", pass_mark: float | None = None, keep: bool = False,
              progress: Progress | None = None):
    """Recompute window_metrics of `grain` for [start, end) widened to whole windows, replacing
    those windows' rows in one transaction; idempotent. With `keep`, a given pass mark is put
    in force and `grain` joins the grains `run` keeps current (once they and the window are
    checked), as `recallwatch aggregate` does. Returns an AggregateSummary. See
    pipeline.aggregate.aggregate."""
    from pipeline.aggregate import aggregate as aggregate_windows
    from pipeline.state import check_window

    start, end = instant(start, "start"), instant(end, "end")
    with connect(warehouse, must_exist=True) as con:
        config = settings.resolve(con, pass_mark=pass_mark)
        check_window(start, end)
        keeps = False
        if keep:
            grains = config.grains if grain in config.grains else (*config.grains, grain)
            config = settings.check(replace(config, grains=grains))
            keeps = pass_mark is not None or grains != settings.in_force(con).grains
        summary = aggregate_windows(con, config, grain=grain, start=start, end=end,
                                    progress=progress)
        # once aggregated: a refused day (scored only in part) puts nothing in force
        if keeps:
            settings.put_in_force(con, config)
        return summary


def report(warehouse: Warehouse, out_dir: str | os.PathLike, *, k: int | None = None,
           gold_version: str | None = None, route: str | None = None) -> Path:
    """Write (replace) out_dir/report.html from the warehouse, opened read-only; returns its
    path. See pipeline.report.write_report."""
    from pipeline.report import write_report
    from pipeline.routes import known_routes

    if route is not None and route not in known_routes():
        raise RecallwatchError(f"--route {route!r} is not a route; known: "
                               f"{', '.join(known_routes())}.")
    if not str(out_dir).strip():
        raise RecallwatchError("--out must name the report's directory, e.g. reports/latest.")

    with connect(warehouse, read_only=True) as con:
        return write_report(con, Path(out_dir), route=route, k=k, gold_version=gold_version)


def metrics(warehouse: Warehouse, *, fmt: str = "prometheus", grain: str = "day",
            gold_version: str | None = None, out: str | os.PathLike | None = None):
    """The latest window of every slice x route x k of `grain` (and gold version, default the
    newest loaded) in the Prometheus text exposition format `fmt` (prometheus or openmetrics),
    read from the warehouse opened read-only; written atomically to `out` when given. Returns
    the LatestWindows and the exposition bytes. See pipeline.metrics."""
    from pipeline.metrics import exposition, latest_windows, write_atomically

    with connect(warehouse, read_only=True) as con:
        latest = latest_windows(con, grain=grain, gold_version=gold_version)
    text = exposition(latest, fmt)
    if out is not None:
        write_atomically(out, text)
    return latest, text


def run(warehouse: Warehouse, *, logs: list[str] | None = None, gold: str | None = None,
        gold_version: str | None = None, gold_index_version: str | None = None,
        index: list[tuple[str, str]] | None = None,
        cutoffs: tuple[int, ...] | None = None, pass_mark: float | None = None,
        report_dir: str | os.PathLike | None = None, progress: Progress | None = None,
        alert_channels: list | None = None, now: datetime | None = None,
        start: When = None, end: When = None, fmt: str | None = None,
        table: str | None = None, columns: str | None = None,
        max_record_bytes: int | None = None):
    """Catch up: ingest, rescore exactly the stale days, re-aggregate the stale windows, judge
    drift, write the report and send the alerts due on `alert_channels` (see
    pipeline.run.run); a second run over the same inputs changes nothing. `start`, `end`,
    `fmt`, `table`, `columns` and `max_record_bytes` say how to read `logs`, as for
    ingest_logs. Returns a RunSummary."""
    from pipeline.run import run as catch_up
    from pipeline.sources import read_options

    options = read_options(fmt=fmt, table=table, columns=columns,
                           start=instant(start, "--start"), end=instant(end, "--end"))
    with connect(warehouse) as con:
        return catch_up(con, logs=logs, gold=gold, gold_version=gold_version,
                        gold_index_version=gold_index_version, index=index,
                        cutoffs=cutoffs, pass_mark=pass_mark,
                        report_dir=Path(report_dir) if report_dir is not None else None,
                        progress=progress, alert_channels=alert_channels, now=now,
                        read=options, max_record_bytes=record_limit(max_record_bytes))


# ------------------------------------------------------------- scheduled runs (one interval)

def catch_up(warehouse: Warehouse, *, progress: Progress | None = None) -> dict:
    """What `run` does after ingesting, for the whole warehouse: carry the gold IDs again (late
    logs can change which index served before a rebuild; a manifest or gold set loaded since
    changes what was carried), re-score every stale day, re-aggregate every stale window and
    judge drift when drift_events lags the metrics (from wherever they lag: a retried call
    finds what an interrupted one left). The scheduled DAG calls it after its interval's steps.
    Returns the ISO days scored and aggregated and the drift episodes opened (None: drift
    was current). See pipeline.run.catch_up."""
    from pipeline.run import catch_up as bring_up_to_date

    with connect(warehouse, must_exist=True) as con:
        config = settings.resolve(con)
        if con.execute("SELECT 1 FROM requests LIMIT 1").fetchall():
            settings.require_gold(config)
        scored, aggregated, judged = bring_up_to_date(con, config, progress=progress)
    return {"scored": sorted({day.date().isoformat() for day in scored}),
            "aggregated": sorted({day.date().isoformat() for day in aggregated}),
            "opened": judged.opened if judged is not None else None}


def days_ended(start: When, end: When) -> dict[str, str] | None:
    """The whole UTC days that ended within a scheduled run's interval (start, end]: [the
    day of start, the day of end) as ISO date-times, or None when no day ended in it. Windows
    and log partitions are UTC days, so a schedule that does not fall at midnight (`0 6 * * *`:
    [06:00, 06:00 the next day)) does the day that ended in its interval, whole and once, and
    an hourly one does each day in the run whose interval holds its midnight."""
    first, last = instant(start, "the interval's start"), instant(end, "the interval's end")
    if first is None or last is None:
        raise RecallwatchError("this run has no data interval: trigger it with params start "
                               "and end (ISO dates).")
    first, last = (datetime.combine(t.date(), datetime.min.time()) for t in (first, last))
    return {"start": first.isoformat(), "end": last.isoformat()} if last > first else None


def logs_for_interval(source: str | os.PathLike, start: When, end: When) -> list[str]:
    """The log files of the UTC days that [start, end) touches, under `source`: a directory
    laid out in hive partitions (its `dt=YYYY-MM-DD/` folders of those days), or a path
    template with `{date}` (each day's ISO date, e.g. `/logs/{date}/*.jsonl`; globs allowed).
    An s3:// or postgresql:// source is returned as it is: given the interval, it reads only
    that interval's partitions or rows (pipeline/sources).
    Only what holds log files is returned, in day order (a day folder with nothing to read in
    it is not); a day without logs is no error (an empty day is still a day whose windows are
    rebuilt)."""
    from glob import glob

    from pipeline.ingest.files import LOG_SUFFIXES, holds_files
    from pipeline.sources import scheme
    from pipeline.state import days_of

    first, last = instant(start, "--start"), instant(end, "--end")
    if first is None or last is None or last <= first:
        raise RecallwatchError(f"the interval [{start}, {end}) is empty or open-ended.")
    text = os.fspath(source)
    if scheme(text):   # s3://, postgresql://: the source itself reads only the interval
        return [text]
    if "{date}" not in text and not Path(text).is_dir():
        raise RecallwatchError(f"log source {text} is not a directory; give a directory of "
                               "dt=YYYY-MM-DD/ partitions or a path template with {date}.")
    found: list[str] = []
    for day in days_of(first, last):
        iso = day.date().isoformat()
        pattern = (text.replace("{date}", iso) if "{date}" in text
                   else os.path.join(text, f"dt={iso}"))
        found.extend(p for p in sorted(glob(pattern)) if holds_files(p, LOG_SUFFIXES))
    return found


def check_logs(warehouse: Warehouse, paths: list[str], start: When, end: When, *,
               fmt: str | None = None, table: str | None = None,
               columns: str | None = None, max_record_bytes: int | None = None) -> dict:
    """The data-quality gate of one interval (pipeline.quality): validate the interval's log
    files before anything is loaded, record the results in `quality_checks`, and raise
    QualityGateFailed (a RecallwatchError with a one-line reason) on a blocking failure.
    Returns the checks as plain values."""
    from pipeline import quality
    from pipeline.ingest.logs import kept_record_limits
    from pipeline.sources import read_options

    first, last = instant(start, "--start"), instant(end, "--end")
    options = read_options(fmt=fmt, table=table, columns=columns, start=first, end=last)
    limit = record_limit(max_record_bytes)
    kept = None
    if limit is None:   # a file read before keeps its limit, in the gate as in ingest
        with connect(warehouse) as con:
            kept = kept_record_limits(con)
    result = quality.validate_files(paths, first, last, options=options,
                                    max_record_bytes=limit, kept_limits=kept)
    with connect(warehouse) as con:
        quality.record(con, result)
    quality.gate(result)
    return result.as_dict()


def rebuild(warehouse: Warehouse, index_version: str, manifest: str, live_from: When, *,
            now: When = None) -> dict:
    """An index rebuild went live: load its manifest, carry the gold chunk IDs to it by content
    hash (pipeline.rebuild), re-score the days from `live_from` on and everything built on
    them. Returns what was carried, lost and re-scored as plain values. `now` (default: the
    current time, UTC) tells a `live_from` in the future."""
    from pipeline import rebuild as rebuilding

    stamp = instant(now, "now") or datetime.now(UTC).replace(tzinfo=None)
    with connect(warehouse, must_exist=True) as con:   # a mistyped path is no new warehouse
        return rebuilding.rebuild(con, index_version, manifest,
                                  instant(live_from, "--live-from"), now=stamp).as_dict()


def alert(warehouse: Warehouse, *, report: str | None = None, now: When = None,
          channels_file: str | None = None, dry_run: bool = False) -> dict:
    """Send the alerts due on the channels of the environment (or `channels_file`); see
    pipeline.alerts. `now` stamps the deliveries (default: the current time, UTC). Returns the
    counts; raises RecallwatchError when any message could not be delivered (as `recallwatch
    alert` exits 2), after recording it to be retried, so that a scheduled task fails, is
    retried and is seen."""
    from pipeline.alerts import channels_from_env, channels_from_file, send_alerts

    channels = channels_from_file(channels_file) if channels_file else channels_from_env()
    stamp = instant(now, "now") or datetime.now(UTC).replace(tzinfo=None)
    with connect(warehouse, must_exist=True) as con:
        summary = send_alerts(con, settings.in_force(con), channels, report=report,
                              dry_run=dry_run, now=stamp)
    if summary.failed:
        failed = sorted({d.channel for d in summary.deliveries if d.status == "failed"})
        reasons = sorted({d.error for d in summary.deliveries if d.error})
        raise RecallwatchError(
            f"{summary.failed} alert(s) could not be delivered on {', '.join(failed)} "
            f"({'; '.join(reasons)}); {summary.sent} sent. They are kept, and the next alert "
            "retries them.")
    return {"sent": summary.sent, "failed": summary.failed, "skipped": summary.skipped,
            "past": summary.past,
            "channels": [c.name for c in channels]}


def quality_warnings(warehouse: Warehouse, start: When, end: When, *,
                     paths: list[str] | None = None, fmt: str | None = None,
                     table: str | None = None, columns: str | None = None) -> dict:
    """The data-quality warnings of one interval after its logs are ingested and scored
    (pipeline.quality.check_loaded): the share of its requests matched to a golden and the
    share of its files' records quarantined, recorded in `quality_checks` beside the file
    checks. `paths`: the interval's log files, as ingest was given them (default: the files
    the warehouse ties to the interval), read as `fmt`, `table` and `columns` say (else the
    environment's RECALLWATCH_LOG_*, as ingest_logs reads them). Never raises on a warning;
    returns the checks as plain values."""
    from pipeline import quality
    from pipeline.sources import read_options

    first, last = instant(start, "--start"), instant(end, "--end")
    options = read_options(fmt=fmt, table=table, columns=columns, start=first, end=last)
    with connect(warehouse, must_exist=True) as con:
        result = quality.check_loaded(con, first, last, paths=paths, options=options)
        quality.record(con, result)
    return result.as_dict()
