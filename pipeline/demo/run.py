"""Running the pipeline on a demo world, as `recallwatch demo` does: the ids and passages routes
(the demo's logs carry chunk texts), and, when a judge is configured, the claims route on a
bounded sample. Judging every request of the demo would take ~51,000 calls (nearly every
request serves another context: distractors change with the growing index), so the demo
judges each day as a batch of its own with a budget of CLAIMS_CALLS_PER_DAY calls: about the
first ten requests of each day, 300 calls over the 30 days. The other requests stay
`not_judged`: counted and shown, never in a mean. The gold set gives its claims, so no call
splits a reference. Verdicts are cached, so running the demo again makes no call."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import ClassVar

from pipeline.demo.world import DemoWorld
from pipeline.judge import JudgeConfig
from pipeline.progress import Progress
from pipeline.routes.claims import ClaimsRoute
from pipeline.run import RunSummary

# Judge calls per day of the demo: ~10 judged requests a day, 300 calls for its 30 days.
CLAIMS_CALLS_PER_DAY = 10


@dataclass(frozen=True)
class ClaimsSample:
    """What the demo's judge did: verdicts written by this run (created at its `now`) with their
    calls and tokens, and the claims route's requests by outcome."""

    model: str
    calls: int
    tokens: int
    verdicts: int
    failed: int
    scored: int
    not_judged: int
    judge_failed: int
    report: Path

    def line(self) -> str:
        return (f"judge ({self.model}, at most {CLAIMS_CALLS_PER_DAY} calls a day): made "
                f"{self.calls} call(s), {self.tokens:,} tokens for {self.verdicts} verdict(s) "
                f"({self.failed} failed); claims route requests: {self.scored:,} scored, "
                f"{self.judge_failed:,} judge_failed, {self.not_judged:,} not judged (counted, "
                "not in the means)")


@dataclass(frozen=True)
class DemoRun:
    run: RunSummary            # the catch-up of the ids and passages routes, ingest included
    report: Path               # the report of the ids route (the others are listed in it)
    claims: ClaimsSample | None  # None when no judge is configured


@dataclass(frozen=True)
class DemoClaimsRoute(ClaimsRoute):
    """The claims route as the demo scores it: its budget is per batch, and the demo scores
    each day as a batch. Days holding not_judged rows are not stale for it, so the catch-up
    after the sample does not judge the rest of the world in one unbounded batch."""

    budget_per_batch: ClassVar[bool] = True

    def settle_statuses(self) -> tuple[str, ...]:
        return ()


def refuse_a_clashing_world(warehouse, world: DemoWorld) -> None:
    """Refuse `world` (generated aside, not yet in --dir) when the existing `warehouse` holds a
    gold set of the same version with other content: the world of another seed. Loading it
    would replace the folder's files and then be refused on the gold set, leaving a world the
    warehouse does not hold."""
    from pipeline.errors import RecallwatchError
    from pipeline.ingest.files import file_hash
    from pipeline.warehouse import connect, warehouse_path

    path = warehouse_path(warehouse)
    # opened for writing, as the demo is about to: one written by an earlier release gets the
    # tables and columns added since (read-only, it would be refused until a run)
    with connect(warehouse, must_exist=True) as con:
        loaded = con.execute("SELECT content_hash FROM gold_versions WHERE gold_version = $v",
                             {"v": world.gold_version}).fetchall()
    if loaded and loaded[0][0] != file_hash(world.gold_path):
        raise RecallwatchError(
            f"{path} holds the demo gold set {world.gold_version!r} of another world (another "
            "--seed); give this world its own --dir and --warehouse (nothing was changed).")


def run_demo(warehouse, world: DemoWorld, *, report_dir: str | Path, now: datetime,
             judge: JudgeConfig | None = None, progress: Progress | None = None) -> DemoRun:
    """Ingest and score `world` on the ids and passages routes, aggregate, judge drift and write
    the report to report_dir; with a judge, also score the claims route on its sample (verdicts
    created at `now`), aggregate it and write its report to report_dir/claims. The routes in
    force are ids and passages afterwards, so a later `recallwatch run` on this warehouse does
    not judge the rest of the demo unasked."""
    from pipeline import api
    from pipeline.config import put_in_force, resolve
    from pipeline.routes import DEFAULT_ROUTE
    from pipeline.routes.passages import ROUTE_NAME as PASSAGES
    from pipeline.warehouse import connect

    without_judge = (DEFAULT_ROUTE, PASSAGES)
    with connect(warehouse) as con:
        put_in_force(con, resolve(con, routes=without_judge))
    summary = api.run(
        # the files written, not the folder: a file of another's left there is no demo data
        warehouse, logs=[str(path) for path in world.log_files] or [str(world.logs_dir)],
        gold=str(world.gold_path),
        gold_version=world.gold_version,
        index=[(str(path), version) for version, path in world.index_manifests.items()],
        report_dir=None if judge is not None else report_dir, progress=progress)
    if judge is None:
        return DemoRun(summary, summary.report, None)
    try:
        sample, report = _judge_sample(warehouse, judge, Path(report_dir), now, progress)
    finally:   # also when the judge failed: the routes in force never keep claims
        with connect(warehouse) as con:
            put_in_force(con, resolve(con, routes=without_judge))
    return DemoRun(summary, report, sample)


def _judge_sample(warehouse, judge: JudgeConfig, report_dir: Path, now: datetime,
                  progress: Progress | None) -> tuple[ClaimsSample, Path]:
    """Put the claims route in force beside the others, score its stale days one batch per day
    with the demo's budget, then catch up (aggregate, drift, the report) and write its report.
    Returns the sample and the ids route's report."""
    from pipeline import api, state
    from pipeline.config import put_in_force, require_gold, resolve
    from pipeline.routes import get_route, register
    from pipeline.routes.claims import ROUTE_NAME as CLAIMS
    from pipeline.score import score
    from pipeline.warehouse import connect, run_script

    previous = get_route(CLAIMS)
    register(DemoClaimsRoute(judge=dataclasses.replace(judge, max_calls=CLAIMS_CALLS_PER_DAY),
                             clock=lambda: now))
    try:
        with connect(warehouse) as con:
            in_force = resolve(con)
            put_in_force(con, resolve(con, routes=(*in_force.routes, CLAIMS)))
            claims_only = resolve(con, routes=(CLAIMS,))
            for start, end in state.contiguous(state.stale_score_days(con, claims_only)):
                score(con, claims_only, start=start, end=end, batch_requests=1,
                      progress=progress)
        # Aggregates the claims route, judges its drift and writes the ids route's report.
        caught_up = api.run(warehouse, report_dir=report_dir, progress=progress)
        claims_report = api.report(warehouse, report_dir / CLAIMS, route=CLAIMS)
        with connect(warehouse, read_only=True) as con:
            (verdicts, failed, calls, tokens, scored, not_judged, judge_failed), = run_script(
                con, "demo_judge_tally", {"created_at": now, "model": judge.model, "route": CLAIMS,
                                          "gold_version": require_gold(in_force)})
    finally:
        register(previous)
    return (ClaimsSample(judge.model, calls, tokens, verdicts, failed, scored, not_judged,
                         judge_failed, claims_report), caught_up.report)
