"""The `recallwatch` command: thin shells over the pipeline functions, one per step.

Each command opens the warehouse (--warehouse, else RECALLWATCH_WAREHOUSE, else
./warehouse/recallwatch.duckdb), calls one pipeline function and prints what it did. Errors a
user can fix end in one sentence on stderr and exit code 2; progress goes to stderr on a
terminal."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import traceback
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path


def _interrupted_while_starting(signum, frame):
    print("recallwatch: interrupted", file=sys.stderr)
    raise SystemExit(130)


# The imports below take a second or two (pipeline.config reaches pyarrow and the routes): a
# Ctrl-C then ends the command as one anywhere later does, in one line and 130, not a
# traceback of whatever module was importing. Only while importing, so a program that imports
# this module keeps its own Ctrl-C; main() takes over from there.
_STARTING = (threading.current_thread() is threading.main_thread()
             and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
if _STARTING:
    signal.signal(signal.SIGINT, _interrupted_while_starting)
try:
    from pipeline.config import DEFAULT_CUTOFFS, DEFAULT_PASS_MARK
    from pipeline.errors import RecallwatchError
    from pipeline.ingest.files import DEFAULT_MAX_RECORD_BYTES
finally:
    if _STARTING:
        signal.signal(signal.SIGINT, signal.default_int_handler)

DEFAULT_CUTOFFS_TEXT = ",".join(map(str, DEFAULT_CUTOFFS))


# ---------------------------------------------------------------------------------- helpers

def _when(text: str) -> datetime:
    """An ISO date or date-time; naive means UTC. Returned as naive UTC."""
    from pipeline.api import instant

    try:
        return instant(text, "date")
    except RecallwatchError as exc:
        raise argparse.ArgumentTypeError(str(exc).rstrip(".")) from None


def _whole(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{text} must be a whole number of at least {least}")
    return value


def _positive(text: str) -> int:
    return _whole(text, 1)


def _seed(text: str) -> int:
    """A random seed: numpy's generator takes none below 0."""
    return _whole(text, 0)


def _alert_k(text: str) -> int:
    from pipeline.config import AUTO_ALERT_K

    return AUTO_ALERT_K if text.strip().lower() == "auto" else _positive(text)


def _unit(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number in [0, 1]") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not in [0, 1]")
    return value


def _cutoffs(text: str | None) -> tuple[int, ...] | None:
    from pipeline.config import parse_cutoffs

    return parse_cutoffs(text) if text is not None else None


@contextmanager
def _progress():
    """A progress callback: a bar on stderr when it is a terminal, silence otherwise."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(),
                  transient=True, console=_console(stderr=True)) as bar:
        task = bar.add_task("", total=None)

        def update(description: str, done: int, total: int) -> None:
            bar.update(task, description=description, completed=done, total=total)

        yield update


def _console(stderr: bool = False):
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich would exit 1; the reader went away: main() stops quietly with 141, as
            # for a plain print
            raise BrokenPipeError

    stream = sys.stderr if stderr else sys.stdout
    # a pipe or a log file gets a fixed width, so tables are not squeezed to 80 columns
    return _Console(stderr=stderr, highlight=False,
                    width=None if stream.isatty() else 110)


def printable(text: str) -> str:
    """A file name or version as the terminal should show it (pipeline.alerts.printable)."""
    from pipeline.alerts import printable as shown

    return shown(text)


def _file_state(result) -> str:
    if result.skipped:
        return "unchanged, skipped"
    return f"read {result.read}, loaded {result.loaded}, quarantined {result.quarantined}"


def _print_ingest(summary, *, every_file: bool = True) -> None:
    """One line per file (or, for long lists, only the files with quarantined records), then
    the totals."""
    skipped = [f for f in summary.files if f.skipped]
    for f in summary.files:
        if every_file or (f.quarantined and not f.skipped):
            print(f"{printable(f.source)}: {_file_state(f)}")
    print(f"{len(summary.files) - len(skipped)} file(s) ingested, {len(skipped)} unchanged: "
          f"read {summary.read}, loaded {summary.loaded}, quarantined {summary.quarantined}")


# ---------------------------------------------------------------------------------- commands

def cmd_ingest_logs(args) -> None:
    from pipeline import api

    with _progress() as progress:
        summary = api.ingest_logs(args.warehouse, args.paths,
                                  max_record_bytes=args.max_record_bytes, progress=progress,
                                  start=args.start, end=args.end, **_source_options(args))
    _print_ingest(summary)


def cmd_ingest_gold(args) -> None:
    from pipeline import api

    result = api.ingest_gold(args.warehouse, args.path, args.version, args.index_version)
    named = ""
    if args.index_version is not None:
        named = f"; names the chunks of index {printable(args.index_version)}"
        if not api.has_manifest(args.warehouse, args.index_version):
            named += (" (its manifest is not loaded: the IDs are compared as they are until "
                      f"`recallwatch ingest index PATH --version {args.index_version}`)")
    print(f"gold {printable(args.version)} from {printable(result.source)}: "
          f"{_file_state(result)}{named}")


def cmd_ingest_index(args) -> None:
    from pipeline import api

    result = api.ingest_index(args.warehouse, args.path, args.version)
    print(f"index {printable(args.version)} from {printable(result.source)}: "
          f"{_file_state(result)}")


def _listed(text: str | None, flag: str) -> tuple[str, ...] | None:
    """A comma-separated option's names (None: not given); given empty, one clear error, not
    a setting left as it was in silence."""
    if text is None:
        return None
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise RecallwatchError(f"{flag} {text!r} names nothing between its commas; give names "
                               "separated by commas.")
    return names


def cmd_config(args) -> None:
    from pipeline import api

    baselines = None
    if args.baseline:
        baselines = {}
        for item in args.baseline:
            name, sep, spec = item.rpartition("=")
            if not sep or not name:
                raise RecallwatchError(
                    f"--baseline {item!r} must be SLICE=SPEC, e.g. '*=first:7' or "
                    "'all=trailing:14'.")
            baselines[name] = spec
    config = api.configure(args.warehouse, cutoffs=_cutoffs(args.cutoffs),
                           pass_mark=args.pass_mark,
                           grains=_listed(args.grains, "--grains"),
                           routes=_listed(args.routes, "--routes"),
                           drift_mode=args.drift_mode, drift_margin=args.margin,
                           detectable_drop=args.detectable_drop, baselines=baselines,
                           alert_k=args.alert_k,
                           alert_metrics=_listed(args.alert_metrics, "--alert-metrics"))
    # a slice may appear later (a new tag value): its baseline is kept, but a mistyped name
    # would never take effect, so say so
    known = set(api.slices(args.warehouse)) if baselines else set()
    for name in sorted(set(baselines or ()) - known - {"*"}):
        print(f"note: no slice {printable(name)!r} in window_metrics yet; its baseline applies "
              "once it has windows (slices: all, index_version=<v>, <tag>=<value>).",
              file=sys.stderr)
    # a baseline pinned to an index pools the slice's windows that index served alone: with
    # none (a version not served yet, or only beside another, as in a canary) every window of
    # the slice stays `baseline` and no drop can open there until that index serves one alone
    pinned = {name: b.version for name, b in config.baselines
              if name in (baselines or {}) and b.kind == "index"}
    alone = api.served_alone(args.warehouse) if pinned else set()
    for name, version in sorted(pinned.items()):
        if not any(v == version and name in ("*", s) for s, v in alone):
            who = "every slice" if name == "*" else f"slice {printable(name)!r}"
            print(f"note: no window of {who} was served by index version "
                  f"{printable(version)!r} alone yet; until one is, {who} has no baseline to "
                  "compare with and no drop or rise is judged there.", file=sys.stderr)
    gold = f"{config.gold_version} (the newest loaded)" if config.gold_version else "none loaded"
    print(f"cutoffs {config.cutoffs_text}\npass mark {config.pass_mark}\n"
          f"grains {','.join(config.grains)}\nroutes {','.join(config.routes)}\n"
          f"gold version {gold}\ndrift mode {config.drift_mode}\n"
          f"drift margin {config.drift_margin}\ndetectable drop {config.detectable_drop}\n"
          f"baselines {', '.join(f'{n}={b.text}' for n, b in config.baselines)}\n"
          f"alerts {','.join(config.alert_metrics)} at k={config.alert_cutoff}")


def _use_judge(args, routes: tuple[str, ...], *, skip: bool = True) -> tuple[str, ...]:
    """Register the claims route with the judge of the environment and the --judge-model,
    --lang, --max-calls and --max-tokens options. When none is configured: with `skip`, returns
    `routes` without claims after one line saying how to configure a judge; without it (`run`,
    which scores the routes in force), the route says that line itself and leaves the
    window's requests `not_judged`."""
    from pipeline.routes import register
    from pipeline.routes.claims import NO_JUDGE, ClaimsRoute, configured_judge

    if "claims" not in routes:
        return routes
    judge = configured_judge(model=args.judge_model, lang=args.lang, max_calls=args.max_calls,
                             max_tokens=args.max_tokens)
    if judge is None and not skip:
        register(ClaimsRoute(report=print))
    elif judge is None:
        print(NO_JUDGE)
        return tuple(r for r in routes if r != "claims")
    else:
        register(ClaimsRoute(judge=judge, report=print))
    return routes


def _judge_estimate(args) -> None:
    """`score --dry-run`: what the claims route's judge would cost; nothing is judged or scored."""
    from pipeline import api
    from pipeline.config import require_gold, resolve
    from pipeline.routes.claims import configured_judge, estimate_score
    from pipeline.state import check_window
    from pipeline.warehouse import connect

    start, end = api.instant(args.start, "--start"), api.instant(args.end, "--end")
    check_window(start, end)   # as `score` does: an empty window is one error, not 0 calls
    judge = configured_judge(model=args.judge_model, lang=args.lang, max_calls=args.max_calls,
                             max_tokens=args.max_tokens)
    with connect(args.warehouse, must_exist=True) as con:
        config = resolve(con, gold_version=args.gold_version)
        if "claims" not in config.routes:
            print("the claims route is not in force (`recallwatch config --routes "
                  f"{','.join(config.routes)},claims` puts it in force): `score` makes no "
                  "judge call; nothing was judged or scored.")
            return
        if judge is None:
            from pipeline.routes.claims import NO_JUDGE

            print(NO_JUDGE)
            return
        gold_version = require_gold(config)
        tally = estimate_score(con, judge, gold_version, start, end)
    print(f"dry run (model {judge.model}, lang {judge.lang}): {tally.line()}; nothing was "
          "judged or scored.")


def cmd_score(args) -> None:
    from pipeline import api

    if args.dry_run:
        return _judge_estimate(args)
    routes = _use_judge(args, api.configure(args.warehouse).routes)
    if not routes:
        return
    with _progress() as progress:
        summary = api.score(args.warehouse, args.start, args.end, cutoffs=_cutoffs(args.cutoffs),
                            pass_mark=args.pass_mark, gold_version=args.gold_version,
                            routes=routes, keep=True, progress=progress)
    if not summary.windows:
        print("nothing to score: no requests in the warehouse for that window.")
        return
    for route in summary.routes:
        statuses = ", ".join(f"{k} {v}" for k, v in summary.by_status[route].items())
        print(f"scored {len(summary.windows)} day window(s) "
              f"{_span(summary.windows[0][0], summary.windows[-1][1])} "
              f"against gold {summary.gold_version} (route {route}, cutoffs "
              f"{','.join(map(str, summary.cutoffs))}): {statuses or 'no requests'}")
    joined = summary.joined
    total = sum(joined.values())
    if total:
        matched = joined["by_gold_id"] + joined["by_query"]
        print(f"matched a golden: {matched} of {total} ({matched / total:.1%}): "
              f"{joined['by_gold_id']} by gold_id, {joined['by_query']} by normalized query; "
              f"{joined['unmatched']} matched none")


def cmd_claims(args) -> None:
    from pipeline.claims import export_claims, import_claims
    from pipeline.config import require_gold, resolve
    from pipeline.warehouse import connect

    with connect(args.warehouse, must_exist=True) as con:
        gold_version = require_gold(resolve(con, gold_version=args.gold_version))
        if args.action == "export":
            n = export_claims(con, args.file, gold_version)
            print(f"wrote the claims of {n} golden(s) of gold set {printable(gold_version)} to "
                  f"{printable(args.file)}")
        else:
            n = import_claims(con, args.file, gold_version)
            print(f"replaced the claims of {n} golden(s) of gold set "
                  f"{printable(gold_version)}; run `recallwatch score` over the days they "
                  "were scored on to use them")


def _span(start: datetime, end: datetime) -> str:
    """start..end (end excluded) as days, or to the minute when one is not a midnight."""
    whole = all(t.hour == t.minute == t.second == t.microsecond == 0 for t in (start, end))
    shown = "%Y-%m-%d" if whole else "%Y-%m-%d %H:%M"
    return f"{start.strftime(shown)}..{end.strftime(shown)}"


def cmd_aggregate(args) -> None:
    from pipeline import api

    with _progress() as progress:
        summary = api.aggregate(args.warehouse, args.start, args.end, grain=args.window,
                                pass_mark=args.pass_mark, keep=True, progress=progress)
    if summary.start is None:
        print("nothing to aggregate: no requests in the warehouse"
              + (" for that window." if args.start or args.end else "."))
        return
    print(f"window_metrics: {summary.rows} rows by {summary.grain} "
          f"for {summary.start:%Y-%m-%d %H:%M}..{summary.end:%Y-%m-%d %H:%M}"
          + ("" if summary.rows else " (nothing is scored there yet: run `recallwatch score` "
             "first, or `recallwatch run`)"))


def cmd_drift(args) -> None:
    from pipeline import api

    if args.action is None and (args.slice is not None or args.since is not None):
        # without the action the baseline would stay as it was, and drift say nothing of it
        raise RecallwatchError("--slice and --from apply to `recallwatch drift rebaseline`; give "
                               "it (recallwatch drift rebaseline --slice S --from DAY) or leave "
                               "them out.")
    if args.action == "rebaseline":
        if args.start is not None or args.end is not None:
            raise RecallwatchError("--start and --end apply to `recallwatch drift`, not to "
                                   "`recallwatch drift rebaseline`; run `recallwatch drift "
                                   "--start D --end D` after it.")
        if not args.slice or not args.since:
            raise RecallwatchError("drift rebaseline needs --slice S and --from DAY.")
        config = api.rebaseline(args.warehouse, args.slice, args.since)
        print(f"baseline of slice {printable(args.slice)} now "
              f"{config.baseline_for(args.slice).text}; "
              "run `recallwatch drift` (or `run`) to re-judge.")
        return
    with _progress() as progress:
        summary = api.drift(args.warehouse, args.start, args.end, progress=progress)
    if not summary.rows and summary.judged:
        print(f"nothing to judge: none of the {summary.judged} window(s) with metrics starts "
              "in the range given (a window starts at its day or hour; widen --start/--end).")
        return
    if not summary.rows:
        print("nothing to judge: no window metrics yet (run `recallwatch run`, or `score` "
              "then `aggregate`, first).")
        return
    print(f"drift_events: {summary.rows} rows, {summary.opened} episode(s) opened in all, "
          f"{summary.resolved} resolved{'' if summary.changed else ' (unchanged)'}")


def cmd_rebuild(args) -> None:
    from pipeline import api

    result = api.rebuild(args.warehouse, args.version, args.manifest, args.live_from)
    if result["live_again"]:
        print(f"index {printable(result['index_version'])} went live first at "
              f"{result['live_from']} and again at {result['live_again']}: its gold chunks "
              "stay carried from its first go-live")
    print(f"index {printable(result['index_version'])} live from {result['live_from']}; "
          f"manifest {printable(result['manifest']['source'])}: "
          + ("unchanged, skipped" if result["manifest"]["skipped"] else
             f"loaded {result['manifest']['loaded']}, "
             f"quarantined {result['manifest']['quarantined']}"))
    by_gold = result["carried_by_gold"]
    if len(by_gold) > 1:   # each gold set's own chunks: summed they would count some twice
        for gold_version, counts in by_gold.items():
            print(f"gold chunks carried, gold set {printable(gold_version)}: "
                  + ", ".join(f"{how} {n}" for how, n in counts.items()))
    else:
        print("gold chunks carried: " + ", ".join(f"{how} {n}"
                                                  for how, n in result["carried"].items()))
    for row in result["not_carried"][:20]:
        print(f"  {row['how']}: chunk {printable(row['chunk_id'])} of golden "
              f"{printable(row['gold_id'])} (gold set {printable(row['gold_version'])})")
    if len(result["not_carried"]) > 20:
        print(f"  ... {len(result['not_carried']) - 20} more (table carried_gold_ids)")
    for named in result["named"]:
        print(f"gold set {printable(named['gold_version'])} names the chunks of index "
              f"{printable(named['index_version'])}: not carried, compared by content on the "
              "other indexes")
    if result["serving_instead"]:
        print(f"no request served by index {printable(result['index_version'])} is loaded; "
              f"from {result['live_from']} the requests loaded were served by "
              + ", ".join(printable(v) for v in result["serving_instead"])
              + " (is --version right?)")
    if result["in_future"]:
        print(f"--live-from {result['live_from']} lies in the future (is it right?): the report "
              "compares the days before and after it")
    if result["served_before"]:
        first, last = result["served_before"]
        print(f"no request of index {printable(result['index_version'])} is loaded from "
              f"{result['live_from']} on: the requests loaded of it were served {first}..{last}"
              " (is --live-from right?)")
    if result["replaced"]:
        first, last = result["replaced"]["served"]
        print(f"index {printable(result['index_version'])} was loaded before from "
              f"{printable(result['replaced']['source'])} and served requests {first}..{last}, "
              f"before --live-from {result['live_from']}: that manifest is replaced, so gold "
              "chunks cannot be carried from it (log each rebuilt index under a version of "
              "its own)")
    if not result["gold_loaded"]:
        print("no gold set is loaded yet: the rebuild is recorded, and its gold chunks are "
              "carried when one is (`recallwatch ingest gold PATH --version V`)")
    days = result["days_rescored"]
    print(f"re-scored {len(days)} day window(s)"
          + (f" {days[0]}..{days[-1]}" if days else "")
          + f", aggregated {len(result['days_aggregated'])} day(s)")


def cmd_report(args) -> None:
    from pipeline import api

    path = api.report(args.warehouse, args.out, k=args.k, gold_version=args.gold_version,
                      route=args.route)
    print(f"report: {path.resolve()}")


def cmd_metrics(args) -> None:
    from pipeline import api

    latest, text = api.metrics(args.warehouse, fmt=args.format, grain=args.grain,
                               gold_version=args.gold_version, out=args.out)
    if args.out is None:
        sys.stdout.flush()
        # a reader that leaves mid-write makes write() return short without an error: write
        # the rest, which raises BrokenPipeError (exit 141) instead of ending with 0
        view = memoryview(text)
        while view:
            view = view[sys.stdout.buffer.write(view):]
        sys.stdout.buffer.flush()
        return
    print(f"metrics: {len(latest.rows)} slice/route/k series by {latest.grain} (gold "
          f"{printable(latest.gold_version)}) written to {printable(args.out)}")


def cmd_export(args) -> None:
    from pipeline.export import export_table
    from pipeline.warehouse import connect

    with connect(args.warehouse, read_only=True) as con:
        n = export_table(con, args.table, args.file)
    print(f"{args.table}: {n} rows written to {printable(args.file)}")


def cmd_alert(args) -> None:
    from datetime import UTC

    from pipeline.alerts import (
        NO_CHANNELS,
        channels_from_env,
        channels_from_file,
        one_line,
        send_alerts,
        send_test,
        verbatim_line,
    )
    from pipeline.config import resolve
    from pipeline.warehouse import connect

    if args.channels is not None and not args.channels.strip():
        # taken for no --channels, it sent on the environment's channels instead
        raise RecallwatchError("--channels is empty: give the TOML file of the channels, or "
                               "leave --channels out to use the environment's.")
    channels = channels_from_file(args.channels) if args.channels else channels_from_env()
    now = datetime.now(UTC).replace(tzinfo=None)
    if args.action == "test":
        if args.dry_run or args.report:
            raise RecallwatchError("--dry-run and --report apply to `recallwatch alert`, not to "
                                   "`recallwatch alert test`.")
        if not channels:
            raise RecallwatchError(NO_CHANNELS)
        results = send_test(channels, now=now)
        for name, ok, error in results:
            print(f"{name}: test message {'sent' if ok else f'failed ({error})'}")
        failed = [name for name, ok, _ in results if not ok]
        if failed:
            raise RecallwatchError(
                f"the test message could not be delivered on {', '.join(failed)}; check that "
                "channel's settings and that its server is reachable from here.")
        return
    if not channels:
        print(f"nothing to send: {NO_CHANNELS}")
        return
    with connect(args.warehouse, read_only=args.dry_run, must_exist=True) as con:
        summary = send_alerts(con, resolve(con), channels, report=args.report,
                              dry_run=args.dry_run, now=now)
    for d in summary.deliveries:
        m = d.message
        why = (f" ({d.error}, {d.attempts} attempt(s) so far; the next `recallwatch alert` "
               "retries it)" if d.error else "")
        print(f"{d.channel} {m.event} slice {verbatim_line(m.slice)} route "
              f"{one_line(str(m.fields.get('route')))} {m.metric}@{m.fields.get('k')} "
              f"day {m.window_start:%Y-%m-%d}: {d.status}{why}")
    if args.dry_run:
        print(f"dry run: {len(summary.would_send)} message(s) would be sent, "
              f"{summary.skipped} already sent{_past(summary)}; nothing was sent or written.")
    else:
        print(f"alerts: {summary.sent} sent, {summary.failed} failed, "
              f"{summary.skipped} already sent{_past(summary)}.")
        if summary.failed:   # a scheduler sees it; the failed ones are kept to be retried
            raise RecallwatchError(
                f"{summary.failed} alert(s) could not be delivered (see the lines above); the "
                "next `recallwatch alert` retries them.")


def cmd_run(args) -> None:
    from datetime import UTC

    from pipeline import api
    from pipeline.alerts import channels_from_env
    from pipeline.warehouse import warehouse_path

    index = [tuple(pair.split("=", 1)[::-1]) for pair in args.index or []]
    if any(len(pair) != 2 for pair in index):
        raise RecallwatchError("--index takes VERSION=PATH, e.g. --index idx-v2=manifest.parquet.")
    if warehouse_path(args.warehouse).exists():   # run scores the routes in force
        _use_judge(args, api.configure(args.warehouse).routes, skip=False)
    with _progress() as progress:
        summary = api.run(args.warehouse, logs=args.logs, gold=args.gold,
                          gold_version=args.gold_version,
                          gold_index_version=args.gold_index_version, index=index,
                          cutoffs=_cutoffs(args.cutoffs), pass_mark=args.pass_mark,
                          report_dir=args.out or None, progress=progress,
                          alert_channels=channels_from_env(),
                          now=datetime.now(UTC).replace(tzinfo=None),
                          start=args.start, end=args.end,
                          max_record_bytes=args.max_record_bytes, **_source_options(args))
    for what, version, result in summary.loaded:   # as `ingest gold` / `ingest index` say it
        print(f"{what} {printable(version)} from {printable(result.source)}: "
              f"{_file_state(result)}")
    if summary.ingest:
        _print_ingest(summary.ingest, every_file=len(summary.ingest.files) <= 10)
    print(f"scored {len(summary.days_scored)} day window(s), aggregated "
          f"{len(summary.days_aggregated)} day(s)")
    if summary.drift:
        # the counts are of the whole table the step rewrote, not of this run's days
        print(f"drift: {summary.drift.opened} episode(s) opened, {summary.drift.resolved} "
              "resolved in all" + ("" if summary.drift.changed else " (unchanged)")
              + " (recallwatch export drift_events ...)")
    if summary.alerts:
        print(f"alerts: {summary.alerts.sent} sent, {summary.alerts.failed} failed "
              "(a failed one is retried by the next run)" + _past(summary.alerts))
    _print_summary_table(args.warehouse)
    if summary.report:
        print(f"report: {summary.report.resolve()}")
    if summary.alerts and summary.alerts.failed:   # as `alert`: a scheduler sees it
        raise RecallwatchError(
            f"{summary.alerts.failed} alert(s) could not be delivered (`recallwatch alert "
            "--dry-run` lists them); everything else is done, and the next `run` retries them.")


def cmd_check(args) -> None:
    from pipeline import api
    from pipeline.quality import QualityGateFailed

    def show(result: dict) -> None:
        for c in result["checks"]:
            print(f"{'✓' if c['success'] else '✗'} {'blocking' if c['blocking'] else 'warning '} "
                  f"{c['name']}: {c['detail']}")

    try:
        result = api.check_logs(args.warehouse, args.logs, args.start, args.end,
                                max_record_bytes=args.max_record_bytes,
                                **_source_options(args))
    except QualityGateFailed as failed:
        show(failed.report.as_dict())
        raise  # exit 2 with the one-line reason
    show(result)


def cmd_demo(args) -> None:
    import tempfile
    from datetime import UTC, datetime

    from pipeline.demo import generate_demo_world
    from pipeline.demo.run import refuse_a_clashing_world, run_demo
    from pipeline.report import check_report_dir
    from pipeline.routes.claims import configured_judge
    from pipeline.warehouse import warehouse_path

    try:   # the demo runs without the claims route when no usable judge is configured
        judge = configured_judge()
    except RecallwatchError:   # a model without a key, say: said in one line below
        judge = None
    check_report_dir(args.out)   # before the world is written and the warehouse filled
    out = Path(args.dir)
    if warehouse_path(args.warehouse).is_file():   # a world of another seed is refused first
        with tempfile.TemporaryDirectory(prefix="recallwatch-demo-") as aside:
            refuse_a_clashing_world(args.warehouse,
                                    generate_demo_world(Path(aside), seed=args.seed))
    print(f"generating the demo world in {out} ...", flush=True)
    world = generate_demo_world(out, seed=args.seed)
    with _progress() as progress:
        demo = run_demo(args.warehouse, world, report_dir=args.out, judge=judge,
                        now=datetime.now(UTC).replace(tzinfo=None), progress=progress)
    _print_ingest(demo.run.ingest, every_file=False)
    _print_summary_table(args.warehouse)
    _print_passages_line(args.warehouse)
    if demo.claims is None:
        print("claims route: set RECALLWATCH_JUDGE_MODEL and OPENAI_API_KEY (and OPENAI_BASE_URL "
              "for another server) to score reference claims too")
    else:
        _print_claims_lines(args.warehouse, demo.claims)
    _print_drift(args.warehouse)
    print(f"\nwarehouse: {warehouse_path(args.warehouse).resolve()}")
    print(f"report: {demo.report.resolve()}")
    if demo.claims is not None:
        print(f"claims route report: {demo.claims.report.resolve()}")


def _print_claims_lines(warehouse, sample) -> None:
    """The demo's claims route: mean recall per index version on its first and last day, then
    what its judge did (pipeline.demo.run.ClaimsSample)."""
    from pipeline.alerts import one_line
    from pipeline.report import index_version_summary, resolve_scope
    from pipeline.routes.claims import ROUTE_NAME
    from pipeline.warehouse import connect

    with connect(warehouse, read_only=True) as con:
        scope, _, _ = resolve_scope(con, route=ROUTE_NAME)
        rows = index_version_summary(con, scope)
    def recall(value) -> str:   # a day whose sample holds no scored request has no mean
        return "—" if value is None else f"{value:.3f}"

    versions = ", ".join(f"{one_line(row['index_version'])} {recall(row['first_recall'])} → "
                         f"{recall(row['last_recall'])}" for row in rows)
    print(f"claims route (RAGAS LLM, judge {sample.model}, a sample of each day): "
          f"{versions or 'nothing scored'} (mean recall@{scope.k}, first → last day)")
    print(sample.line())


def _print_drift(warehouse) -> None:
    """The drift episodes of mean recall on slice all, in the report's scope."""
    from pipeline.alerts import one_line
    from pipeline.report import resolve_scope
    from pipeline.warehouse import connect

    with connect(warehouse, read_only=True) as con:
        scope, _, _ = resolve_scope(con)
        rows = con.execute(
            "SELECT window_start::DATE, state, decision, delta, index_version, method "
            "FROM drift_events WHERE grain = 'day' AND slice = 'all' AND metric = 'mean_recall' "
            "AND route = $route AND k = $k AND gold_version = $gold "
            "AND state IN ('opened', 'resolved') ORDER BY window_start",
            {"route": scope.route, "k": scope.k, "gold": scope.gold_version}).fetchall()
    if not rows:
        print(f"drift: no episode of mean recall@{scope.k} on slice all")
        return
    print(f"drift of mean recall@{scope.k} on slice all ({rows[0][5]}):")
    for day, state, decision, delta, version, _ in rows:
        what = f"{decision} opened" if state == "opened" else "episode resolved"
        print(f"  {day}  {what} (difference from baseline {delta:+.3f}, index "
              f"{one_line(version)})")


def _print_passages_line(warehouse) -> None:
    """The passages route's mean recall per index version on its first and last day, in one
    line under the ids route's table."""
    from pipeline.alerts import one_line
    from pipeline.report import index_version_summary, resolve_scope
    from pipeline.routes.passages import ROUTE_NAME, SIMILARITY_THRESHOLD
    from pipeline.warehouse import connect

    with connect(warehouse, read_only=True) as con:
        scope, _, _ = resolve_scope(con, route=ROUTE_NAME)
        rows = index_version_summary(con, scope)
    versions = ", ".join(f"{one_line(row['index_version'])} {row['first_recall']:.3f} → "
                         f"{row['last_recall']:.3f}" for row in rows)
    print(f"passages route (RAGAS NonLLM, threshold {SIMILARITY_THRESHOLD}): "
          f"{versions or 'nothing scored'} (mean recall@{scope.k}, first → last day)")


def _past(summary) -> str:
    """The events a channel set up on a history does not page, for the alerts line."""
    if not summary.past:
        return ""
    return (f", {summary.past} of episodes that had resolved before alerting began on their "
            "channel (recorded as past, not sent)")


def _print_summary_table(warehouse) -> None:
    """Per index version: days, requests scored, mean recall on its first and last day and its
    lowest day — the shape of drift at a glance, in the report's scope."""
    from rich.table import Table
    from rich.text import Text

    from pipeline.alerts import one_line
    from pipeline.report import index_version_summary, resolve_scope
    from pipeline.report.scope import SERVED_K_CHOICE
    from pipeline.warehouse import connect

    with connect(warehouse, read_only=True) as con:
        scope, _, why = resolve_scope(con)
        rows = index_version_summary(con, scope)
    if not rows:
        print("no scored windows yet.")
        return
    served = " (the most common served k)" if why == SERVED_K_CHOICE else ""
    table = Table(title=f"mean recall@{scope.k} per day{served}, each index version's own "
                        f"slice, route {scope.route}")
    for name in ("index version", "k", "gold version", "days", "n", "first day", "last day",
                 "lowest day", "max index size"):
        # logged text: may be long, must not be read as markup nor reach the terminal as
        # control characters (an escape sequence is written as its code)
        if name.endswith("version"):
            table.add_column(name, overflow="fold", max_width=30)
        else:
            table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
    for row in rows:
        table.add_row(Text(one_line(row["index_version"], 1000)), str(scope.k),
                      Text(one_line(row["gold_version"], 1000)),
                      str(row["days"]), str(row["n"]), f"{row['first_recall']:.3f}",
                      f"{row['last_recall']:.3f}", f"{row['lowest']:.3f}",
                      "—" if row["index_size"] is None else f"{row['index_size']:,}")
    _console().print(table)


# ---------------------------------------------------------------------------------- parser

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recallwatch",
        description="Context-recall monitoring for the retrieval half of RAG systems.")
    parser.add_argument("--warehouse", default=None, metavar="PATH",
                        help="DuckDB file (default: $RECALLWATCH_WAREHOUSE or "
                             "./warehouse/recallwatch.duckdb)")
    # --warehouse is also accepted after the command (recallwatch score --warehouse w.duckdb)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--warehouse", default=argparse.SUPPRESS, metavar="PATH",
                        help="DuckDB file (default: $RECALLWATCH_WAREHOUSE or "
                             "./warehouse/recallwatch.duckdb)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(subparsers, name: str, **kwargs) -> argparse.ArgumentParser:
        return subparsers.add_parser(name, parents=[common], **kwargs)

    _ingest_commands(sub, command)
    _step_commands(sub, command)
    _run_commands(sub, command)
    return parser


def _window_args(p, what: str) -> None:
    p.add_argument("--start", type=_when, help=f"first instant to {what} (UTC, inclusive)")
    p.add_argument("--end", type=_when, help=f"end of the window to {what} (UTC, exclusive)")


def _ingest_commands(sub, command) -> None:
    ingest = command(sub, "ingest", help="load logs, a gold set or an index manifest")
    ingest_sub = ingest.add_subparsers(dest="what", required=True, metavar="WHAT")
    p = command(ingest_sub, "logs", help="request logs: JSONL[.gz] or Parquet files, "
                                           "directories (hive partitions) or globs, "
                                           "s3://BUCKET/PREFIX, postgresql://... --table T")
    p.add_argument("paths", nargs="+", metavar="SOURCE")
    _record_limit_arg(p)
    _source_args(p, interval=True)
    p.set_defaults(func=cmd_ingest_logs)
    p = command(ingest_sub, "gold", help="a gold set (JSONL, CSV or Parquet) as one version")
    p.add_argument("path")
    p.add_argument("--version", required=True, help="gold-set version, e.g. gold-2026-11")
    p.add_argument("--index-version", metavar="V",
                   help="the index version whose chunk IDs the gold set names: compared as "
                        "they are on requests V served, by content on the other indexes "
                        "(default: the indexes that served before each rebuild)")
    p.set_defaults(func=cmd_ingest_gold)
    p = command(ingest_sub, "index", help="the chunk manifest of one index version")
    p.add_argument("path")
    p.add_argument("--version", required=True, help="index version, e.g. idx-2026-10-28")
    p.set_defaults(func=cmd_ingest_index)


def _record_limit_arg(p, longer: str = "are quarantined") -> None:
    p.add_argument("--max-record-bytes", type=_positive, default=None,
                   help=f"longer lines {longer} (default: the limit a file was read "
                        f"with last, else {DEFAULT_MAX_RECORD_BYTES // (1 << 20)} MiB)")


def _source_args(p, *, interval: bool) -> None:
    """How to read log sources: the format, a PostgreSQL source's table and column mapping,
    and (where the command has none of its own) the interval to read."""
    p.add_argument("--format", dest="log_format", metavar="FORMAT",
                   help="native, openinference or ragas (default: detected from the columns; "
                        "or RECALLWATCH_LOG_FORMAT)")
    p.add_argument("--table", metavar="[SCHEMA.]TABLE",
                   help="the table or view of a postgresql:// source (or RECALLWATCH_LOG_TABLE)")
    p.add_argument("--columns", metavar="FIELD=COLUMN,...",
                   help="which columns hold which fields where the names differ (or "
                        "RECALLWATCH_LOG_COLUMNS)")
    if interval:
        p.add_argument("--start", type=_when, help="read only from this instant (UTC, "
                                                    "inclusive) where the source can choose: "
                                                    "S3 partitions, a table's rows")
        p.add_argument("--end", type=_when, help="... up to this instant (UTC, exclusive)")


def _source_options(args) -> dict:
    return {"fmt": args.log_format, "table": args.table, "columns": args.columns}


def _judge_args(p) -> None:
    p.add_argument("--judge-model", help="the claims route's judge model (default: "
                                         "$RECALLWATCH_JUDGE_MODEL; key from $OPENAI_API_KEY, "
                                         "endpoint from $OPENAI_BASE_URL)")
    p.add_argument("--lang", choices=("en", "de", "fr"),
                   help="language of the judge's prompts (default en)")
    p.add_argument("--max-calls", type=_positive,
                   help="judge calls (retries included) this command may make, over all its days")
    p.add_argument("--max-tokens", type=_positive,
                   help="judge tokens this command may spend, over all its days")


def _step_commands(sub, command) -> None:
    p = command(sub, "config", help="show the settings in force, or put new ones in force")
    p.add_argument("--cutoffs", help="recall@k cutoffs, e.g. 1,3,5,10 (days scored with others "
                                      "are rescored by the next run)")
    p.add_argument("--pass-mark", type=_unit, help="recall at or above this passes")
    p.add_argument("--grains", help="window grains `run` keeps current: day or day,hour")
    p.add_argument("--routes", help="scoring routes `score` and `run` use: ids (default), "
                                    "passages, claims (needs an LLM judge), e.g. ids,claims")
    p.add_argument("--drift-mode", choices=("anytime", "fixed"),
                   help="anytime: valid however often it is re-checked (default); fixed: one "
                        "comparison per window at level 95 %%")
    p.add_argument("--margin", type=_unit,
                   help="a drop counts only when its interval lies below -margin (0.05)")
    p.add_argument("--detectable-drop", type=_unit,
                   help="a window that cannot see a drop this large is insufficient (0.10)")
    p.add_argument("--baseline", action="append", metavar="SLICE=SPEC",
                   help="baseline of a slice ('*' for all): first:N, first:N@DAY[@DAY...], "
                        "trailing:N, dates:DAY..DAY or index:VERSION (repeatable)")
    p.add_argument("--alert-k", type=_alert_k,
                   help="the cutoff k whose episodes alert; auto: 10, or the cutoff nearest it "
                        "(the default)")
    p.add_argument("--alert-metrics",
                   help="metrics whose episodes alert: mean_recall,pass_rate,full_coverage_rate")
    p.set_defaults(func=cmd_config)

    p = command(sub, "score", help="score context recall per request on every route in force")
    _window_args(p, "score")
    p.add_argument("--cutoffs", help="recall@k cutoffs, put in force (default: those in force, "
                                      f"at first {DEFAULT_CUTOFFS_TEXT})")
    p.add_argument("--pass-mark", type=_unit,
                   help="recall at or above this passes, put in force (default: the one in "
                        f"force, at first {DEFAULT_PASS_MARK})")
    p.add_argument("--gold-version", help="gold-set version (default: the last loaded)")
    _judge_args(p)
    p.add_argument("--dry-run", action="store_true",
                   help="print how many judge calls and tokens the claims route would take; "
                        "judge and score nothing")
    p.set_defaults(func=cmd_score)

    p = command(sub, "claims", help="review the claims of the goldens' reference answers: "
                                    "`claims export FILE`, `claims import FILE` (JSON Lines)")
    p.add_argument("action", choices=("export", "import"))
    p.add_argument("file")
    p.add_argument("--gold-version", help="gold-set version (default: the last loaded)")
    p.set_defaults(func=cmd_claims)

    p = command(sub, "aggregate", help="window metrics with intervals, per slice")
    p.add_argument("--window", choices=("day", "hour"), default="day",
                   help="window grain (default day); a new one is put in force: `run` keeps "
                        "it current from then on")
    _window_args(p, "aggregate")
    p.add_argument("--pass-mark", type=_unit,
                   help=f"put in force (default: the one in force, at first {DEFAULT_PASS_MARK})")
    p.set_defaults(func=cmd_aggregate)

    p = command(sub, "report", help="write the self-contained HTML report")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--k", type=_positive,
                   help="cutoff for the headline figures (default: served k)")
    p.add_argument("--gold-version", help="default: the last loaded")
    p.add_argument("--route", help="the route reported (default: the first route in force)")
    p.set_defaults(func=cmd_report)

    p = command(sub, "drift", help="compare every window with its baseline (drift_events); "
                                   "`drift rebaseline --slice S --from DAY` restarts a baseline")
    p.add_argument("action", nargs="?", choices=("rebaseline",), help=argparse.SUPPRESS)
    _window_args(p, "judge")
    p.add_argument("--slice", help="with rebaseline: the slice ('*' for all slices)")
    p.add_argument("--from", dest="since", help="with rebaseline: the first day of the new "
                                                "baseline")
    p.set_defaults(func=cmd_drift)

    p = command(sub, "metrics", help="the latest window of every slice, route and k in the "
                                     "Prometheus text format (textfile collector, push gateway)")
    p.add_argument("--format", choices=("prometheus", "openmetrics"), default="prometheus",
                   help="prometheus: classic text format 0.0.4 (default); openmetrics: "
                        "OpenMetrics 1.0 text")
    p.add_argument("--grain", choices=("day", "hour"), default="day",
                   help="window grain (default day)")
    p.add_argument("--gold-version", help="default: the newest loaded with window metrics")
    p.add_argument("--out", metavar="FILE",
                   help="write FILE atomically (temp file + rename) instead of stdout, e.g. "
                        "/var/lib/node_exporter/textfile/recallwatch.prom")
    p.set_defaults(func=cmd_metrics)

    p = command(sub, "export", help="write a table to .csv, .parquet or .jsonl")
    p.add_argument("table")
    p.add_argument("file")
    p.set_defaults(func=cmd_export)

    p = command(sub, "alert", help="send the alerts of drift episodes that opened, resolved "
                                   "or were withdrawn (`alert test`: one test message per "
                                   "channel)")
    p.add_argument("action", nargs="?", choices=("test",),
                   help="test: send one test message per configured channel")
    p.add_argument("--dry-run", action="store_true",
                   help="print what would be sent; send and write nothing")
    p.add_argument("--channels", metavar="FILE",
                   help="TOML file with [webhook], [slack], [email] tables (default: the "
                        "RECALLWATCH_WEBHOOK_*, RECALLWATCH_SLACK_WEBHOOK_URL and "
                        "RECALLWATCH_SMTP_* environment variables)")
    p.add_argument("--report", metavar="PATH_OR_URL", help="where the report is, quoted in "
                                                           "every message")
    p.set_defaults(func=cmd_alert)

    p = command(sub, "audit", help="audit the claims route's LLM judge against people: "
                                   "`audit sample --n N FILE` writes claims to label, "
                                   "`audit score FILE` stores the labels and prints agreement")
    p.add_argument("action", choices=("sample", "score"))
    p.add_argument("file", help="the sample to write, or the labelled file to read (.csv or "
                                ".jsonl)")
    p.add_argument("--n", type=_positive, help="with sample: claims to draw")
    p.add_argument("--seed", type=int, default=0, help="with sample: random seed (default 0)")
    p.set_defaults(func=cmd_audit)


def cmd_audit(args) -> None:
    from datetime import UTC

    from pipeline import audit
    from pipeline.warehouse import connect

    if args.action == "sample" and args.n is None:
        raise RecallwatchError("audit sample needs --n, the number of claims to draw.")
    with connect(args.warehouse, must_exist=True) as con:
        if args.action == "sample":
            sample = audit.sample_claims(con, args.n, args.seed)
            audit.write_sample(sample, args.file)
        else:
            done = audit.import_labels(con, args.file, datetime.now(UTC).replace(tzinfo=None))
            found = audit.agreement(con)
    if args.action == "sample":
        print(f"{len(sample.rows)} claims written to {args.file} (seed {args.seed}); fill "
              "`human` with 1 (attributed) or 0 (not attributed), then run `recallwatch audit "
              "score` on it. Drawn per stratum:")
        print("\n".join(audit.strata_lines(sample)))
        return
    print(f"{args.file}: {done.stored} labels stored, {done.blank} blank rows skipped")
    bar = audit.AuditBar.from_env()
    for model in found:
        print("\n".join(audit.describe(model)))
        audited, why = audit.audit_status(model, bar)
        print(f"  {'audited' if audited else 'unaudited'}: {why}")


def _run_commands(sub, command) -> None:
    p = command(sub, "run", help="all steps for new data: ingest, score, aggregate, drift, "
                                  "report, alerts")
    p.add_argument("--logs", nargs="+", action="extend", metavar="SOURCE",
                   help="log files/directories/globs, s3://BUCKET/PREFIX, postgresql://... "
                        "(repeatable)")
    _source_args(p, interval=True)
    _record_limit_arg(p)
    p.add_argument("--gold", metavar="PATH", help="gold set to load first")
    p.add_argument("--gold-version", help="the version of --gold, or a loaded gold set to score "
                                           "with (default: the newest loaded)")
    p.add_argument("--gold-index-version", metavar="V",
                   help="the index version whose chunk IDs --gold names (as `ingest gold "
                        "--index-version`)")
    p.add_argument("--index", action="append", metavar="VERSION=PATH",
                   help="index manifest to load first (repeatable)")
    p.add_argument("--cutoffs", help="recall@k cutoffs, put in force (default: those in force, "
                                      f"at first {DEFAULT_CUTOFFS_TEXT}); new ones rescore all")
    p.add_argument("--pass-mark", type=_unit,
                   help=f"put in force (default: the one in force, at first {DEFAULT_PASS_MARK}); "
                        "a new one re-aggregates all")
    p.add_argument("--out", metavar="DIR", default="reports/latest",
                   help="report directory (default reports/latest; --out '' writes no report)")
    _judge_args(p)
    p.set_defaults(func=cmd_run)

    p = command(sub, "check", help="the data-quality gate of one interval's log files, before "
                                   "they are loaded (recorded in quality_checks; exit 2 on a "
                                   "blocking failure)")
    p.add_argument("--logs", nargs="+", action="extend", required=True, metavar="SOURCE",
                   help="the interval's log files/directories/globs, s3://..., postgresql://... "
                        "(repeatable)")
    _source_args(p, interval=False)
    _record_limit_arg(p, "fail the gate's records-parse check")
    p.add_argument("--start", type=_when, required=True, help="the interval's start (UTC, "
                                                              "inclusive)")
    p.add_argument("--end", type=_when, required=True, help="the interval's end (UTC, exclusive)")
    p.set_defaults(func=cmd_check)

    p = command(sub, "rebuild", help="an index rebuild went live: load its manifest, carry "
                                     "the gold chunk IDs to it by content, re-score from then on")
    p.add_argument("manifest", help="the new index's manifest (chunk_id + content_hash or text)")
    p.add_argument("--version", required=True, help="the new index version, e.g. idx-2026-11-08")
    p.add_argument("--live-from", required=True, help="when it went live (UTC), e.g. 2026-11-08")
    p.set_defaults(func=cmd_rebuild)

    p = command(sub, "demo", help="generate the demo world and run everything on it")
    p.add_argument("--dir", default="demo-world", help="where the demo world is written")
    p.add_argument("--out", default="reports/demo", help="report directory")
    p.add_argument("--seed", type=_seed, default=7)
    p.set_defaults(func=cmd_demo)

    p = command(sub, "announce-rebuild",
                help="tell Airflow an index rebuild went live (starts recallwatch_backfill)")
    p.add_argument("--airflow-url", required=True, metavar="URL",
                   help="the api-server, e.g. http://airflow:8080 (login: AIRFLOW_USER and "
                        "AIRFLOW_PASSWORD, or RECALLWATCH_AIRFLOW_USER/_PASSWORD)")
    p.add_argument("--index-version", required=True, help="the new index, e.g. idx-2026-11-02")
    p.add_argument("--manifest", required=True, metavar="PATH",
                   help="its chunk manifest, at a path the Airflow workers can read")
    p.add_argument("--live-from", required=True, metavar="DAY",
                   help="the first day (UTC) the new index served requests")
    p.set_defaults(func=cmd_announce_rebuild)

    p = command(sub, "score-dataset",
                help="score a gdi_text_v1 dataset with the rag.context_recall contract (one "
                     "judge-scored row per line in --out; the warehouse is not used)")
    p.add_argument("file", help="the dataset: .jsonl, .parquet or .csv with input_id, prompt, "
                                "expected_output, sut_response, retrieved_context")
    p.add_argument("--out", required=True, metavar="FILE", help="the scores (JSON Lines)")
    p.add_argument("--config", metavar="JSON", help="the contract's configuration, e.g. "
                                                    "'{\"lang\": \"de\", \"max\": 10}'")
    p.add_argument("--max-record-bytes", type=_positive, default=None,
                   help="a longer JSON line stops the command (default "
                        f"{DEFAULT_MAX_RECORD_BYTES // (1 << 20)} MiB)")
    p.set_defaults(func=cmd_score_dataset)


def cmd_score_dataset(args) -> None:
    from pipeline import contract

    results = contract.score_file(args.file, args.out, contract.config_from_json(args.config),
                                  max_record_bytes=args.max_record_bytes)
    print(f"scored {printable(args.file)} into {printable(args.out)}: "
          f"{contract.describe(results)}")


def cmd_announce_rebuild(args) -> None:
    from pipeline.announce import announce_rebuild

    event = announce_rebuild(args.airflow_url, args.index_version, args.manifest,
                             args.live_from)
    extra = event["extra"]
    print(f"announced index {printable(extra['index_version'])} (live from "
          f"{extra['live_from']}, manifest {printable(extra['manifest'])}): asset event "
          f"{event['event_id']}; recallwatch_backfill runs once the scheduler picks it up.")


def _out_of_memory() -> str:
    from pipeline.warehouse import DEFAULT_MEMORY_LIMIT

    limit = os.environ.get("RECALLWATCH_MEMORY_LIMIT", DEFAULT_MEMORY_LIMIT)
    return (f"DuckDB ran out of the memory RECALLWATCH_MEMORY_LIMIT={limit} allows; the step's "
            "open transaction was rolled back, so raise RECALLWATCH_MEMORY_LIMIT (e.g. 4GB) and "
            "run the command again.")


def main(argv: list[str] | None = None) -> int:
    with _interrupts_noted() as interrupted:
        try:
            args = build_parser().parse_args(argv)
            args.func(args)
        except KeyboardInterrupt:
            pass
        except Exception as exc:
            if not interrupted:
                return _failed(exc)
        else:
            return 0
    # what was committed before stays committed; the open transaction was rolled back
    print("recallwatch: interrupted", file=sys.stderr)
    return 130


@contextmanager
def _interrupts_noted():
    """A list that holds True once Ctrl-C (SIGINT) has come during the block. DuckDB turns the
    KeyboardInterrupt of a query it was running into an error of its own ("Query interrupted",
    or an aborted transaction that ingest would take for an unreadable file), so how a command
    ended cannot tell an interrupt; this can. Only the main thread can set a handler, and an
    ignored SIGINT (a background job) stays ignored."""
    noted: list[bool] = []
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield noted
        return

    def note(signum, frame):
        noted.append(True)
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, note)
    try:
        yield noted
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _failed(exc: Exception) -> int:
    """Say why the command failed, in one sentence where the user can fix it; the exit code."""
    if isinstance(exc, RecallwatchError):
        print(f"recallwatch: error: {exc}", file=sys.stderr)
        return 2
    if isinstance(exc, BrokenPipeError):
        # the reader went away (`recallwatch run | head -1`): stop quietly, as a shell command
        # killed by SIGPIPE does; what was committed before stays committed
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13
    if isinstance(exc, OSError):  # the machine's, not the code's: disk full, permissions, ...
        print(f"recallwatch: error: {exc.strerror or exc}"
              f"{f' ({exc.filename})' if exc.filename else ''}; fix that and run the command "
              "again (its open transaction was rolled back).", file=sys.stderr)
        return 2
    # a bug, not a user error: say so, keep the trace on request
    if type(exc).__name__ == "OutOfMemoryException":
        print(f"recallwatch: error: {_out_of_memory()}", file=sys.stderr)
        return 2
    if "No space left on device" in str(exc):
        print("recallwatch: error: the disk is full (No space left on device); free space "
              "and run the command again (its open transaction was rolled back).",
              file=sys.stderr)
        return 2
    if os.environ.get("RECALLWATCH_DEBUG"):
        traceback.print_exception(exc)
    print(f"recallwatch: internal error: {type(exc).__name__}: {exc} "
          "(set RECALLWATCH_DEBUG=1 for the traceback)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
