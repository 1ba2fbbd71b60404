"""Tests of pipeline.report.scope: which gold set and k a report shows when none is asked for,
and why; a gold set or k asked for is checked against the warehouse. Given rows in an in-memory
warehouse, expected choices."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from conftest import insert_rows

from pipeline.errors import RecallwatchError
from pipeline.report import Scope, default_gold_version, default_k, resolve_scope

START = datetime(2026, 11, 1)


def scores(route: str, gold: str | None, ks: list[int], status: str = "scored") -> list[dict]:
    return [
        {"request_id": f"{route}-{gold}-{status}-{i}", "timestamp": START + timedelta(hours=i),
         "gold_id": "g-1", "gold_version": gold, "index_version": "idx-1", "route": route,
         "k": k, "status": status}
        for i, k in enumerate(ks)
    ]


def windows(route: str, gold: str, cutoffs: list[int], days: int = 1) -> list[dict]:
    return [
        {"window_start": START + timedelta(days=d), "window_end": START + timedelta(days=d + 1),
         "grain": "day", "slice": "all", "route": route, "k": k, "gold_version": gold, "n": 4,
         "n_sessions": 4, "pass_mark": 0.7, "n_excluded": 0}
        for d in range(days) for k in cutoffs
    ]


def gold_version(name: str, seq: int) -> dict:
    return {"gold_version": name, "seq": seq, "source": f"/g/{name}.jsonl", "content_hash": name,
            "n_goldens": 1}


@pytest.mark.parametrize(("served", "cutoffs", "expected", "why"), [
    ([5, 5, 10], [1, 5, 10], 5, "most common served k"),
    ([10, 10, 5], [3, 5, 20], 5, "largest window_metrics cutoff not above the most common "
                                 "served k (10)"),
    ([2, 2], [3, 5], 3, "smallest window_metrics cutoff"),
    ([7], [], 7, "most common served k (window_metrics has no cutoff for it yet)"),
    ([], [], None, "nothing scored"),
])
def test_default_k_is_the_most_common_served_k_else_the_nearest_cutoff_below(
        con, served, cutoffs, expected, why):
    if served:
        insert_rows(con, "request_scores", scores("ids", "gs-1", served))
    # Another route's requests and windows never decide the k of this one.
    insert_rows(con, "request_scores", scores("passages", "gs-1", [50, 50, 50]))
    insert_rows(con, "window_metrics", windows("passages", "gs-1", [50]))
    if cutoffs:
        insert_rows(con, "window_metrics", windows("ids", "gs-1", cutoffs))
    assert default_k(con, "ids") == (expected, why)


def test_default_k_ignores_requests_that_were_not_scored(con):
    insert_rows(con, "request_scores", scores("ids", "gs-1", [5]))
    insert_rows(con, "request_scores", scores("ids", "gs-1", [10, 10], status="no_evidence"))
    assert default_k(con, "ids") == (5, "most common served k (window_metrics has no cutoff "
                                        "for it yet)")


def test_default_gold_set_is_the_newest_loaded_one_else_the_most_common_scored(con):
    assert default_gold_version(con, "ids") == (None, "no gold set loaded")

    insert_rows(con, "request_scores", scores("ids", "gs-scored", [5, 5]))
    insert_rows(con, "request_scores", scores("passages", "gs-other-route", [5, 5, 5]))
    assert default_gold_version(con, "ids") == (
        "gs-scored", "most common gold set among scored requests")

    insert_rows(con, "window_metrics", windows("ids", "gs-windows", [5], days=2))
    assert default_gold_version(con, "ids") == (
        "gs-windows", "most common gold set in window_metrics")

    # Loaded later (higher seq) wins, even over a gold set with more rows elsewhere.
    insert_rows(con, "gold_versions", [gold_version("gs-new", 2), gold_version("gs-old", 1)])
    assert default_gold_version(con, "ids") == (
        "gs-new", "newest loaded gold set (highest seq in gold_versions)")


def test_resolve_scope_fills_in_defaults_with_their_reasons(con):
    insert_rows(con, "gold_versions", [gold_version("gs-1", 1)])
    insert_rows(con, "request_scores", scores("ids", "gs-1", [5, 5, 10]))
    insert_rows(con, "window_metrics", windows("ids", "gs-1", [1, 5, 10]))
    scope, gold_choice, k_choice = resolve_scope(con)
    assert scope == Scope(route="ids", k=5, gold_version="gs-1")
    assert (gold_choice, k_choice) == (
        "newest loaded gold set (highest seq in gold_versions)", "most common served k")

    chosen = resolve_scope(con, k=10, gold_version="gs-1")
    assert chosen.scope == Scope(route="ids", k=10, gold_version="gs-1")
    assert (chosen.gold_choice, chosen.k_choice) == ("given", "given")


def test_resolve_scope_refuses_an_unknown_gold_set_naming_the_known_ones(con):
    insert_rows(con, "gold_versions", [gold_version("gs-1", 1)])
    insert_rows(con, "request_scores", scores("ids", "gs-scored-only", [5]))
    with pytest.raises(RecallwatchError) as raised:
        resolve_scope(con, gold_version="NOPE")
    assert str(raised.value) == (
        "gold version 'NOPE' is not in the warehouse; known: gs-1, gs-scored-only.")


def test_resolve_scope_refuses_a_k_window_metrics_does_not_hold(con):
    insert_rows(con, "window_metrics", windows("ids", "gs-1", [3, 5]))
    insert_rows(con, "window_metrics", windows("passages", "gs-1", [7]))
    with pytest.raises(RecallwatchError, match=r"--k 7 is not a scored cutoff; choose one of 3, 5"):
        resolve_scope(con, k=7)
    # A route without window metrics yet takes any k: there is nothing to check it against.
    assert resolve_scope(con, route="claims", k=7).scope.k == 7
