"""Tests of pipeline.report.summary: the per-index-version table the CLI prints after a run,
read at the scope's route and k from daily window metrics. Given rows, expected rows."""

from __future__ import annotations

from datetime import datetime, timedelta

from pipeline.report import Scope, index_version_summary

START = datetime(2026, 11, 1)


def day(d: int, recall: float, *, versions=("idx-1",), route="ids", k=5, gold="gs-1", n=10,
        size=1000, slice_="all", grain="day") -> dict:
    return {"window_start": START + timedelta(days=d), "window_end": START + timedelta(days=d + 1),
            "grain": grain, "slice": slice_, "route": route, "k": k, "gold_version": gold,
            "n": n, "n_sessions": n, "mean_recall": recall, "pass_mark": 0.7,
            "index_versions": list(versions), "max_index_size": size, "n_excluded": 0}


def insert_days(con, rows: list[dict]) -> None:
    columns = list(rows[0])
    con.executemany(
        f"INSERT INTO window_metrics ({', '.join(columns)}) "
        f"VALUES ({', '.join('$' + c for c in columns)})",
        rows,
    )


def version_day(d: int, recall: float, version: str = "idx-1", **kwargs) -> dict:
    """A day of one index version's own slice."""
    return day(d, recall, versions=(version,), slice_=f"index_version={version}", **kwargs)


def test_one_row_per_index_version_with_first_last_and_lowest_day(con):
    insert_days(con, [
        version_day(0, 0.90, size=100), version_day(1, 0.80, size=120),
        version_day(2, 0.85, size=110),
        # The rebuild day mixes versions: each version's own requests count for it.
        version_day(3, 0.60, n=4), version_day(3, 0.65, "idx-2", n=6, size=150),
        version_day(4, 0.50, "idx-2", size=200, n=7),
        version_day(5, 0.70, "idx-2", size=190),
        # Not the headline: slice 'all', other cutoffs, tags and grains, and an empty day.
        day(0, 0.10), version_day(0, 0.10, k=10), day(0, 0.10, slice_="tenant=acme"),
        version_day(0, 0.10, grain="hour"), version_day(6, 0.0, "idx-2", n=0),
    ])
    rows = index_version_summary(con, Scope(route="ids", k=5, gold_version="gs-1"))
    assert rows == [
        {"index_version": "idx-1", "gold_version": "gs-1", "days": 4, "n": 34,
         "first_recall": 0.90, "last_recall": 0.60, "lowest": 0.60, "index_size": 1000},
        {"index_version": "idx-2", "gold_version": "gs-1", "days": 3, "n": 23,
         "first_recall": 0.65, "last_recall": 0.70, "lowest": 0.50, "index_size": 200},
    ]
    assert all(type(row["n"]) is int for row in rows)


def test_days_that_all_mix_two_versions_still_give_a_row_per_version(con):
    # a canary: every day serves both versions
    insert_days(con, [
        row for d in range(3) for row in (
            day(d, 0.8, versions=("blue", "green")), version_day(d, 0.9 - d / 10, "blue"),
            version_day(d, 0.7, "green"))])
    rows = index_version_summary(con, Scope(route="ids", k=5, gold_version="gs-1"))
    assert [(r["index_version"], r["days"], r["last_recall"]) for r in rows] == [
        ("blue", 3, 0.7), ("green", 3, 0.7)]


def test_rows_follow_the_scope_route_and_list_every_gold_set(con):
    insert_days(con, [
        version_day(0, 0.9, gold="gs-old"), version_day(1, 0.8, gold="gs-new"),
        version_day(0, 0.4, "idx-p", route="passages"),
    ])
    ids = index_version_summary(con, Scope(route="ids", k=5, gold_version="gs-new"))
    assert [(r["index_version"], r["gold_version"]) for r in ids] == [
        ("idx-1", "gs-old"), ("idx-1", "gs-new")]
    passages = index_version_summary(con, Scope(route="passages", k=5, gold_version="gs-new"))
    assert [(r["index_version"], r["first_recall"]) for r in passages] == [("idx-p", 0.4)]


def test_nothing_scored_gives_no_rows(con):
    assert index_version_summary(con, Scope(route="ids", k=None, gold_version=None)) == []
    assert index_version_summary(con, Scope(route="ids", k=5, gold_version=None)) == []
