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
request that is not scored). A route may give a request a status of its own that is not
`scored` (the text routes: `no_context_text` when none of its served chunks has a text); such a
request is counted and excluded from means like the shared ones. It may then write its own
diagnosis rows (miss_causes) for `route`, which the shared part clears with the window.
sql/route_ids.sql is the model.

Optional, for a route that needs them (the shared part reads each with its default):
- route_window column `relevant_places` (INTEGER[]): the place of each distinct logged chunk
  that holds at least one needed item; precision@c = those placed within min(c, k) / distinct
  chunks served there. Left out or NULL: the places of the found items, one chunk per item (the
  ids route, until a rebuild carries two gold chunks to one). The passages route gives it,
  since one chunk can cover several passages.
- attribute `whole_context` (bool, default False): the route reads each request's served
  context only as a whole (claims). It then measures a request only at the cutoffs whose top
  min(c, k) takes in every served chunk: below them recall_at_k has no row (not measured, never
  0), and precision is NULL (no chunk is known to hold an item).
- method `inputs_fingerprint(con, gold_version) -> str` (default ''): what else the route's
  scores depend on, recorded with each scored day (pipeline.state); a day recorded with another
  value is stale.
- attribute `rules` (str, default ''): the version of the route's scoring rules, changed by
  a release that scores the same inputs otherwise; days recorded with another version are
  stale, so the next `run` rescores them (pipeline.state.route_inputs).
- method `settle_statuses() -> tuple[str, ...]` (default none): statuses that scoring again
  now could settle (claims: not_judged and judge_failed, when a judge is configured); `run`
  rescores the days holding such rows, once per run."""

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
