"""The scope of a report: one route, one cutoff k and one gold-set version, decided here and
nowhere else. A value asked for is checked against the warehouse (a gold set it knows, a k that
window_metrics holds); a value not asked for gets a default with the reason it was chosen, which
the report prints beside it. Every figure quotes the scope in its caption, because a recall
without its k, route and gold set describes nothing anyone can check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import duckdb

from pipeline.alerts import printable
from pipeline.errors import RecallwatchError
from pipeline.report.reads import rows, scalar, tables
from pipeline.routes import DEFAULT_ROUTE
from pipeline.warehouse import queries

GIVEN = "given"
# The reason default_k gives when the headline k is the one most requests were served with.
SERVED_K_CHOICE = "most common served k"
# what each route counts as needed (miss_causes.chunk_id names a passage as 'passage N')
ROUTE_ITEMS = {"ids": "gold chunks", "passages": "gold passages", "claims": "claims"}


@dataclass(frozen=True)
class Scope:
    route: str
    k: int | None
    gold_version: str | None

    def params(self, *names: str) -> dict:
        """The named query parameters of this scope, e.g. params("route", "gold_version")."""
        values = {"route": self.route, "k": self.k, "gold_version": self.gold_version}
        return {name: values[name] for name in names}

    @property
    def items(self) -> str:
        """What the route counts as needed: the words for its misses."""
        return ROUTE_ITEMS.get(self.route, "gold items")

    def caption(self, n: int, k_text: str | None = None) -> dict:
        """What every figure states beside it: k, route, gold-set version and n."""
        return {
            "k": "" if self.k is None else self.k,
            "k_text": k_text if k_text is not None else str(self.k),
            "route": self.route,
            "gold_version": self.gold_version or "none",
            "n": n,
        }


class ScopeChoice(NamedTuple):
    """A resolved scope and why its gold set and k were chosen ("given" when asked for)."""
    scope: Scope
    gold_choice: str
    k_choice: str


def default_route(con: duckdb.DuckDBPyConnection) -> str:
    """The route a report shows when none is asked for: the first of the routes in force
    (`config --routes`; ids unless another was put first) that window_metrics holds a scored
    request of, else the first in force; so a warehouse scored only on the passages route is
    reported on it, also beside an ids route its gold set gives no chunk IDs to, never as if
    nothing were scored."""
    present = tables(con)
    stored = (scalar(con, "SELECT value FROM settings WHERE name = 'routes'")
              if "settings" in present else None)
    routes = stored.split(",") if stored else [DEFAULT_ROUTE]
    if "window_metrics" in present:
        scored = {row["route"] for row in rows(con, _scope_sql("scored_routes"))}
        routes = [r for r in routes if r in scored] + routes
    return routes[0]


def resolve_scope(con: duckdb.DuckDBPyConnection, *, route: str | None = None,
                  k: int | None = None, gold_version: str | None = None) -> ScopeChoice:
    """The report's scope: a given gold set must be known to the warehouse and a given k must
    be a cutoff window_metrics holds for the route (any k while it holds none); what is not
    given gets its default (`default_route`, `default_gold_version`, `default_k`)."""
    if route is None:
        route = default_route(con)
    gold_choice = GIVEN
    if gold_version is None:
        gold_version, gold_choice = default_gold_version(con, route)
    else:
        known = [row["gold_version"] for row in rows(con, _scope_sql("known_gold_versions"))]
        if gold_version not in known:
            raise RecallwatchError(
                f"gold version {gold_version!r} is not in the warehouse; known: "
                f"{', '.join(map(printable, known)) or 'none'}.")
    k_choice = GIVEN
    if k is None:
        k, k_choice = default_k(con, route)
    else:
        cutoffs = [row["k"] for row in rows(con, _scope_sql("window_cutoffs"), route=route)]
        if cutoffs and k not in cutoffs:
            raise RecallwatchError(
                f"--k {k} is not a scored cutoff; choose one of {', '.join(map(str, cutoffs))} "
                "(or score with --cutoffs including it).")
    return ScopeChoice(Scope(route=route, k=k, gold_version=gold_version), gold_choice, k_choice)


def default_gold_version(con: duckdb.DuckDBPyConnection, route: str) -> tuple[str | None, str]:
    """The gold set a report shows when none is asked for, and why it was chosen: the newest
    loaded (highest seq in gold_versions), else the most common in window_metrics, else the most
    common among the route's scored requests."""
    if "gold_versions" in tables(con):
        newest = scalar(con, _scope_sql("newest_gold_version"))
        if newest is not None:
            return newest, "newest loaded gold set (highest seq in gold_versions)"
    common = scalar(con, _scope_sql("common_gold_version"))
    if common is not None:
        return common, "most common gold set in window_metrics"
    scored = scalar(con, _scope_sql("scored_gold_version"), route=route)
    if scored is not None:
        return scored, "most common gold set among scored requests"
    return None, "no gold set loaded"


def default_k(con: duckdb.DuckDBPyConnection, route: str) -> tuple[int | None, str]:
    """The headline cutoff when none is asked for, and why: the most common served k of scored
    requests if window_metrics has it, else the largest window_metrics cutoff below it, else the
    smallest."""
    served = scalar(con, _scope_sql("common_served_k"), route=route)
    cutoffs = [row["k"] for row in rows(con, _scope_sql("window_cutoffs"), route=route)]
    if not cutoffs:
        if served is None:
            return None, "nothing scored"
        return served, f"{SERVED_K_CHOICE} (window_metrics has no cutoff for it yet)"
    if served in cutoffs:
        return served, SERVED_K_CHOICE
    below = [k for k in cutoffs if served is not None and k <= served]
    if below:
        return max(below), (
            f"largest window_metrics cutoff not above the most common served k ({served})"
        )
    return cutoffs[0], "smallest window_metrics cutoff"


def _scope_sql(name: str) -> str:
    """A named query of sql/report_scope.sql."""
    return queries("report_scope")[name]
