"""The one owner of the pipeline's state: which windows of which step are stale, what a window
was built with, and what becomes stale when a window changes.

Steps run in order, each built from the rows of the one before it: `ingest` (requests) →
`score` (request_scores, request_cutoffs, miss_causes per route and UTC day) → `aggregate`
(window_metrics and window_sums per grain) → `drift` (drift_events, from the first changed day
on, since baselines and the sequential test look back). Alerts record deliveries, which cannot
be taken back: a changed episode is a new episode and gets its own messages.

A step asks this module which windows to (re)build, records what it built a window with, and
calls `invalidate` when it changed a day, which voids what the steps built on it hold for that
day — each step's rows by that step's own SQL — so the next `run` rebuilds it. Nobody else
deletes a step's rows.

What is stale is found in the warehouse itself, whichever command left it so:
- a day's scores on a route, when a log file (re)loaded or removed requests of it, when it has
  requests never scored or scores whose request is gone or moved, when it was scored with
  another gold set, other cutoffs or other index manifests than those in force, or with other
  route inputs (claims: before `claims import` changed them), or only partly, and when it holds
  rows that scoring again now could settle (claims not judged or failed, while a judge is
  configured) (sql/stale_score_days.sql, from `score_windows`, written by
  sql/record_scored_days.sql);
- a day's metrics of a grain, when a window of it has scores but no metrics, was aggregated
  with another pass mark, or before the rates' interval method or the sufficient statistics
  were recorded (sql/stale_metric_days.sql);
- drift rows, when a window with metrics has none or they were judged with other drift
  settings (`stale_drift`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from pipeline.config import GRAINS, Config
from pipeline.errors import RecallwatchError
from pipeline.routes import get_route
from pipeline.warehouse import run_script, sql, transaction

ONE_DAY = timedelta(days=1)

Window = tuple[datetime, datetime]


@dataclass(frozen=True)
class Step:
    name: str
    built_from: str | None   # the step whose rows it is computed from
    # sql/<void>.sql voids what this step built on given days ($days; $route, NULL for every
    # route): it deletes the rows, or forgets that they are current so they get rebuilt
    void: str | None


STEPS = (
    Step("ingest", None, None),
    Step("score", "ingest", "void_scored_days"),
    Step("aggregate", "score", "clear_window_metrics"),
    # a window's drift rows depend on every window before it: voiding reaches later days
    Step("drift", "aggregate", "clear_drift_events"),
)


def dependents(step: str) -> list[Step]:
    """The steps built directly on `step`'s rows."""
    return [s for s in STEPS if s.built_from == step]


def invalidate(con, step: str, days: list[datetime], route: str | None = None) -> None:
    """`step` changed its rows of these UTC days (on `route`, or on every route): void what the
    steps built directly on them hold for those days. Each of those, when rebuilt, voids its
    own dependents in turn (scores are only marked stale and stay readable until rescored;
    window metrics built on replaced scores are deleted)."""
    if not days:
        return
    for later in dependents(step):
        run_script(con, later.void, {"route": route, "days": sorted(set(days))})


def source_days(con, source: str) -> list[datetime]:
    """The UTC days of the requests a log file holds (ingest voids them before and after it
    replaces the file's requests)."""
    return [row[0] for row in con.execute(sql("days_of_source"), {"source": source}).fetchall()]


# ------------------------------------------------------------------------------------ score

def check_window(start: datetime | None, end: datetime | None) -> None:
    """A window [start, end) with both bounds must not be empty."""
    if start is not None and end is not None and end <= start:
        raise RecallwatchError(f"the window is empty: --end {end} is not after --start {start}.")


def day_manifests(con, first: datetime | None = None, last: datetime | None = None) -> None:
    """The temp table day_manifests over the days with requests in [first, last): which
    manifest content each index version serving a day holds, and which IDs a rebuild carried
    gold chunks to (pipeline.rebuild). Miss causes, and the scores of a rebuilt index's
    requests, depend on them; a manifest of an index that served no request of a day changes
    nothing there (sql/day_manifests.sql)."""
    run_script(con, "day_manifests", {"first": first, "last": last})


def route_inputs(con, route: str, gold_version: str | None) -> str:
    """What else `route`'s scores depend on: the version of its scoring rules (its optional
    `rules`) and its optional `inputs_fingerprint` (pipeline/routes); '' for a route with
    neither. Days scored under other rules (by an earlier release) are stale, so `run` brings
    them up to the rules of this one."""
    chosen = get_route(route)
    fingerprint = getattr(chosen, "inputs_fingerprint", None)
    inputs = fingerprint(con, gold_version) if fingerprint is not None else ""
    rules = getattr(chosen, "rules", "")
    return f"rules {rules};{inputs}" if rules else inputs


def stale_score_days(con, config: Config) -> list[datetime]:
    """Days whose scores on any route of `config` are out of date (see the module doc). Days
    holding rows that scoring again now could settle (a route's optional `settle_statuses`,
    e.g. claims not judged while a judge is configured) are included each time this is asked:
    `run` asks once per run, so a judge that keeps failing is tried once per run."""
    day_manifests(con)
    days: set[datetime] = set()
    for route in config.routes:
        settle = getattr(get_route(route), "settle_statuses", None)
        days.update(row[0] for row in con.execute(sql("stale_score_days"), {
            "route": route, "gold_version": config.gold_version,
            "cutoffs": config.cutoffs_text,
            "route_inputs": route_inputs(con, route, config.gold_version),
            "settle": list(settle() if settle is not None else ())}).fetchall())
    return sorted(days)


def score_windows(con, start: datetime | None, end: datetime | None,
                  routes: tuple[str, ...]) -> list[Window]:
    """UTC day windows covering [start, end); a partial day at either end is clipped to the
    given bounds, and a day without requests is a window too (its stale scores go). Without
    bounds: every day that has requests or scores (so a day whose requests were all removed is
    cleared); with one bound, those days on that side of it."""
    check_window(start, end)
    if start is None or end is None:
        days = [row[0] for row in con.execute(sql("days_with_data"), {
            "start": start, "end": end, "routes": list(routes)}).fetchall()]
        return [(max(day, start) if start else day,
                 min(day + ONE_DAY, end) if end else day + ONE_DAY) for day in days]
    windows = []
    cursor = start
    while cursor < end:
        next_day = datetime.combine(cursor.date(), datetime.min.time()) + ONE_DAY
        windows.append((cursor, min(next_day, end)))
        cursor = next_day
    return windows


def batches(con, windows: list[Window], batch_requests: int) -> list[list[Window]]:
    """Group consecutive windows so that each group holds at most batch_requests requests
    (a single window larger than that is a group of its own)."""
    if not windows:
        return []
    counts = dict(con.execute(
        "SELECT date_trunc('day', timestamp) AS day, count(*) FROM requests "
        "WHERE timestamp >= $start AND timestamp < $end GROUP BY day",
        {"start": windows[0][0], "end": windows[-1][1]}).fetchall())
    groups: list[list[Window]] = []
    size = 0
    for window in windows:
        n = counts.get(datetime.combine(window[0].date(), datetime.min.time()), 0)
        if groups and size + n <= batch_requests:
            groups[-1].append(window)
            size += n
        else:
            groups.append([window])
            size = n
    return groups


def record_scored(con, route: str, batch: list[Window], config: Config,
                  cleared_days: list[datetime]) -> None:
    """The windows of `batch` were scored on `route` with `config`: note it per day, and void
    the metrics of those days and of the days whose old scores were deleted (a request that
    moved day leaves its old day)."""
    day_manifests(con, min(a for a, _ in batch), max(b for _, b in batch))
    run_script(con, "record_scored_days", {
        "windows": [{"start": a, "end": b} for a, b in batch], "route": route,
        "gold": config.gold_version, "cutoffs": config.cutoffs_text,
        "route_inputs": route_inputs(con, route, config.gold_version)})
    days = {datetime.combine(a.date(), datetime.min.time()) for a, _ in batch}
    invalidate(con, "score", sorted(days | set(cleared_days)), route)


# -------------------------------------------------------------------------------- aggregate

def stale_metric_days(con, config: Config, grain: str) -> list[datetime]:
    """Days whose metrics of `grain` are out of date on any route of `config`. Blank session
    IDs stored by earlier releases (which made every such request of a day one session) are
    first stored as none, and the metrics of their days voided."""
    _settle_blank_sessions(con)
    days: set[datetime] = set()
    for route in config.routes:
        days.update(row[0] for row in con.execute(sql("stale_metric_days"), {
            "grain": grain, "pass_mark": config.pass_mark, "route": route}).fetchall())
    return sorted(days)


# a session_id of spaces, tabs and line breaks alone names no session (sql/validate_logs.sql)
_BLANK_SESSION = "trim(session_id, ' ' || chr(9) || chr(10) || chr(13)) = ''"


def _settle_blank_sessions(con) -> None:
    days = [row[0] for row in con.execute(
        "SELECT DISTINCT date_trunc('day', timestamp) FROM requests "
        f"WHERE {_BLANK_SESSION}").fetchall()]
    if days:
        with transaction(con):
            con.execute(f"UPDATE requests SET session_id = NULL WHERE {_BLANK_SESSION}")
            invalidate(con, "score", days)


def aggregate_span(con, grain: str, start: datetime | None,
                   end: datetime | None) -> Window | tuple[None, None]:
    """[start, end) widened to whole windows of the grain: a window is always recomputed from
    all of its requests, never from part of them. Unbounded: from the first to the last window
    with requests or metrics (windows that lost their requests are cleared too)."""
    if start is None or end is None:
        lo, hi = con.execute(sql("window_span"), {"grain": grain}).fetchall()[0]
        if lo is None:
            return None, None
        start = start or lo
        end = end or hi + GRAINS[grain]
        if end <= start:   # the one bound given lies beyond the data: nothing to aggregate
            return None, None
    check_window(start, end)
    floor_start, floor_end = con.execute(
        "SELECT date_trunc($g, $start::TIMESTAMP), date_trunc($g, $end::TIMESTAMP)",
        {"g": grain, "start": start, "end": end}).fetchall()[0]
    return floor_start, (floor_end if floor_end == end else floor_end + GRAINS[grain])


def days_of(start: datetime, end: datetime) -> list[datetime]:
    """The UTC days that [start, end) touches."""
    day = datetime.combine(start.date(), datetime.min.time())
    days = []
    while day < end:
        days.append(day)
        day += ONE_DAY
    return days


def contiguous(days: list[datetime]) -> list[Window]:
    """Runs of consecutive days as [start, end) ranges, so each is one score/aggregate call."""
    ranges: list[Window] = []
    for day in sorted(set(days)):
        if ranges and ranges[-1][1] == day:
            ranges[-1] = (ranges[-1][0], day + ONE_DAY)
        else:
            ranges.append((day, day + ONE_DAY))
    return ranges


def retire(con, config: Config) -> None:
    """Remove the rows of routes and grains `config` no longer keeps (sql/retire_settings.sql),
    when the warehouse holds any: the tables that name every route and grain tell. Called
    when settings are changed (`config`), so the next `run` leaves what a fresh build with them
    would."""
    # request_scores too: a route scored only in part (score with bounds inside a day) has
    # scores but no score_windows row, and aggregate and drift would spread them
    held = con.execute("SELECT DISTINCT route, NULL FROM score_windows UNION "
                       "SELECT DISTINCT route, NULL FROM request_scores UNION "
                       "SELECT DISTINCT route, grain FROM window_metrics").fetchall()
    if all(route in config.routes and (grain is None or grain in config.grains)
           for route, grain in held):
        return
    with transaction(con):
        run_script(con, "retire_settings", {"routes": list(config.routes),
                                            "grains": list(config.grains)})


# ------------------------------------------------------------------------------------ drift

def stale_drift(con, config: Config) -> bool:
    """Whether drift_events lags window_metrics: a window of a grain kept has metrics but no
    drift rows, or rows were judged with other drift settings than those in force."""
    from pipeline.drift import built_with

    if con.execute(sql("stale_drift"), {"grains": list(config.grains)}).fetchall():
        return True
    judged = con.execute("SELECT DISTINCT slice, built_with FROM drift_events").fetchall()
    return any(text != built_with(config, config.baseline_for(name)) for name, text in judged)
