"""Scoring routes: one module per kind of reference, each behind the same small interface.

A route says what it needs from a golden and, for one window, where each needed item was found
in the logged ranking. Everything else is shared and runs once per window and route
(pipeline/score.py): clearing the window's old rows, matching each request to its golden,
deciding its status (`no_gold_match`, `no_evidence`, `scored`), and turning places into
recall, precision and hit at every cutoff. So a new route is one module (and its SQL) plus one
`register` call; nothing else changes.

The interface, in the warehouse's terms. `score_window(con, params)` runs inside the window's
transaction with `params` = {route, start, end, gold_version, needs, cutoffs}. It reads the
table macro `score_matched($start, $end, $gold_version, $needs)` (sql/score_match.sql): one
row per request of the window with its golden's fields and status. It must create the temp
table `route_window`: every row of score_matched, with at least its columns request_id,
timestamp, gold_id, index_version, k, chunk_ranks and status, and two more: `needed_items`
(VARCHAR[], what the answer needed, for diagnosis) and `places` (INTEGER[], one per needed
item: its best place in the request's ranking, 1 = top, NULL when never found; NULL for a
request that is not scored). It may then write its own diagnosis rows (miss_causes) for
`route`, which the shared part clears with the window. sql/route_ids.sql is the model."""

from __future__ import annotations

from typing import Protocol

DEFAULT_ROUTE = "ids"
# Golden fields a route may name in `needs`; sql/score_match.sql judges each of them.
GOLDEN_EVIDENCE = ("gold_chunk_ids", "gold_passages", "claims", "reference")


class Route(Protocol):
    name: str                 # canonical name, stored in request_scores.route
    needs: tuple[str, ...]    # golden fields; a golden with all of them empty is not scored

    def score_window(self, con, params: dict) -> None: ...


_ROUTES: dict[str, Route] = {}


def register(route: Route) -> Route:
    """Make a route available by its name (a route registered again replaces the old one)."""
    unknown = set(route.needs) - set(GOLDEN_EVIDENCE)
    if not route.needs or unknown:
        raise ValueError(f"route {route.name!r} needs golden fields from {GOLDEN_EVIDENCE}, "
                         f"got {route.needs!r}")
    _ROUTES[route.name] = route
    return route


def unregister(name: str) -> None:
    """Forget a route registered by `register` (the built-in ones stay available)."""
    if name != DEFAULT_ROUTE:
        _ROUTES.pop(name, None)


def known_routes() -> tuple[str, ...]:
    return tuple(_ROUTES)


def get_route(name: str) -> Route:
    from pipeline.errors import RecallwatchError

    if name not in _ROUTES:
        raise RecallwatchError(
            f"route {name!r} is not available; choose one of {', '.join(_ROUTES)}.")
    return _ROUTES[name]


def _register_built_in() -> None:
    from pipeline.routes.claims import ClaimsRoute
    from pipeline.routes.ids import IdsRoute
    from pipeline.routes.passages import PassagesRoute

    register(IdsRoute())
    register(PassagesRoute())
    register(ClaimsRoute())


_register_built_in()
