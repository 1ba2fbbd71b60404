"""run(): every step for new data — unchanged files are skipped, only windows that gained data
are rescored, a new gold version rescores everything, and the whole demo tells its story."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime

import duckdb
import pytest

from pipeline.config import put_in_force, resolve
from pipeline.run import run
from tests.conftest import golden, request, snapshot, write_jsonl


def keep_in_force(con, **settings) -> None:
    """The explicit act of the CLI's options that change what is in force."""
    put_in_force(con, resolve(con, **settings))


def scored_days(con) -> list[str]:
    return [r[0] for r in con.sql(
        "SELECT DISTINCT strftime(timestamp, '%Y-%m-%d') FROM request_scores ORDER BY 1"
    ).fetchall()]


def test_run_scores_only_windows_with_new_data(con, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    logs = tmp_path / "logs"
    write_jsonl(logs / "dt=2026-11-01" / "p.jsonl", [request("r-1", ["a"],
                                                              ts="2026-11-01T10:00:00Z")])
    first = run(con, logs=[str(logs)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1",
                report_dir=tmp_path / "report")
    assert [d.date().isoformat() for d in first.days_scored] == ["2026-11-01"]
    assert first.report.exists()
    before = snapshot(con)
    again = run(con, logs=[str(logs)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    assert again.days_scored == ()
    assert snapshot(con) == before
    write_jsonl(logs / "dt=2026-11-03" / "p.jsonl", [request("r-3", ["b"],
                                                              ts="2026-11-03T10:00:00Z")])
    third = run(con, logs=[str(logs)])
    assert [d.date().isoformat() for d in third.days_scored] == ["2026-11-03"]
    assert scored_days(con) == ["2026-11-01", "2026-11-03"]
    days = con.sql("SELECT DISTINCT window_start FROM window_metrics ORDER BY 1").fetchall()
    assert [d[0].date().isoformat() for d in days] == ["2026-11-01", "2026-11-03"]


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_a_report_directory_that_cannot_be_written_is_refused_before_any_work(
        con, tmp_path, where):
    from pipeline.errors import RecallwatchError

    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    taken = tmp_path / "taken"
    taken.write_text("not a directory\n")
    out = taken if where == "a file" else taken / "reports"
    with pytest.raises(RecallwatchError, match="cannot write the report to .*File exists"):
        run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
            gold_version="v1", report_dir=out)
    assert con.sql("SELECT count(*) FROM ingest_files").fetchall() == [(0,)]


def test_every_request_re_delivered_away_leaves_what_a_fresh_build_has(con, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    logs = tmp_path / "logs.jsonl"
    write_jsonl(logs, [request("r-1", ["a"], ts="2026-11-01T10:00:00Z"),
                       request("r-2", ["b"], ts="2026-11-02T10:00:00Z")])
    run(con, logs=[str(logs)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    assert con.sql("SELECT count(*) FROM window_metrics").fetchall()[0][0] > 0
    logs.write_text("")   # the file now holds nothing
    run(con, logs=[str(logs)])
    for table in ("requests", "request_scores", "request_cutoffs", "window_metrics",
                  "drift_events", "miss_causes"):
        assert con.sql(f"SELECT count(*) FROM {table}").fetchall() == [(0,)], table


def test_a_route_or_grain_taken_out_of_force_leaves_what_a_fresh_build_has(tmp_path):
    from pipeline import api
    from pipeline.warehouse import connect

    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"], gold_passages=["text a"])])
    logs = tmp_path / "logs.jsonl"
    write_jsonl(logs, [request(f"r-{d}", [{"chunk_id": "a", "text": "text a"}],
                               ts=f"2026-11-0{d}T10:00:00Z") for d in (1, 2, 3)])
    inputs = {"logs": [str(logs)], "gold": str(tmp_path / "gold.jsonl"), "gold_version": "v1"}
    with connect(tmp_path / "changed.duckdb") as con:
        keep_in_force(con, routes=("ids", "passages"), grains=("day", "hour"))
        run(con, **inputs)
        assert {r[0] for r in con.sql("SELECT DISTINCT route FROM request_scores").fetchall()
                } == {"ids", "passages"}
    api.configure(tmp_path / "changed.duckdb", routes=("ids",), grains=("day",))  # `config`
    with connect(tmp_path / "changed.duckdb") as con:
        run(con)
        changed = snapshot(con)
    with connect(tmp_path / "fresh.duckdb") as con:
        keep_in_force(con, routes=("ids",), grains=("day",))
        run(con, **inputs)
        assert snapshot(con) == changed


def test_new_gold_version_rescores_every_window(con, tmp_path):
    write_jsonl(tmp_path / "gold1.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "gold2.jsonl", [golden("g-1", ["a"])])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold1.jsonl"),
        gold_version="v1")
    assert con.sql("SELECT recall, gold_version FROM request_scores").fetchall() == [(0.5, "v1")]
    run(con, gold=str(tmp_path / "gold2.jsonl"), gold_version="v2")
    assert con.sql("SELECT recall, gold_version FROM request_scores").fetchall() == [(1.0, "v2")]


@pytest.mark.slow
def test_demo_runs_from_the_cli_and_tells_the_story(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "--warehouse", str(tmp_path / "w.duckdb"),
         "demo", "--dir", str(tmp_path / "world"), "--out", str(tmp_path / "report")],
        capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stderr
    assert f"report: {tmp_path / 'report' / 'report.html'}" in result.stdout
    assert ("passages route (RAGAS NonLLM, threshold 0.5): idx-v1 0.879 → 0.601, "
            "idx-v2 0.872 → 0.804 (mean recall@5, first → last day)") in result.stdout
    assert "claims route: set RECALLWATCH_JUDGE_MODEL and OPENAI_API_KEY" in result.stdout
    html = (tmp_path / "report" / "report.html").read_text()
    assert "idx-v2" in html and "<svg" in html
    con = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    daily = dict(con.sql("""
        SELECT window_start::DATE, mean_recall FROM window_metrics
        WHERE grain = 'day' AND slice = 'all' AND route = 'ids' AND k = 5
        ORDER BY 1""").fetchall())
    days = sorted(daily)
    assert len(days) == 30
    first_week = sum(daily[d] for d in days[:5]) / 5
    before_rebuild = sum(daily[d] for d in days[15:20]) / 5
    after_rebuild = sum(daily[d] for d in days[20:25]) / 5
    assert before_rebuild < first_week - 0.1  # recall falls as the index grows
    assert after_rebuild > before_rebuild + 0.1  # and recovers after the rebuild
    # the interval band excludes the other regime's level: the drop is not noise
    ci_high_day20 = con.sql("""SELECT ci_high FROM window_metrics WHERE grain = 'day'
        AND slice = 'all' AND k = 5 ORDER BY window_start LIMIT 1 OFFSET 19""").fetchall()[0][0]
    assert ci_high_day20 < daily[days[0]]
    quarantined = con.sql("SELECT count(*) FROM quarantine").fetchall()[0][0]
    assert quarantined == 5
    read, loaded = con.sql("SELECT sum(n_read), sum(n_loaded) FROM ingest_files "
                           "WHERE kind = 'logs'").fetchall()[0]
    assert read == loaded + quarantined


def test_demo_passages_route_scores_most_requests_and_tracks_the_ids_route(con, tmp_path):
    """The demo's gold passages are reworded chunk texts: the passages route finds what the
    ids route finds, so its recall falls with the growing index and recovers at the rebuild."""
    from pipeline.demo import generate_demo_world

    world = generate_demo_world(tmp_path / "world", requests_per_day=120)
    keep_in_force(con, routes=("ids", "passages"))
    run(con, logs=[str(world.logs_dir)], gold=str(world.gold_path),
        gold_version=world.gold_version,
        index=[(str(path), version) for version, path in world.index_manifests.items()])
    scored, total = con.sql("SELECT count(*) FILTER (status = 'scored'), count(*) "
                            "FROM request_scores WHERE route = 'passages'").fetchall()[0]
    assert scored / total > 0.9
    daily = {route: [mean for _, mean in con.execute(
        "SELECT window_start, mean_recall FROM window_metrics WHERE grain = 'day' "
        "AND slice = 'all' AND k = 5 AND route = $route ORDER BY 1",
        {"route": route}).fetchall()] for route in ("ids", "passages")}
    passages = daily["passages"]
    assert len(passages) == 30
    first_days, before_rebuild = sum(passages[:5]) / 5, sum(passages[15:20]) / 5
    after_rebuild = sum(passages[20:25]) / 5
    assert before_rebuild < first_days - 0.1
    assert after_rebuild > before_rebuild + 0.1
    assert max(abs(p - i) for p, i in zip(passages, daily["ids"], strict=True)) < 0.02


def day_rows(con, grain: str = "day") -> list[tuple]:
    return con.execute(
        "SELECT strftime(window_start, '%Y-%m-%d %H'), n, mean_recall FROM window_metrics "
        "WHERE grain = $g AND slice = 'all' AND k = 5 ORDER BY 1", {"g": grain}).fetchall()


def test_a_request_moved_to_another_day_leaves_no_stale_window(con, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    path = write_jsonl(tmp_path / "a.jsonl", [
        request("r1", ["a", "b"], ts="2026-11-01T10:00:00Z"),
        request("r2", ["a"], ts="2026-11-02T10:00:00Z")])
    run(con, logs=[str(path)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    write_jsonl(path, [request("r1", ["a", "b"], ts="2026-11-01T10:00:00Z"),
                       request("r2", ["a"], ts="2026-11-03T10:00:00Z")])
    run(con, logs=[str(path)])
    assert day_rows(con) == [("2026-11-01 00", 1, 1.0), ("2026-11-03 00", 1, 0.5)]
    assert scored_days(con) == ["2026-11-01", "2026-11-03"]


def test_a_day_whose_requests_were_removed_is_cleared_even_when_rescoring_all(con, tmp_path):
    write_jsonl(tmp_path / "gold1.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "gold2.jsonl", [golden("g-1", ["a"])])
    a = write_jsonl(tmp_path / "a.jsonl", [request("r1", ["a"], ts="2026-11-01T10:00:00Z")])
    b = write_jsonl(tmp_path / "b.jsonl", [request("r2", ["a"], ts="2026-11-02T10:00:00Z")])
    run(con, logs=[str(a), str(b)], gold=str(tmp_path / "gold1.jsonl"), gold_version="v1")
    write_jsonl(b, [])
    run(con, logs=[str(a), str(b)], gold=str(tmp_path / "gold2.jsonl"), gold_version="v2")
    assert day_rows(con) == [("2026-11-01 00", 1, 1.0)]
    assert con.sql("SELECT request_id, gold_version FROM request_scores").fetchall() == [
        ("r1", "v2")]


def test_new_cutoffs_rescore_every_day(con, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    a = write_jsonl(tmp_path / "a.jsonl", [request("r1", ["a"], ts="2026-11-01T10:00:00Z")])
    run(con, logs=[str(a)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    b = write_jsonl(tmp_path / "b.jsonl", [request("r2", ["b"], ts="2026-11-02T10:00:00Z")])
    summary = run(con, logs=[str(a), str(b)], cutoffs=(1, 2, 5))
    assert len(summary.days_scored) == 2
    cutoffs = con.sql("SELECT DISTINCT cutoffs FROM request_cutoffs").fetchall()
    assert cutoffs == [([1, 2, 5],)]


def test_run_keeps_hourly_metrics_current(con, tmp_path):
    from pipeline.aggregate import aggregate

    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    a = write_jsonl(tmp_path / "a.jsonl", [request("r1", ["a"], ts="2026-11-01T10:00:00Z")])
    run(con, logs=[str(a)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    keep_in_force(con, grains=("day", "hour"))  # what `aggregate --window hour` does
    aggregate(con, grain="hour")
    b = write_jsonl(tmp_path / "b.jsonl", [request("r2", ["a", "b"],
                                                   ts="2026-11-01T10:30:00Z")])
    run(con, logs=[str(a), str(b)])
    assert day_rows(con, "hour") == [("2026-11-01 10", 2, 0.75)]


def test_gold_set_or_manifest_loaded_outside_run_rescores_every_day(con, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.ingest import ingest_gold, ingest_index

    write_jsonl(tmp_path / "gold1.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "gold2.jsonl", [golden("g-1", ["a"])])
    a = write_jsonl(tmp_path / "a.jsonl", [request("r1", ["a"], ts="2026-11-01T10:00:00Z")])
    run(con, logs=[str(a)], gold=str(tmp_path / "gold1.jsonl"), gold_version="v1")
    ingest_gold(con, str(tmp_path / "gold2.jsonl"), "v2")
    b = write_jsonl(tmp_path / "b.jsonl", [request("r2", ["a"], ts="2026-11-02T10:00:00Z")])
    run(con, logs=[str(a), str(b)])
    assert con.sql("SELECT DISTINCT gold_version FROM request_scores").fetchall() == [("v2",)]
    pq.write_table(pa.table({"chunk_id": ["a"], "text": ["A"]}), tmp_path / "m.parquet")
    ingest_index(con, str(tmp_path / "m.parquet"), "idx-1")
    summary = run(con, logs=[str(a), str(b)])
    assert len(summary.days_scored) == 2  # miss causes now know the manifest on both days


def test_pass_mark_set_by_aggregate_holds_for_later_runs(con, tmp_path):
    from pipeline.aggregate import aggregate

    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    a = write_jsonl(tmp_path / "a.jsonl", [request("r1", ["a"], ts="2026-11-01T10:00:00Z")])
    run(con, logs=[str(a)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    keep_in_force(con, pass_mark=0.5)  # what `aggregate --pass-mark 0.5` does
    aggregate(con)
    b = write_jsonl(tmp_path / "b.jsonl", [request("r2", ["a"], ts="2026-11-02T10:00:00Z")])
    summary = run(con, logs=[str(a), str(b)])
    assert [d.day for d in summary.days_scored] == [2]  # no mark change, no full rescore
    marks = con.sql("SELECT DISTINCT pass_mark, pass_rate FROM window_metrics "
                    "WHERE slice = 'all' AND k = 5").fetchall()
    assert marks == [(0.5, 1.0)]


def three_days(con, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    logs = [write_jsonl(tmp_path / f"d{d}.jsonl",
                        [request(f"r{d}", ["a"], ts=f"2026-11-0{d}T10:00:00Z")])
            for d in (1, 2, 3)]
    run(con, logs=[str(p) for p in logs], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    return [str(p) for p in logs]


def test_new_cutoffs_given_to_a_windowed_score_reach_every_day_on_the_next_run(con, tmp_path):
    from pipeline.score import score

    logs = three_days(con, tmp_path)
    keep_in_force(con, cutoffs=(1, 2))  # what `score --cutoffs 1,2` does
    score(con, start=datetime(2026, 11, 2), end=datetime(2026, 11, 3))
    summary = run(con, logs=logs)
    assert [d.day for d in summary.days_scored] == [1, 3]
    assert con.sql("SELECT DISTINCT cutoffs FROM request_cutoffs").fetchall() == [([1, 2],)]
    assert con.sql("SELECT DISTINCT k FROM window_metrics ORDER BY k").fetchall() == [(1,), (2,)]


def test_a_gold_set_used_by_a_windowed_score_reaches_every_day_on_the_next_run(con, tmp_path):
    from pipeline.ingest import ingest_gold
    from pipeline.score import score

    logs = three_days(con, tmp_path)
    write_jsonl(tmp_path / "gold2.jsonl", [golden("g-1", ["a"])])
    ingest_gold(con, str(tmp_path / "gold2.jsonl"), "v2")
    score(con, start=datetime(2026, 11, 2), end=datetime(2026, 11, 3))
    run(con, logs=logs)
    assert con.sql("SELECT DISTINCT gold_version, recall FROM request_scores").fetchall() == [
        ("v2", 1.0)]


def test_a_pass_mark_given_to_score_reaches_every_day_on_the_next_run(con, tmp_path):
    from pipeline.score import score

    logs = three_days(con, tmp_path)
    keep_in_force(con, pass_mark=0.5)  # what `score --pass-mark 0.5` does
    score(con, start=datetime(2026, 11, 2), end=datetime(2026, 11, 3))
    summary = run(con, logs=logs)
    assert summary.days_scored == ()  # a pass mark needs no rescoring, only aggregation
    marks = con.sql("SELECT DISTINCT pass_mark, pass_rate FROM window_metrics").fetchall()
    assert marks == [(0.5, 1.0)]


def test_run_scores_with_the_gold_version_it_was_given(con, tmp_path):
    from pipeline.ingest import ingest_gold

    write_jsonl(tmp_path / "gold1.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "gold2.jsonl", [golden("g-1", ["a"])])
    ingest_gold(con, str(tmp_path / "gold2.jsonl"), "v2")
    a = write_jsonl(tmp_path / "a.jsonl", [request("r1", ["a"])])
    run(con, logs=[str(a)], gold=str(tmp_path / "gold1.jsonl"), gold_version="v1")
    assert con.sql("SELECT gold_version FROM request_scores").fetchall() == [("v1",)]


def test_part_day_scores_are_made_whole_by_the_next_run(con, tmp_path):
    from pipeline.aggregate import aggregate
    from pipeline.ingest import ingest_gold
    from pipeline.score import score

    logs = three_days(con, tmp_path)
    keep_in_force(con, grains=("day", "hour"))
    aggregate(con, grain="hour")
    write_jsonl(tmp_path / "gold2.jsonl", [golden("g-1", ["a"])])
    ingest_gold(con, str(tmp_path / "gold2.jsonl"), "v2")
    # only the afternoon of day 1 and the morning of day 2, with the old gold set
    keep_in_force(con, cutoffs=(1, 2))
    score(con, start=datetime(2026, 11, 1, 12), end=datetime(2026, 11, 2, 12),
          gold_version="v1")
    score(con, start=datetime(2026, 11, 3, 12), end=datetime(2026, 11, 3, 18))  # no requests
    run(con, logs=logs)
    assert con.sql("SELECT DISTINCT gold_version FROM request_scores").fetchall() == [("v2",)]
    assert con.sql("SELECT DISTINCT cutoffs FROM request_cutoffs").fetchall() == [([1, 2],)]
    hours = con.sql("SELECT strftime(window_start, '%d %H') FROM window_metrics "
                    "WHERE grain = 'hour' AND slice = 'all' AND k = 1 ORDER BY 1").fetchall()
    assert hours == [("01 10",), ("02 10",), ("03 10",)]
    from tests.conftest import snapshot
    before = snapshot(con)
    assert run(con, logs=logs).days_scored == ()
    assert snapshot(con) == before


def test_hours_left_out_by_a_partial_hourly_aggregation_are_filled_by_run(con, tmp_path):
    from pipeline.aggregate import aggregate

    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    a = write_jsonl(tmp_path / "a.jsonl", [
        request(f"r{h}", ["a"], ts=f"2026-11-01T{h:02d}:30:00Z") for h in (3, 9, 15)])
    run(con, logs=[str(a)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    keep_in_force(con, grains=("day", "hour"))
    aggregate(con, grain="hour", start=datetime(2026, 11, 1, 8), end=datetime(2026, 11, 1, 12))
    run(con, logs=[str(a)])
    hours = con.sql("SELECT hour(window_start) FROM window_metrics WHERE grain = 'hour' "
                    "AND slice = 'all' AND k = 1 ORDER BY 1").fetchall()
    assert hours == [(3,), (9,), (15,)]


def test_metrics_from_before_the_rates_method_was_recorded_are_rebuilt(tmp_path):
    from pipeline.warehouse import connect

    warehouse = tmp_path / "w.duckdb"
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    logs = [str(write_jsonl(tmp_path / f"d{d}.jsonl", [
        request(f"r{d}", ["a"], ts=f"2026-11-0{d}T10:00:00Z", session_id="s")]))
        for d in (1, 2)]
    with connect(warehouse) as con:
        run(con, logs=logs, gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
        # a warehouse written before the column existed
        con.execute("ALTER TABLE window_metrics DROP COLUMN rate_ci_method")
    with connect(warehouse) as con:
        summary = run(con, logs=logs)
        assert summary.days_scored == ()
        assert [d.day for d in summary.days_aggregated] == [1, 2]
        methods = con.sql("SELECT DISTINCT rate_ci_method FROM window_metrics").fetchall()
        assert methods == [("cluster_wilson",)]


def test_sums_from_before_the_versions_served_were_counted_are_rebuilt(tmp_path):
    from pipeline.warehouse import connect

    warehouse = tmp_path / "w.duckdb"
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    logs = [str(write_jsonl(tmp_path / f"d{d}.jsonl", [
        request(f"r{d}-{i}", ["a"], ts=f"2026-11-0{d}T1{i}:00:00Z",
                index_version="idx-2" if i == 0 else "idx-1") for i in range(3)]))
        for d in (1, 2)]
    with connect(warehouse) as con:
        run(con, logs=logs, gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
        # by name: the column added again comes last, after those added since
        every = "SELECT * FROM window_sums ORDER BY window_start, grain, slice, route, k"
        built = con.sql(every).df().to_dict("records")
        # a warehouse written before the column existed
        con.execute("ALTER TABLE window_sums DROP COLUMN version_counts")
    with connect(warehouse) as con:
        summary = run(con, logs=logs)
        assert [d.day for d in summary.days_aggregated] == [1, 2]
        assert con.sql(every).df().to_dict("records") == built
        counts = con.sql("SELECT version_counts FROM window_sums WHERE slice = 'all' AND k = 5 "
                         "AND grain = 'day' ORDER BY window_start").fetchall()
        assert counts == [({"idx-1": 2, "idx-2": 1},)] * 2


def _scheduled_days(tmp_path):
    """Eleven days of logs (6 requests a day) in dt= partitions, a gold set; days 1-10 built by
    `run` with a pinned baseline (days 4-6), then late logs of day 5 loaded by hand and day
    11 brought in as the monitor DAG's tasks do. Returns (warehouse, logs folder)."""
    from pipeline import api

    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-1", "c-2"])])
    logs = tmp_path / "logs"
    for n in range(1, 12):
        write_jsonl(logs / f"dt=2026-11-{n:02d}" / "r.jsonl", [
            request(f"r{n}-{i}", ["c-1", "c-2"][: 1 + i % 2], ts=f"2026-11-{n:02d}T1{i}:00:00Z")
            for i in range(6)])
    write_jsonl(tmp_path / "late" / "r.jsonl", [
        request(f"late{i}", [], ts=f"2026-11-05T2{i}:00:00Z") for i in range(4)])
    warehouse = tmp_path / "w.duckdb"
    api.run(warehouse, logs=[str(logs / f"dt=2026-11-{n:02d}") for n in range(1, 11)],
            gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    api.configure(warehouse, baselines={"*": "dates:2026-11-04..2026-11-07"})
    api.run(warehouse)
    api.ingest_logs(warehouse, [str(tmp_path / "late" / "r.jsonl")])
    start, end = "2026-11-11", "2026-11-12"
    api.ingest_logs(warehouse, [str(logs / "dt=2026-11-11")], start=start, end=end)
    api.score(warehouse, start, end)
    for grain in api.configure(warehouse).grains:
        api.aggregate(warehouse, start, end, grain=grain)
    return warehouse, logs


def _built_by_run(tmp_path, logs):
    from pipeline import api

    warehouse = tmp_path / "run.duckdb"
    api.run(warehouse, logs=[str(logs), str(tmp_path / "late" / "r.jsonl")],
            gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    api.configure(warehouse, baselines={"*": "dates:2026-11-04..2026-11-07"})
    api.run(warehouse)
    return warehouse


def _rows(warehouse, table):
    import duckdb as db

    with db.connect(str(warehouse), read_only=True) as con:
        return con.sql(f"SELECT * FROM {table} ORDER BY ALL").fetchall()


def test_the_dags_catch_up_judges_drift_wherever_it_lags_as_run_does(tmp_path):
    # the day 5 re-aggregated by the catch-up pooled into the pinned baseline, so the drift
    # rows of days 1-3 went too; the DAG's drift task judged from min(day 11, days caught up)
    # and left them out for good
    from pipeline import api

    warehouse, logs = _scheduled_days(tmp_path)
    done = api.catch_up(warehouse)
    assert (done["scored"], done["opened"]) == (["2026-11-05"], 0)
    built = _built_by_run(tmp_path, logs)
    for table in ("request_scores", "window_metrics", "drift_events"):
        assert _rows(warehouse, table) == _rows(built, table), table
    assert api.catch_up(warehouse) == {"scored": [], "aggregated": [], "opened": None}


def test_a_catch_up_stopped_before_drift_is_finished_by_the_next(tmp_path, monkeypatch):
    # the DAG's drift task retried after its first try died past the re-scoring: the retry
    # found nothing to re-score and judged from its own day only
    from pipeline import api
    from pipeline import run as running

    warehouse, logs = _scheduled_days(tmp_path)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(running, "drift", killed)
    with pytest.raises(KeyboardInterrupt):
        api.catch_up(warehouse)
    monkeypatch.undo()
    assert api.catch_up(warehouse)["scored"] == []
    built = _built_by_run(tmp_path, logs)
    for table in ("window_metrics", "drift_events"):
        assert _rows(warehouse, table) == _rows(built, table), table
