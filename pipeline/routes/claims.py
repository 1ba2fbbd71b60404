"""The `claims` route: RAGAS LLMContextRecall. An LLM judge attributes each claim of the golden's
reference answer to the context a request served; recall = attributed claims / claims. The
claims are fixed per gold-set version (pipeline/claims.py), so the denominator never changes
between runs.

Per window: SQL matches each request to its golden and gathers its served context, the texts
of its distinct chunks within the served k in place order (logged `text`, else the manifest's,
as the passages route reads them; sql/route_claims.sql). Claims still missing are fixed, then
the judge gets one item per distinct (claims, context) through pipeline.judge.judge_many, whose
warehouse cache makes a re-run over unchanged retrievals cost no calls. The judging happens
before route_window is written, on a second cursor of the same connection: the window's
scoring transaction stays open meanwhile, while each verdict and each split is committed on
its own as it arrives, so a scoring that fails or is stopped keeps what the judge was paid
for. Outcomes per request:

- `scored`: the verdict is ok; needed = claims, covered = attributed claims.
- empty served context with claims: a real 0, scored without a call.
- `no_context_text`: chunks were served but none has a text, logged or in the manifest: what
  was served is unknown, not empty, so the request is not measured (counted, shown, excluded
  from means, never 0) and costs no call, not even the split of its reference.
- `judge_failed`: the judge gave no usable verdict (or could not split the reference);
  counted, shown, excluded from means, never 0. The next run judges it again.
- `not_judged`: the run's budget (max_calls / max_tokens) ran out first, or no judge is
  configured; same treatment, judged by a later `score` over the window.
- `no_evidence` (from score_matched): no claims and no reference; no call.

Cutoffs. The judge reads the served context whole (`whole_context`, pipeline/routes), so the
route measures a request at the cutoffs c whose top min(c, k) takes in every chunk it served:
from its served k on, or from the last served place when fewer chunks than k came back. There
recall@c is the measured value; below it the request is not measured: recall_at_k has no row
for it, and window_metrics, drift, alerts and the report count at such a cutoff only the
requests measured there (their n says how many), never a 0. Judging each shorter prefix would
be more calls for a figure nobody asked for. Precision is not defined (a claim has no chunk
that holds it): NULL in request_scores and recall_at_k, and window_metrics' mean_precision is
NULL. No miss_causes are written: a claim has no chunk to look up.

Re-judging. `run` finds stale (pipeline.state) the days holding `not_judged` or `judge_failed`
rows when a judge is configured (`settle_statuses`), once per run, and the days scored before
`recallwatch claims import` changed the claims of their gold set (`inputs_fingerprint`); the
verdict cache makes only the missing or changed items cost calls.

Budget: max_calls / max_tokens bound everything the route's judge does for the command that
registered it (`score`, `run`: every batch and every stretch of stale days), splits first,
then verdicts; a route with `budget_per_batch` (the demo's) bounds each scoring batch
instead."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import pyarrow as pa

from pipeline.claims import claims_fingerprint, fix_claims
from pipeline.judge import (
    Budget,
    JudgeConfig,
    JudgeRun,
    estimate_tokens,
    judge_many,
    verdict_key,
)
from pipeline.warehouse import run_script, sql

log = logging.getLogger(__name__)

ROUTE_NAME = "claims"
NO_JUDGE = ("claims route not judged: no judge is configured (verdicts a judge already gave "
            "are kept); set RECALLWATCH_JUDGE_MODEL and OPENAI_API_KEY (and OPENAI_BASE_URL for "
            "an endpoint other than OpenAI's) or give --judge-model.")

_OUTCOMES = pa.schema([("request_id", pa.string()), ("status", pa.string()),
                       ("claims", pa.list_(pa.string())), ("attributed", pa.list_(pa.bool_()))])


def _utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def configured_judge(**overrides) -> JudgeConfig | None:
    """The judge of the environment with `overrides` (None values ignored), or None when no
    model is configured (given or in RECALLWATCH_JUDGE_MODEL). A model configured with a key
    missing or an endpoint the client cannot use is the user's error, raised: not a run that
    says no judge is configured."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if not given.get("model") and not os.environ.get("RECALLWATCH_JUDGE_MODEL"):
        return None
    return JudgeConfig.from_env(**given)


@dataclass
class JudgeTally:
    """What the judge did for one batch of windows: references split, distinct (claims,
    context) items, cached, judged now, failed, not judged; calls and tokens spent (estimated
    in a dry run)."""

    split: int = 0
    split_failed: int = 0
    distinct: int = 0
    cached: int = 0
    judged: int = 0
    failed: int = 0
    not_judged: int = 0
    calls: int = 0
    tokens: int = 0
    dry_run: bool = False

    def line(self) -> str:
        verb = "would make" if self.dry_run else "made"
        # items count distinct (claims, context) pairs; not_judged counts requests
        return (f"judge: {self.distinct} distinct claims/context item(s), {self.cached} cached, "
                f"{self.judged} judged ({self.failed} failed); {self.not_judged} request(s) "
                f"not judged; {self.split} reference(s) split ({self.split_failed} failed); {verb} "
                f"{self.calls} call(s), {'~' if self.dry_run else ''}{self.tokens} tokens")


def judge_window(con, judge: JudgeConfig | None, gold_version: str,
                 rows: list[tuple[str, str, list[str]]], *, now: datetime,
                 dry_run: bool = False) -> tuple[dict[str, tuple], JudgeTally]:
    """The outcome of each scored request (request_id, gold_id, served contexts) as
    request_id -> (status, claims, attributed), and the tally. Writes claims and verdicts on
    `con` (each in its own transaction). A dry run writes only the gold file's claims and
    estimates: one call per reference to split, one per distinct item to judge."""
    tally = JudgeTally(dry_run=dry_run)
    if judge is None:
        return _without_judge(con, gold_version, rows), tally
    # a request with nothing readable is not judged: its reference needs no split for it
    fixed = fix_claims(con, judge, gold_version,
                       [g for _, g, c in rows if g is not None and c is not None],
                       max_calls=judge.max_calls, dry_run=dry_run)
    tally.split, tally.split_failed = fixed.split, len(fixed.failed)
    tally.calls, tally.tokens = fixed.calls, fixed.tokens
    unsplit: dict[tuple, str] = {}
    if dry_run:   # the splits the budget has room for; then, below, the judging of each
        planned = {gold_id: reference for gold_id, _, reference in fixed.planned}
        unsplit = {(g, tuple(c)): planned[g] for _, g, c in rows if g in planned and c}
        tally.calls += len(fixed.planned)
        tally.tokens += sum(tokens for _, tokens, _ in fixed.planned)
        tally.distinct += len(unsplit)
    items = {}
    for _, gold_id, contexts in rows:
        claims = fixed.claims.get(gold_id)
        if claims and contexts:
            items.setdefault(verdict_key(judge, claims, contexts), (claims, tuple(contexts)))
    remaining = dataclasses.replace(
        judge,
        max_calls=None if judge.max_calls is None else max(judge.max_calls - tally.calls, 0),
        max_tokens=None if judge.max_tokens is None else max(judge.max_tokens - tally.tokens, 0))
    run = (judge_many(con, remaining, list(items.values()), now=now, dry_run=dry_run)
           if items else JudgeRun(dry_run=dry_run))
    tally.distinct += run.distinct
    tally.cached, tally.judged, tally.failed = run.cached, run.judged, run.failed
    tally.calls += run.calls
    tally.tokens += run.tokens
    if unsplit:   # a call per distinct context of a reference split first, its claims
        # unknown yet: weighed with the reference in their place, within what the budget left
        budget = Budget(None if judge.max_calls is None else judge.max_calls - tally.calls,
                        None if judge.max_tokens is None else judge.max_tokens - tally.tokens)
        for (_, contexts), reference in unsplit.items():
            estimate = estimate_tokens(judge, [reference], contexts)
            if not budget.spend(estimate):
                break
            tally.calls += 1
            tally.tokens += estimate
    outcomes: dict[str, tuple] = {}
    for request_id, gold_id, contexts in rows:
        claims = fixed.claims.get(gold_id)
        if contexts is None:   # served chunks, none with a text: nothing known to judge
            outcomes[request_id] = ("no_context_text", None, None)
        elif claims is None:   # unsplit (failed or skipped), or only blank claims and no reference
            status = ("judge_failed" if gold_id in fixed.failed else
                      "not_judged" if gold_id in fixed.skipped else
                      "no_evidence")
            outcomes[request_id] = (status, None, None)
        elif not contexts:   # nothing served with a text: a real 0, no call
            outcomes[request_id] = ("scored", list(claims), [False] * len(claims))
        else:
            verdict = run.verdicts.get(verdict_key(judge, claims, contexts))
            if verdict is None:
                outcomes[request_id] = ("not_judged", list(claims), None)
            elif verdict.status != "ok":
                outcomes[request_id] = ("judge_failed", list(claims), None)
            else:
                outcomes[request_id] = ("scored", list(claims), list(verdict.attributed))
    tally.not_judged = sum(1 for o in outcomes.values() if o[0] == "not_judged")
    return outcomes, tally


def _without_judge(con, gold_version: str, rows: list[tuple[str, str, list[str] | None]],
                   ) -> dict[str, tuple]:
    """The outcomes a rescoring without a judge can still give (late logs, a manifest, new
    cutoffs rescore a day): a request whose claims and served context a judge has already
    judged keeps that verdict (the newest cached one, whichever model gave it: scored, or
    judge_failed when that call failed), one served nothing is a real 0, a golden with
    nothing to compare (no claim, no reference) is no_evidence, and only what no judge has
    seen is `not_judged` — never a judged day wiped. No call is made and no reference split."""
    claims_of = fix_claims(con, None, gold_version, []).claims
    wanted = [(rid, list(claims_of[gid]), ctx) for rid, gid, ctx in rows
              if ctx and claims_of.get(gid)]
    cached: dict[str, tuple[str, list[bool] | None]] = {}
    if wanted:
        con.register("claims_wanted", pa.table({
            "request_id": [w[0] for w in wanted], "claims": [w[1] for w in wanted],
            "contexts": [w[2] for w in wanted]}))
        try:
            cached = {request_id: (status, attributed) for request_id, status, attributed
                      in con.execute(
                "SELECT w.request_id, arg_max(v.status, v.created_at), "
                "arg_max(v.attributed, v.created_at) "
                "FROM claims_wanted w JOIN judge_verdicts v "
                "ON v.claims = w.claims AND v.contexts = w.contexts "
                "GROUP BY w.request_id").fetchall()}
        finally:
            con.unregister("claims_wanted")
    # the goldens whose reference a judge would split first (none of their claims stored)
    unsplit = {row[0] for row in run_script(con, "claims_to_split", {
        "gold_version": gold_version,
        "gold_ids": sorted({gid for _, gid, _ in rows if gid and not claims_of.get(gid)})})}
    outcomes: dict[str, tuple] = {}
    for request_id, gold_id, contexts in rows:
        claims = claims_of.get(gold_id)
        verdict = cached.get(request_id)
        if contexts is None:
            outcomes[request_id] = ("no_context_text", None, None)
        elif claims is None:   # a reference not split yet waits for a judge
            outcomes[request_id] = ("not_judged" if gold_id in unsplit else
                                    "no_evidence", None, None)
        elif not contexts:
            outcomes[request_id] = ("scored", list(claims), [False] * len(claims))
        elif verdict is not None and verdict[0] == "ok":
            outcomes[request_id] = ("scored", list(claims), list(verdict[1]))
        elif verdict is not None:
            outcomes[request_id] = ("judge_failed", list(claims), None)
        else:
            outcomes[request_id] = ("not_judged", list(claims), None)
    return outcomes


@dataclass(frozen=True)
class ClaimsRoute:
    """Register `ClaimsRoute(judge=..., report=print)` to score with a given judge (the CLI does,
    with its --judge-model, --lang, --max-calls and --max-tokens); the built-in one reads the
    judge from the environment when it scores. Without a judge a request keeps a verdict a
    judge already gave on its claims and context, and the others are `not_judged`; `report`
    gets NO_JUDGE once for the route registered (the CLI registers one per command), not once
    for each window."""

    name: str = ROUTE_NAME
    needs: tuple[str, ...] = ("claims", "reference")
    judge: JudgeConfig | None = None
    clock: Callable[[], datetime] = _utc_now
    report: Callable[[str], None] | None = None
    # calls and tokens this route's judge spent so far: its max_calls / max_tokens bound them
    # all, over every batch and stretch of days of the command that registered it
    spent: list[int] = field(default_factory=lambda: [0, 0], compare=False, repr=False)
    # whether NO_JUDGE was said: once for the command, not once for each window it scores
    told: list[bool] = field(default_factory=lambda: [False], compare=False, repr=False)
    whole_context: ClassVar[bool] = True
    budget_per_batch: ClassVar[bool] = False
    # 2: no_context_text for served chunks without a text; 3: a chunk logged with its text in
    # any step is read as logged, never as the manifest's
    rules: ClassVar[str] = "3"

    def settle_statuses(self) -> tuple[str, ...]:
        """not_judged and judge_failed rows get a verdict by scoring again only when a judge is
        configured; without one a rescoring would leave them as they are."""
        judge = self.judge if self.judge is not None else configured_judge()
        return ("not_judged", "judge_failed") if judge is not None else ()

    def inputs_fingerprint(self, con, gold_version: str) -> str:
        return claims_fingerprint(con, gold_version)

    def score_window(self, con, params: dict) -> None:
        rows = _served_contexts(con, params)
        judge = self.judge if self.judge is not None else configured_judge()
        say = self.report or log.warning
        if judge is None and rows and not self.told[0]:
            say(NO_JUDGE)
            self.told[0] = True
        if judge is not None and not self.budget_per_batch:
            calls, tokens = self.spent
            judge = dataclasses.replace(
                judge,
                max_calls=None if judge.max_calls is None else max(judge.max_calls - calls, 0),
                max_tokens=None if judge.max_tokens is None
                else max(judge.max_tokens - tokens, 0))
        writer = con.cursor()   # its own transactions: verdicts outlive this window's
        try:
            outcomes, tally = judge_window(writer, judge, params["gold_version"], rows,
                                           now=self.clock())
        finally:
            writer.close()
        self.spent[0] += tally.calls
        self.spent[1] += tally.tokens
        if judge is not None and rows and self.report is not None:
            self.report(tally.line())
        table = pa.table({
            "request_id": list(outcomes),
            "status": [o[0] for o in outcomes.values()],
            "claims": [o[1] for o in outcomes.values()],
            "attributed": [o[2] for o in outcomes.values()]}, schema=_OUTCOMES)
        con.register("claim_outcomes", table)
        try:
            run_script(con, "route_claims_write", params)
        finally:
            con.unregister("claim_outcomes")


def _served_contexts(con, params: dict) -> list[tuple[str, str, list[str] | None]]:
    """(request_id, gold_id, contexts) of each scored request of the window; contexts None
    when its served chunks have no text (sql/route_claims.sql)."""
    return [(rid, gid, None if ctx is None else list(ctx))
            for rid, gid, ctx in run_script(con, "route_claims", params)]


def estimate(con, judge: JudgeConfig, params: dict) -> JudgeTally:
    """What scoring [start, end) on the claims route would cost, without a call or a verdict
    written (the gold file's claims are stored: that costs nothing and changes no score).
    `params` as a route gets them (pipeline/routes); the score_matched macro must exist."""
    rows = _served_contexts(con, params)
    return judge_window(con, judge, params["gold_version"], rows, now=_utc_now(),
                        dry_run=True)[1]


def estimate_score(con, judge: JudgeConfig, gold_version: str, start: datetime | None = None,
                   end: datetime | None = None) -> JudgeTally:
    """The judge cost of scoring the claims route over [start, end) (every request when not
    given), as `recallwatch score --dry-run` prints it; nothing is judged or scored."""
    con.execute(sql("score_match"))
    first, last = con.execute("SELECT min(timestamp), max(timestamp) FROM requests").fetchone()
    if first is None:
        return JudgeTally(dry_run=True)
    params = {"start": start or first, "end": end or last + timedelta(microseconds=1),
              "gold_version": gold_version, "needs": list(ClaimsRoute.needs)}
    return estimate(con, judge, params)
