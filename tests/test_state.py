"""The state owner: re-scoring a day voids exactly what was built on it, and `run` after any
single command leaves the warehouse as if that command had come before the first run."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import cli
from pipeline.config import put_in_force, resolve
from pipeline.ingest import ingest_logs
from pipeline.run import run
from pipeline.score import score
from pipeline.state import contiguous, dependents, invalidate
from pipeline.warehouse import connect
from tests.conftest import golden, request, write_jsonl

BUILT_TABLES = ("request_scores", "request_cutoffs", "miss_causes", "window_metrics",
                "score_windows")


def rows(con, table: str, where: str = "true") -> list[tuple]:
    return sorted(con.sql(f'SELECT * FROM "{table}" WHERE {where}').fetchall(), key=repr)


def three_days(con, tmp_path) -> None:
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    logs = [write_jsonl(tmp_path / f"d{d}.jsonl", [
        request(f"r{d}-1", ["a"], ts=f"2026-11-0{d}T10:00:00Z"),
        request(f"r{d}-2", ["a", "b"], ts=f"2026-11-0{d}T15:00:00Z")]) for d in (1, 2, 3)]
    run(con, logs=[str(p) for p in logs], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    put_in_force(con, resolve(con, grains=("day", "hour")))
    run(con)


def test_rescoring_a_day_invalidates_exactly_that_days_downstream_rows(con, tmp_path):
    three_days(con, tmp_path)
    day2 = "date_trunc('day', window_start) = '2026-11-02'"
    other_metrics = rows(con, "window_metrics", f"NOT ({day2})")
    other_scores = rows(con, "request_scores", "timestamp::DATE <> '2026-11-02'")
    built_on_day2 = rows(con, "window_metrics", day2)
    assert {r[2] for r in built_on_day2} == {"day", "hour"}

    score(con, start=datetime(2026, 11, 2), end=datetime(2026, 11, 3))

    assert rows(con, "window_metrics", day2) == []          # both grains of day 2 voided
    assert rows(con, "window_metrics", f"NOT ({day2})") == other_metrics
    assert rows(con, "request_scores", "timestamp::DATE <> '2026-11-02'") == other_scores
    summary = run(con)
    assert summary.days_scored == ()                       # the scores themselves are current
    assert [d.day for d in summary.days_aggregated] == [2]
    assert rows(con, "window_metrics", day2) == built_on_day2


def test_a_request_moved_to_another_day_voids_the_metrics_of_its_old_day(con, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    f1 = write_jsonl(tmp_path / "f1.jsonl", [
        request("r1", ["a", "b"], ts="2026-11-01T10:00:00Z"),
        request("r2", [], ts="2026-11-01T11:00:00Z")])
    run(con, logs=[str(f1)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    write_jsonl(f1, [request("r1", ["a", "b"], ts="2026-11-02T10:00:00Z"),
                     request("r2", [], ts="2026-11-01T11:00:00Z")])
    ingest_logs(con, [str(f1)])
    score(con, start=datetime(2026, 11, 2), end=datetime(2026, 11, 3))
    run(con)
    days = con.sql("SELECT window_start::DATE::VARCHAR, n, mean_recall FROM window_metrics "
                   "WHERE grain = 'day' AND slice = 'all' AND k = 5 ORDER BY 1").fetchall()
    assert days == [("2026-11-01", 1, 0.0), ("2026-11-02", 1, 1.0)]


def test_days_a_route_scored_under_earlier_rules_are_rescored_by_run(con, tmp_path):
    # a release that changes how a route scores the same inputs (its `rules`) leaves the days
    # an earlier release scored stale: `run` brings them to the new rules, only on that route
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"], gold_passages=["the fee"])])
    logs = write_jsonl(tmp_path / "d.jsonl", [
        request("r-1", [{"chunk_id": "a"}], ts="2026-11-01T10:00:00Z"),
        request("r-2", [{"chunk_id": "a", "text": "the fee"}], ts="2026-11-02T10:00:00Z")])
    put_in_force(con, resolve(con, routes=("ids", "passages")))
    run(con, logs=[str(logs)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    fresh = rows(con, "request_scores")
    # what the release before rules 2 wrote: r-1 a 0, recorded without a rules version
    con.execute("UPDATE request_scores SET status = 'scored', needed = 1, covered = 0, "
                "recall = 0, full_coverage = false WHERE request_id = 'r-1' "
                "AND route = 'passages'")
    con.execute("UPDATE score_windows SET route_inputs = '' WHERE route = 'passages'")
    ids_days = rows(con, "score_windows", "route = 'ids'")
    summary = run(con)
    assert [d.date().isoformat() for d in summary.days_scored] == ["2026-11-01", "2026-11-02"]
    assert rows(con, "request_scores") == fresh
    assert ("r-1", "no_context_text") in con.sql(
        "SELECT request_id, status FROM request_scores WHERE route = 'passages'").fetchall()
    assert rows(con, "score_windows", "route = 'ids'") == ids_days


def test_a_manifest_makes_stale_only_the_days_its_index_served(con, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    logs = write_jsonl(tmp_path / "d.jsonl", [
        request(f"r-{d}", ["a"], ts=f"2026-11-0{d}T10:00:00Z",
                index_version="idx-1" if d < 3 else "idx-2") for d in (1, 2, 3)])
    run(con, logs=[str(logs)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    write_jsonl(tmp_path / "idx-3.jsonl", [{"chunk_id": "a", "text": "x"}])
    write_jsonl(tmp_path / "idx-2.jsonl", [{"chunk_id": "a", "text": "x"}])

    # the next index's manifest, loaded before it serves: no day changes, none is rescored
    assert run(con, index=[(str(tmp_path / "idx-3.jsonl"), "idx-3")]).days_scored == ()
    # the manifest of the index that served day 3: that day alone, and its miss cause changes
    summary = run(con, index=[(str(tmp_path / "idx-2.jsonl"), "idx-2")])
    assert [d.date().isoformat() for d in summary.days_scored] == ["2026-11-03"]
    assert con.sql("SELECT request_id, cause FROM miss_causes ORDER BY 1").fetchall() == [
        ("r-1", "not_retrieved"), ("r-2", "not_retrieved"), ("r-3", "not_in_index")]
    assert run(con).days_scored == ()


def test_contiguous_days_become_ranges():
    days = [datetime(2026, 11, d) for d in (1, 2, 3, 5, 7, 8)]
    assert [(a.day, b.day) for a, b in contiguous(days)] == [(1, 4), (5, 6), (7, 9)]


def test_each_step_is_built_on_the_one_before():
    assert [s.name for s in dependents("ingest")] == ["score"]
    assert [s.name for s in dependents("score")] == ["aggregate"]
    assert [s.name for s in dependents("aggregate")] == ["drift"]
    assert dependents("drift") == []


def test_invalidating_clears_only_the_given_days_and_route(con, tmp_path):
    three_days(con, tmp_path)
    before = rows(con, "window_metrics")
    invalidate(con, "score", [datetime(2026, 11, 1)], "other-route")
    assert rows(con, "window_metrics") == before
    invalidate(con, "score", [datetime(2026, 11, 1), datetime(2026, 11, 3)], "ids")
    left = {r[0].day for r in rows(con, "window_metrics")}
    assert left == {2}


# ------------------------------------------------------------- run after any single command

def setup_inputs(tmp_path) -> list[list[str]]:
    write_jsonl(tmp_path / "gold1.jsonl", [golden("g-1", ["a", "b", "c"]),
                                           golden("g-2", ["d"], question="other question")])
    write_jsonl(tmp_path / "gold2.jsonl", [golden("g-1", ["a"]), golden("g-2", ["d", "e"])])
    pq.write_table(pa.table({"chunk_id": ["a", "b", "d"], "text": ["A", "B", "D"]}),
                   tmp_path / "manifest.parquet")
    for day in (1, 2, 3):
        write_jsonl(tmp_path / "logs" / f"dt=2026-11-0{day}" / "p.jsonl", [
            request(f"r{day}-1", ["a", "x", "b"], ts=f"2026-11-0{day}T09:00:00Z",
                    session_id=f"s{day}"),
            request(f"r{day}-2", ["x", "d", "c"], ts=f"2026-11-0{day}T13:00:00Z",
                    gold_id="g-2", k=1, session_id=f"s{day}"),
            request(f"r{day}-3", ["c"], ts=f"2026-11-0{day}T20:00:00Z", gold_id=None,
                    query="other question")])
    return [["ingest", "gold", tmp_path / "gold1.jsonl", "--version", "v1"],
            ["ingest", "logs", tmp_path / "logs"]]


def rewrite_day_two(tmp_path) -> list[str]:
    # r2-1 moves to day 3, r2-2 changes its ranking, r2-3 is gone
    write_jsonl(tmp_path / "logs" / "dt=2026-11-02" / "p.jsonl", [
        request("r2-1", ["a", "x", "b"], ts="2026-11-03T09:30:00Z", session_id="s2"),
        request("r2-2", ["d"], ts="2026-11-02T13:00:00Z", gold_id="g-2", session_id="s2")])
    return ["ingest", "logs", tmp_path / "logs"]


def rerank_day_two(tmp_path) -> list[str]:
    # the same requests on the same day, one of them with another ranking
    write_jsonl(tmp_path / "logs" / "dt=2026-11-02" / "p.jsonl", [
        request("r2-1", ["a", "x", "b"], ts="2026-11-02T09:00:00Z", session_id="s2"),
        request("r2-2", ["d"], ts="2026-11-02T13:00:00Z", gold_id="g-2", k=1, session_id="s2"),
        request("r2-3", ["c"], ts="2026-11-02T20:00:00Z", gold_id=None, query="other question")])
    return ["ingest", "logs", tmp_path / "logs"]


COMMANDS = {
    "new gold set": lambda p: [["ingest", "gold", p / "gold2.jsonl", "--version", "v2"]],
    "new manifest": lambda p: [["ingest", "index", p / "manifest.parquet",
                                "--version", "idx-1"]],
    "new cutoffs": lambda p: [["config", "--cutoffs", "1,2,3"]],
    "new cutoffs on a windowed score": lambda p: [
        ["score", "--cutoffs", "1,2", "--start", "2026-11-02T06:00", "--end", "2026-11-02T18:00"]],
    "new pass mark": lambda p: [["aggregate", "--pass-mark", "0.4"]],
    "hourly metrics of part of a day": lambda p: [
        ["aggregate", "--window", "hour", "--start", "2026-11-01T08:00",
         "--end", "2026-11-01T12:00"]],
    "re-ingested file, requests moved and removed": lambda p: [rewrite_day_two(p)],
    "re-ingested file, a ranking changed": lambda p: [rerank_day_two(p)],
    "old gold set on a windowed score": lambda p: [
        ["ingest", "gold", p / "gold2.jsonl", "--version", "v2"],
        ["score", "--gold-version", "v1", "--start", "2026-11-03", "--end", "2026-11-04"]],
}


def cli_run(warehouse, *args) -> None:
    code = cli.main(["--warehouse", str(warehouse), *map(str, args)])
    assert code == 0, args


def built(warehouse) -> dict[str, list[tuple]]:
    with connect(warehouse, read_only=True) as con:
        return {table: rows(con, table) for table in BUILT_TABLES}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_run_after_any_single_command_matches_a_fresh_build(tmp_path, command, capsys):
    inputs = tmp_path / "inputs"
    caught_up, fresh = tmp_path / "caught-up.duckdb", tmp_path / "fresh.duckdb"
    for step in setup_inputs(inputs):
        cli_run(caught_up, *step)
        cli_run(fresh, *step)
    cli_run(caught_up, "run", "--out", "")
    for step in COMMANDS[command](inputs):
        cli_run(caught_up, *step)
        cli_run(fresh, *step)
    cli_run(caught_up, "run", "--out", "")
    cli_run(fresh, "run", "--out", "")
    capsys.readouterr()
    assert built(caught_up) == built(fresh)
    with connect(caught_up, read_only=True) as con:
        assert con.sql("SELECT count(*) FROM request_scores").fetchall()[0][0] > 0


def test_a_changed_day_inside_a_pinned_baseline_re_judges_the_windows_before_it(tmp_path):
    # days 1-3 are judged against the baseline of days 3-5: day 4 emptied reaches them
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    logs = tmp_path / "logs"
    for d in range(1, 5):
        write_jsonl(logs / f"dt=2026-11-0{d}" / "p.jsonl", [
            request(f"r{d}-{i}", ["a", "b"] if (d + i) % 3 else ["a"],
                    ts=f"2026-11-0{d}T{10 + i}:00:00Z") for i in range(6)])
    pinned = {"baselines": {"*": "dates:2026-11-03..2026-11-05"}, "drift_mode": "fixed"}
    changed, fresh = tmp_path / "changed.duckdb", tmp_path / "fresh.duckdb"
    with connect(changed) as con:
        put_in_force(con, resolve(con, **pinned))
        run(con, logs=[str(logs)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
        (logs / "dt=2026-11-04" / "p.jsonl").write_text("")   # the last day is gone
        run(con, logs=[str(logs)])
    with connect(fresh) as con:
        put_in_force(con, resolve(con, **pinned))
        run(con, logs=[str(logs)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    events = {}
    for name, path in (("changed", changed), ("fresh", fresh)):
        with connect(path, read_only=True) as con:
            events[name] = rows(con, "drift_events")
    assert events["changed"] == events["fresh"]


def test_a_day_aggregated_with_a_t_interval_on_recalls_of_0_or_1_is_re_aggregated(con, tmp_path):
    # an earlier release put a t-interval on a mean of 0s and 1s ([1, 1] when all were found),
    # and on recalls all equal (day 3: [0.5, 0.5]); the next run gives those days the
    # proportion's interval, and leaves the others alone
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"]), golden("g-2", ["a", "b"],
                                                                      question="q2")])
    logs = write_jsonl(tmp_path / "d.jsonl", [
        request("r1-1", ["a"], ts="2026-11-01T10:00:00Z"),
        request("r1-2", ["a"], ts="2026-11-01T11:00:00Z"),
        request("r2-1", ["a"], ts="2026-11-02T10:00:00Z", gold_id="g-2"),
        request("r2-2", ["a", "b"], ts="2026-11-02T11:00:00Z", gold_id="g-2"),
        request("r3-1", ["a"], ts="2026-11-03T10:00:00Z", gold_id="g-2"),
        request("r3-2", ["b"], ts="2026-11-03T11:00:00Z", gold_id="g-2")])
    run(con, logs=[str(logs)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    current = rows(con, "window_metrics")
    days = "window_start IN ('2026-11-01', '2026-11-03') AND grain = 'day' AND k = 5"
    assert con.sql(f"SELECT window_start::DATE::VARCHAR, mean_recall, ci_method "
                   f"FROM window_metrics WHERE {days} AND slice = 'all' ORDER BY 1").fetchall() \
        == [("2026-11-01", 1.0, "wilson"), ("2026-11-03", 0.5, "wilson")]
    con.execute(f"UPDATE window_metrics SET ci_method = 't', ci_low = mean_recall, "
                f"ci_high = mean_recall WHERE {days}")
    summary = run(con)
    assert [d.day for d in summary.days_aggregated] == [1, 3]
    assert rows(con, "window_metrics") == current


def test_a_day_whose_mean_has_an_earlier_releases_t_interval_is_re_aggregated(con, tmp_path):
    # the t-interval of the recalls alone (`t`, `cluster_t`) is too narrow on small skewed
    # windows; the next run gives every such day the interval with a 0 and a 1 added
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    logs = write_jsonl(tmp_path / "d.jsonl", [
        request(f"r{day}-{i}", ["a", "b"][: 1 + (i % 2)], ts=f"2026-11-0{day}T1{i}:00:00Z",
                **({"session_id": f"s{i // 3}"} if day == 2 else {}))
        for day in (1, 2, 3) for i in range(4)])
    run(con, logs=[str(logs)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
    current = rows(con, "window_metrics")
    assert con.sql("SELECT DISTINCT ci_method FROM window_metrics WHERE k = 5 "
                   "ORDER BY 1").fetchall() == [("adjusted_t",), ("cluster_adjusted_t",)]
    con.execute("UPDATE window_metrics SET ci_method = replace(ci_method, 'adjusted_t', 't'), "
                "ci_low = mean_recall - 0.01, ci_high = mean_recall + 0.01 "
                "WHERE window_start < '2026-11-03'")
    summary = run(con)
    assert [d.day for d in summary.days_aggregated] == [1, 2]
    assert rows(con, "window_metrics") == current


def test_a_warehouse_keyed_by_an_earlier_release_is_keyed_again_and_its_days_rescored(tmp_path):
    import unicodedata

    def key_1(text):   # the earlier key: no NFKC after casefolding
        return " ".join(unicodedata.normalize("NFKC", text).casefold().split())

    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"], question="το \u0390")])
    logs = write_jsonl(tmp_path / "d.jsonl", [
        request("r-1", ["a"], gold_id=None, query="ΤΟ \u03aa\u0301", ts="2026-11-01T10:00:00Z"),
        request("r-2", ["a"], ts="2026-11-02T10:00:00Z")])
    path = tmp_path / "w.duckdb"
    with connect(path) as con:   # as an earlier release left it: keys 1, r-1 unmatched
        run(con, logs=[str(logs)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
        con.create_function("key_1", key_1, ["VARCHAR"], "VARCHAR")
        con.execute("UPDATE requests SET query_norm = key_1(query) WHERE query_norm IS NOT NULL")
        con.execute("UPDATE goldens SET question_norm = key_1(question)")
        con.execute("DELETE FROM settings WHERE name = 'text_key'")
        score(con, start=datetime(2026, 11, 1), end=datetime(2026, 11, 2))
        run(con)
        assert con.sql("SELECT status FROM request_scores WHERE request_id = 'r-1'"
                       ).fetchall() == [("no_gold_match",)]
    with connect(path) as con:
        summary = run(con)
        assert [d.day for d in summary.days_scored] == [1]   # r-2's day stays as it was
        assert con.sql("SELECT status, gold_id FROM request_scores WHERE request_id = 'r-1'"
                       ).fetchall() == [("scored", "g-1")]
        assert con.sql("SELECT value FROM settings WHERE name = 'text_key'").fetchall() == [
            ("2",)]


def _run_a_day_one_session_dominates(con, tmp_path) -> None:
    """Two days of 7 requests run: day 1 without sessions, day 2 with one session of 4."""
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    logs = write_jsonl(tmp_path / "d.jsonl", [
        request(f"r{day}-{i}", ["a", "b"][: 1 + (i % 2)], ts=f"2026-11-0{day}T1{i}:00:00Z",
                **({"session_id": "s0" if i < 4 else f"s{i}"} if day == 2 else {}))
        for day in (1, 2) for i in range(7)])
    run(con, logs=[str(logs)], gold=str(tmp_path / "gold.jsonl"), gold_version="v1")


def test_a_day_with_sessions_aggregated_with_cr1_is_re_aggregated(con, tmp_path):
    # an earlier release put the CR1 interval (G - 1 degrees of freedom) on a window whose
    # sessions hold more than one request, too narrow when one of them dominates; the next run
    # gives such days the bias-reduced one, and leaves days without such sessions alone
    _run_a_day_one_session_dominates(con, tmp_path)
    current = rows(con, "window_metrics")
    con.execute("UPDATE window_sums SET cr2_size_sq = NULL")
    con.execute("UPDATE window_metrics SET ci_low = mean_recall - 0.01, "
                "ci_high = mean_recall + 0.01")
    summary = run(con)
    assert [d.day for d in summary.days_aggregated] == [2]
    assert rows(con, "window_metrics", "window_start >= '2026-11-02'") == [
        row for row in current if row[0] >= datetime(2026, 11, 2)]


def test_a_day_with_sessions_without_a_size_histogram_is_re_aggregated(con, tmp_path):
    # drift pools CR2 sums from window_sums.size_hist; an earlier release kept none, and the
    # next run re-aggregates the days whose sessions hold more than one request (a day of
    # single requests has its clusters in its sums) and judges their drift again
    _run_a_day_one_session_dominates(con, tmp_path)
    sums = con.sql("SELECT * FROM window_sums ORDER BY ALL").fetchall()
    con.execute("UPDATE window_sums SET size_hist = NULL")
    summary = run(con)
    assert [d.day for d in summary.days_aggregated] == [2]
    assert con.sql("SELECT count(*) FROM window_sums WHERE size_hist IS NULL").fetchall() == [
        (sum(1 for row in sums if row[0] < datetime(2026, 11, 2)),)]
    got = con.sql("SELECT * FROM window_sums WHERE window_start >= '2026-11-02' ORDER BY ALL"
                  ).fetchall()
    assert got == [row for row in sums if row[0] >= datetime(2026, 11, 2)]


def test_a_route_scored_only_in_part_and_taken_out_of_force_leaves_no_rows(tmp_path, capsys):
    # passages scored on half a day has scores but no record of a day scored whole: taking
    # the route out of force left them, and `run` aggregated and judged them as if in force
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"], gold_passages=["the fee"])])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r{d}-{h}", [{"chunk_id": "a", "text": "the fee"}],
                ts=f"2026-11-0{d}T{h:02d}:00:00Z") for d in (1, 2) for h in (9, 15)])
    changed, fresh = tmp_path / "changed.duckdb", tmp_path / "fresh.duckdb"
    for path in (changed, fresh):
        cli_run(path, "run", "--logs", tmp_path / "logs.jsonl", "--gold", tmp_path / "gold.jsonl",
                "--gold-version", "v1", "--out", "")
    cli_run(changed, "config", "--routes", "ids,passages")
    cli_run(changed, "score", "--start", "2026-11-01T00:00", "--end", "2026-11-01T12:00")
    cli_run(changed, "config", "--routes", "ids")
    cli_run(changed, "run", "--out", "")
    capsys.readouterr()
    with connect(changed, read_only=True) as con:
        assert con.sql("SELECT DISTINCT route FROM request_scores").fetchall() == [("ids",)]
        assert con.sql("SELECT count(*) FROM drift_events WHERE route = 'passages'"
                       ).fetchall() == [(0,)]
    assert built(changed) == built(fresh)
