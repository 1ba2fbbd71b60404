"""The public library API: plain values in (a warehouse path, ISO dates), one step per call,
idempotent, and settings put in force only by `configure`."""

from __future__ import annotations

from datetime import datetime

import pytest

from pipeline import api
from pipeline.errors import RecallwatchError
from pipeline.warehouse import connect
from tests.conftest import golden, request, snapshot, write_jsonl


@pytest.fixture
def loaded(tmp_path, warehouse):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs" / "dt=2026-11-01" / "p.jsonl",
                [request("r-1", ["a"], ts="2026-11-01T10:00:00Z")])
    write_jsonl(tmp_path / "logs" / "dt=2026-11-02" / "p.jsonl",
                [request("r-2", ["a", "b"], ts="2026-11-02T10:00:00+02:00")])
    api.ingest_gold(warehouse, str(tmp_path / "gold.jsonl"), "v1")
    api.ingest_logs(warehouse, [str(tmp_path / "logs")])
    return warehouse


def test_each_step_takes_iso_dates_and_replaces_only_its_window(loaded):
    first = api.score(loaded, "2026-11-01", "2026-11-02")
    assert [w[0].day for w in first.windows] == [1]
    assert first.by_status == {"ids": {"scored": 1}}
    api.score(loaded, "2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z")
    agg = api.aggregate(loaded, "2026-11-01", "2026-11-03")
    assert (agg.start, agg.end) == (datetime(2026, 11, 1), datetime(2026, 11, 3))
    with connect(loaded, read_only=True) as con:
        before = snapshot(con)
        days = con.sql("SELECT window_start::DATE::VARCHAR, mean_recall FROM window_metrics "
                       "WHERE slice = 'all' AND k = 5 ORDER BY 1").fetchall()
    assert days == [("2026-11-01", 0.5), ("2026-11-02", 1.0)]
    api.score(loaded, "2026-11-01", "2026-11-03")
    api.aggregate(loaded, "2026-11-01", "2026-11-03")
    with connect(loaded, read_only=True) as con:
        assert snapshot(con) == before


def test_cutoffs_given_to_score_are_for_that_call_and_configure_puts_them_in_force(loaded):
    assert api.score(loaded, cutoffs=(1, 2)).cutoffs == (1, 2)
    assert api.configure(loaded).cutoffs == (1, 3, 5, 10, 20, 50, 100)
    assert api.configure(loaded, cutoffs=(2, 1), pass_mark=0.5).cutoffs == (1, 2)
    config = api.configure(loaded)
    assert (config.cutoffs, config.pass_mark, config.gold_version) == ((1, 2), 0.5, "v1")
    assert api.score(loaded).cutoffs == (1, 2)


def test_run_catches_up_and_writes_the_report(loaded, tmp_path):
    summary = api.run(loaded, report_dir=tmp_path / "report")
    assert [d.day for d in summary.days_scored] == [1, 2]
    assert summary.report.exists()
    assert api.run(loaded).days_scored == ()
    path = api.report(loaded, tmp_path / "again")
    assert "recall@" in path.read_text()


def test_bad_values_are_one_clear_error(loaded):
    with pytest.raises(RecallwatchError, match="start 'yesterday' is not an ISO date"):
        api.score(loaded, "yesterday")
    with pytest.raises(RecallwatchError, match="end 3000-01-02 is outside"):
        api.score(loaded, "2026-11-01", "3000-01-02")
    assert api.aggregate(loaded, "2999-12-31", "3000-01-01").rows == 0   # an exclusive end
    with pytest.raises(RecallwatchError, match="--pass-mark 1.5 must lie in"):
        api.configure(loaded, pass_mark=1.5)
    with pytest.raises(RecallwatchError, match="gold version 'v9' is not loaded"):
        api.score(loaded, gold_version="v9")
    # a route not in force: its scores were kept by nothing (no run rescored or retired them,
    # and aggregate and drift spread them); a subset of the routes in force is fine
    with connect(loaded, read_only=True) as con:
        before = snapshot(con)
    with pytest.raises(RecallwatchError, match="route passages is not in force .* "
                                               "config --routes ids,passages"):
        api.score(loaded, "2026-11-01", "2026-11-02", routes=("passages",))
    with connect(loaded, read_only=True) as con:
        assert snapshot(con) == before
    assert api.score(loaded, "2026-11-01", "2026-11-02", routes=("ids",)).windows
    with pytest.raises(RecallwatchError, match="--gold needs --gold-version"):
        api.run(loaded, gold="gold.jsonl")


def test_a_scheduled_interval_does_the_whole_utc_days_that_ended_in_it():
    day = {"start": "2026-11-01T00:00:00", "end": "2026-11-02T00:00:00"}
    assert api.days_ended("2026-11-01", "2026-11-02") == day              # midnight schedule
    assert api.days_ended("2026-11-01T06:00:00+00:00", "2026-11-02T06:00:00Z") == day  # 0 6 * * *
    assert api.days_ended("2026-11-01T23:00", "2026-11-02T00:00") == day  # the hour of midnight
    assert api.days_ended("2026-11-02T01:00", "2026-11-02T02:00") is None  # no day ended
    assert api.days_ended(datetime(2026, 11, 1, 3), datetime(2026, 11, 8, 3)) == {
        "start": "2026-11-01T00:00:00", "end": "2026-11-08T00:00:00"}    # weekly
    with pytest.raises(RecallwatchError, match="has no data interval: trigger it with params"):
        api.days_ended(None, "2026-11-02")
