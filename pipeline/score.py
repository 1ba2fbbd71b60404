"""Score: context recall per request, one UTC day window at a time, on every route of the
configuration.

For each window and route the shared part runs once: clear the route's old rows of the window
(sql/score_clear.sql), match each request to its golden and decide its status (the table macro
of sql/score_match.sql), let the route place what was needed in the ranking (pipeline/routes),
and write recall, precision and the counts at every cutoff (sql/score_write.sql). Consecutive
windows are scored together, in one transaction per batch of up to BATCH_REQUESTS requests: one
large statement uses both cores far better than many small ones, and a batch is still replaced
whole or not at all; its rows are written in no particular order (pipeline.warehouse.unordered).
pipeline.state records what each day was scored with and voids what was built on the old
scores."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pipeline import state
from pipeline.config import Config, given_or_resolved, require_gold
from pipeline.progress import Progress
from pipeline.routes import get_route
from pipeline.warehouse import run_script, sql, transaction, unordered

BATCH_REQUESTS = 5_000_000


@dataclass(frozen=True)
class ScoreSummary:
    gold_version: str
    cutoffs: tuple[int, ...]
    routes: tuple[str, ...]
    windows: tuple[tuple[datetime, datetime], ...]
    by_status: dict[str, dict[str, int]]   # route -> status -> requests
    joined: dict[str, int]   # requests that found their golden by_gold_id / by_query / unmatched


def score(con, config: Config | None = None, *, start: datetime | None = None,
          end: datetime | None = None, batch_requests: int = BATCH_REQUESTS,
          progress: Progress | None = None, **settings) -> ScoreSummary:
    """Score every request of [start, end) on every route of `config` (default: the settings
    in force, overridden by `settings` such as cutoffs=, gold_version=, routes=; nothing is put
    in force). Without bounds, every day with requests or scores.

    Replaces the windows' rows of request_scores, request_cutoffs and miss_causes for those
    routes, each batch in one transaction, and voids the window metrics built on them.
    Idempotent: scoring the same windows again with the same configuration changes nothing."""
    config = given_or_resolved(con, config, settings)
    gold_version = require_gold(config)
    windows = state.score_windows(con, start, end, config.routes)
    groups = state.batches(con, windows, batch_requests)
    con.execute(sql("score_match"))
    done = 0
    for batch in groups:
        if progress:
            progress(f"score {batch[0][0]:%Y-%m-%d}..{batch[-1][1]:%Y-%m-%d}", done,
                     len(windows))
        with unordered(con), transaction(con):
            for route in config.routes:
                _score_batch(con, route, batch, config)
        done += len(batch)
    if progress:
        progress("score", len(windows), len(windows))
    return _summary(con, config, gold_version, windows)


def _score_batch(con, route_name: str, batch: list[tuple[datetime, datetime]],
                 config: Config) -> None:
    route = get_route(route_name)
    params = {"route": route_name, "start": batch[0][0], "end": batch[-1][1],
              "gold_version": config.gold_version, "needs": list(route.needs),
              "cutoffs": list(config.cutoffs)}
    cleared = [row[0] for row in run_script(con, "score_clear", params)]
    route.score_window(con, params)
    if not con.execute("SELECT 1 FROM duckdb_tables() WHERE table_name = 'route_window' "
                       "AND temporary").fetchall():
        raise RuntimeError(f"route {route_name!r} did not create its route_window table")
    run_script(con, "score_write",
               {**params, "whole_context": bool(getattr(route, "whole_context", False))})
    state.record_scored(con, route_name, batch, config, cleared)


def _summary(con, config: Config, gold_version: str, windows) -> ScoreSummary:
    by_status: dict[str, dict[str, int]] = {}
    joined: dict[str, int] = {}
    if windows:
        for route in config.routes:
            span = {"route": route, "start": windows[0][0], "end": windows[-1][1]}
            by_status[route] = dict(con.execute(
                "SELECT status, count(*) FROM request_scores WHERE route = $route "
                "AND timestamp >= $start AND timestamp < $end GROUP BY status ORDER BY status",
                span).fetchall())
        cursor = con.execute(sql("gold_join_counts"), {
            "route": config.routes[0], "start": windows[0][0], "end": windows[-1][1]})
        names = [d[0] for d in cursor.description]
        joined = dict(zip(names, cursor.fetchall()[0], strict=True))
    return ScoreSummary(gold_version, config.cutoffs, config.routes, tuple(windows), by_status,
                        joined)
