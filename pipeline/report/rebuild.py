"""The report's "Before / after the rebuild" section, for one scope: for every index version
gold IDs were carried to (pipeline.rebuild), mean recall@k over the whole days just before it
went live against the whole days just after (window_sums, grain 'day', slice 'all', pooled by
summing), the interval of the difference, how the gold chunks were carried, and the goldens
whose gold chunks were not (gone or unknown). Its queries are sql/report_rebuild.sql.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import duckdb
import numpy as np

from pipeline.config import DEFAULT_ALPHA
from pipeline.drift import cr2_sums, size_histogram
from pipeline.rebuild import CARRY_HOWS
from pipeline.report.reads import rows, scalar, tables
from pipeline.report.scope import Scope
from pipeline.stats import (
    ClusterStats,
    Interval,
    adjusted_difference_interval,
    all_binary,
    bias_reduced_t_interval,
    clip_unit,
    cluster_wilson_interval,
    hybrid_difference_interval,
    no_spread,
    wilson_interval,
)
from pipeline.warehouse import queries

SIDE_DAYS = 7
NOT_CARRIED_SHOWN = 50
SIDES = ("before", "after")
METHOD = ("cluster-robust Welch (bias-reduced CR2 with Bell-McCaffrey df on a side whose "
          "sessions hold more than one request, CR1 otherwise; Satterthwaite df; Welch when no "
          "request has a session) "
          "with recalls of 0 and 1 added to each side by its size (the smaller side one of "
          "each); "
          "when every recall on a side is 0 or 1, or all are equal, the sides' own intervals "
          "combined "
          "(Newcombe's hybrid of (cluster-)Wilson intervals, the same MOVER construction for "
          "a mean and a proportion)")


def rebuild_section(con: duckdb.DuckDBPyConnection, scope: Scope,
                    served_k_text: str) -> dict | None:
    """One comparison per rebuild, oldest first — a recorded one (gold IDs carried) or any
    index version that took over from an earlier one; None when there is none (or the
    warehouse predates rebuilds) or the scope has no k. `served_k_text` is the k of the
    per-request misses of the chunks not carried."""
    if scope.k is None or not {"carried_gold_ids", "requests"} <= tables(con):
        return None
    found = rows(con, _rebuild_sql("rebuilds"))
    if not found:
        return None
    lives = sorted(row["live_from"] for row in found)
    return {"rebuilds": [
        _one_rebuild(con, scope, row, served_k_text,
                     live_window(row["live_from"],
                                 previous=max((t for t in lives if t < row["live_from"]),
                                              default=None),
                                 following=min((t for t in lives if t > row["live_from"]),
                                               default=None)))
        for row in found], "side_days": SIDE_DAYS, "method": METHOD}


def live_window(live_from: datetime, days: int = SIDE_DAYS, *,
                previous: datetime | None = None,
                following: datetime | None = None) -> dict[str, datetime]:
    """The `days` whole UTC days just before and just after an index went live. The day it
    went live in, when not at midnight, served both indexes and belongs to neither side; nor
    do the days of another index that went live before (`previous`) or after (`following`)
    within those days, so that each side holds one index's days."""
    def floor_of(t: datetime) -> datetime:
        return datetime.combine(t.date(), datetime.min.time())

    def ceil_of(t: datetime) -> datetime:
        return floor_of(t) if floor_of(t) == t else floor_of(t) + timedelta(days=1)

    floor, ceil = floor_of(live_from), ceil_of(live_from)
    before_start = floor - timedelta(days=days)
    after_end = ceil + timedelta(days=days)
    if previous is not None:
        before_start = min(max(before_start, ceil_of(previous)), floor)
    if following is not None:
        after_end = max(min(after_end, floor_of(following)), ceil)
    return {"before_start": before_start, "before_end": floor,
            "after_start": ceil, "after_end": after_end}


def _one_rebuild(con: duckdb.DuckDBPyConnection, scope: Scope, rebuild: dict,
                 served_k_text: str, window: dict[str, datetime]) -> dict:
    version = rebuild["index_version"]
    window = _served_sides(con, scope, version, window)
    found = {row["side"]: row for row in rows(
        con, _rebuild_sql("rebuild_sides"), **scope.params("route", "k", "gold_version"),
        **window)}
    sides = [_side(name, found.get(name), window) for name in SIDES]
    before, after = (found.get(name) for name in SIDES)
    difference = None
    if before and after and before["n"] and after["n"]:
        b, a = (row["recall_sum"] / row["n"] for row in (before, after))
        if _binary(before) or _binary(after):   # a proportion on at least one side
            # the sides' intervals as shown (clipped): a t-interval of a side of two requests
            # reached [-2.4, 3.7], and the difference [-2.9, 3.2]
            d = hybrid_difference_interval(b, clip_unit(_interval(before)),
                                           a, clip_unit(_interval(after)))
        else:
            d = adjusted_difference_interval(_stats(before), _stats(after), DEFAULT_ALPHA,
                                             cr2=(_cr2(before), _cr2(after)))
        # a difference of two recalls lies in [-1, 1], as drift clips its bounds
        difference = {"delta": a - b, "low": _number(np.clip(d.low, -1.0, 1.0)),
                      "high": _number(np.clip(d.high, -1.0, 1.0))}
    carried: dict = {}
    lost: list[dict] = []
    # a gold set that names one index's chunks is not carried: how its chunks compare on the
    # index of this rebuild, or, when it names this one, on each other index
    named = scalar(con, _rebuild_sql("gold_set_names"), gold_version=scope.gold_version)
    compared: dict[str, dict] = {}
    if named:
        for row in rows(con, _rebuild_sql("named_compared"), gold_version=scope.gold_version):
            if named == version or row["index_version"] == version:
                compared.setdefault(row["index_version"], {})[row["how"]] = row["chunks"]
    elif rebuild["recorded"]:
        carried = {row["how"]: row["chunks"] for row in rows(
            con, _rebuild_sql("rebuild_carried"), index_version=version,
            gold_version=scope.gold_version)}
        lost = rows(con, _rebuild_sql("rebuild_not_carried"),
                    **scope.params("route", "gold_version"), index_version=version,
                    limit=NOT_CARRIED_SHOWN)
    total = lost[0]["total"] if lost else 0
    served = scalar(con, _rebuild_sql("rebuild_served"), **scope.params("route", "gold_version"),
                    index_version=version) or 0
    n = sum(side["n"] for side in sides)
    return {
        "index_version": version,
        "live_from": rebuild["live_from"],
        "from_version": rebuild["from_version"],
        "recorded": rebuild["recorded"],
        "sides": sides,
        "difference": difference,
        "carried": [{"how": how, "chunks": carried.get(how, 0)} for how in CARRY_HOWS],
        "named": named,
        "compared": [{"index_version": index, "carried": [
                          {"how": how, "chunks": counts.get(how, 0)} for how in CARRY_HOWS]}
                     for index, counts in compared.items()],
        "not_carried": lost,
        "not_carried_more": max(0, total - len(lost)),
        "caption": scope.caption(n),
        "carried_caption": scope.caption(served, served_k_text),
    }


def _served_sides(con: duckdb.DuckDBPyConnection, scope: Scope, version: str,
                  window: dict[str, datetime]) -> dict[str, datetime]:
    """`window` with the side after ending at the first day `version` served none of, and the
    side before starting after the last day it served alone: each side holds the days of the
    index it stands for."""
    stops = rows(con, _rebuild_sql("side_bounds"), **scope.params("route", "k", "gold_version"),
                 index_version=version, **window)[0]
    window = dict(window)
    if stops["after_stop"] is not None:
        window["after_end"] = stops["after_stop"]
    if stops["before_stop"] is not None:
        window["before_start"] = stops["before_stop"] + timedelta(days=1)
    return window


def _side(name: str, row: dict | None, window: dict[str, datetime]) -> dict:
    """One side's pooled mean recall with its own interval, as the daily rows have it
    (`_interval`)."""
    start, end = window[f"{name}_start"], window[f"{name}_end"]
    # no whole day (another index went live or took over the same day): no dates to show
    side = {"side": name, "first": start.date() if end > start else None,
            "last": (end - timedelta(days=1)).date() if end > start else None,
            "days": 0, "n": 0, "n_clusters": 0, "mean": None, "low": None, "high": None}
    if row and row["n"]:
        ci = clip_unit(_interval(row))   # as window_metrics clips its rows
        side.update(days=row["days"], n=row["n"], n_clusters=row["n_clusters"],
                    mean=row["recall_sum"] / row["n"], low=_number(ci.low),
                    high=_number(ci.high))
    return side


def _binary(row: dict) -> bool:
    """Whether a side's mean gets a proportion's interval, as in window_metrics: its recalls
    are all 0 or 1, or show no spread (all equal)."""
    return bool(all_binary(row["n"], row["recall_sum"], row["full_sum"])) or bool(
        no_spread(*(row[c] for c in ("n", "recall_sum", "recall_cluster_sq",
                                     "recall_cluster_cross", "size_sq"))))


def _interval(row: dict) -> Interval:
    """Cluster-robust t with a 0 and a 1 added, as in window_metrics; (cluster-)Wilson at the
    mean when every recall is 0 or 1 (the mean is then a proportion) or all are equal."""
    cr2 = _cr2(row)
    if not _binary(row):
        return bias_reduced_t_interval(*_stats(row), *cr2, DEFAULT_ALPHA)
    if row["any_session"]:
        return cluster_wilson_interval(*_stats(row), DEFAULT_ALPHA, cr2=cr2)
    return wilson_interval(row["recall_sum"], row["n"], DEFAULT_ALPHA)


def _cr2(row: dict) -> tuple[float, ...]:
    """A side's CR2 sums at its pooled n from the days' clusters by size
    (`pipeline.drift.cr2_sums`); a max size of 0 (CR1) when a day of sessions has none."""
    hist = None if row.get("hist_missing") or row.get("size_hist") is None else \
        size_histogram(row["size_hist"], "recall", np.zeros(7))
    sums = np.nan_to_num(cr2_sums(hist, float(row["n"])))
    return tuple(float(v) for v in sums)


def _stats(row: dict) -> ClusterStats:
    return ClusterStats(row["n"], row["n_clusters"], row["recall_sum"], row["recall_cluster_sq"],
                        row["recall_cluster_cross"], row["size_sq"])


def _number(x) -> float | None:
    """A float for the template; NaN (an undefined interval) as None, shown as a dash."""
    value = float(x)
    return None if np.isnan(value) else value


def _rebuild_sql(name: str) -> str:
    """A named query of sql/report_rebuild.sql."""
    return queries("report_rebuild")[name]
