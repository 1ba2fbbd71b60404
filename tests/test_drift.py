"""Tests for pipeline.drift on real warehouses: the demo world's decline is flagged before the
rebuild and resolved after it, re-running changes nothing, re-aggregating a day voids drift from
that day on, baselines (first, trailing, pinned, re-baselined) and small windows behave as the
README says. Statistical properties by simulation are in test_drift_sim.py."""

from __future__ import annotations

import random
import shutil
from datetime import date, datetime, timedelta

import numpy as np
import pytest
from conftest import golden, graded_world, request, snapshot, write_jsonl

from pipeline import api
from pipeline import drift as drift_module
from pipeline.config import Baseline, parse_baseline, put_in_force, resolve
from pipeline.demo import generate_demo_world
from pipeline.drift import RULES, drift
from pipeline.errors import RecallwatchError
from pipeline.run import run
from pipeline.state import invalidate, stale_drift
from pipeline.warehouse import connect, run_script


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo world, run once (ingest, score, aggregate, drift) into a warehouse file."""
    root = tmp_path_factory.mktemp("drift-demo")
    world = generate_demo_world(root / "world")
    path = root / "demo.duckdb"
    api.run(path, logs=[str(world.logs_dir)], gold=str(world.gold_path),
            gold_version=world.gold_version,
            index=[(str(p), v) for v, p in world.index_manifests.items()])
    return path, world


@pytest.fixture
def demo_copy(demo, tmp_path):
    path, world = demo
    copy = tmp_path / "copy.duckdb"
    shutil.copy(path, copy)
    con = connect(copy)
    yield con, world
    con.close()


def episode_days(con, *, k: int = 5, metric: str = "mean_recall", slice_: str = "all"):
    return con.execute(
        "SELECT window_start::DATE, decision, state, baseline_start::DATE FROM drift_events "
        "WHERE grain = 'day' AND slice = $s AND k = $k AND metric = $m ORDER BY window_start",
        {"s": slice_, "k": k, "m": metric}).fetchall()


@pytest.mark.slow
@pytest.mark.parametrize("k", [5, 10])
def test_demo_decline_opens_a_drop_on_slice_all_before_the_rebuild_and_resolves_after(demo, k):
    path, world = demo
    with connect(path, read_only=True) as con:
        rows = episode_days(con, k=k)
    opened = [day for day, decision, st, _ in rows if st == "opened"]
    resolved = [day for day, _, st, _ in rows if st == "resolved"]
    assert opened and opened[0] < world.rebuild_day
    assert [d for d, decision, st, _ in rows if st == "opened"][0] in [
        d for d, decision, _, _ in rows if decision == "drop"]
    first_resolution = min(d for d in resolved if d > opened[0])
    assert first_resolution >= world.rebuild_day
    # the first week is the baseline; every window between opening and resolution is ongoing
    assert [decision for _, decision, _, _ in rows[:7]] == ["baseline"] * 7
    between = [st for day, _, st, _ in rows if opened[0] < day < first_resolution]
    assert between and set(between) == {"ongoing"}
    with connect(path, read_only=True) as con:
        assert_flagged_only_beyond_the_margin(con)


@pytest.mark.slow
@pytest.mark.slow
def test_demo_drift_intervals_never_cross(demo):
    path, _ = demo
    with connect(path, read_only=True) as con:
        assert_intervals_never_cross(con)


def test_rerunning_drift_changes_no_row(demo_copy):
    con, _ = demo_copy
    before = snapshot(con)
    summary = drift(con)
    assert not summary.changed
    assert snapshot(con) == before
    assert not stale_drift(con, resolve(con))


@pytest.mark.slow
def test_reaggregating_a_day_voids_drift_from_that_day_on_and_run_rebuilds_it(demo_copy):
    con, _ = demo_copy
    before = con.sql("SELECT * FROM drift_events ORDER BY ALL").fetchall()
    day = datetime(2026, 10, 12)
    invalidate(con, "aggregate", [day])
    left = con.sql("SELECT max(window_start) FROM drift_events").fetchall()[0][0]
    assert left < day
    assert con.sql("SELECT count(*) FROM drift_events WHERE window_start < '2026-10-12'"
                   ).fetchall()[0][0] == sum(1 for r in before if r[0] < day)
    assert stale_drift(con, resolve(con))
    run(con)
    assert con.sql("SELECT * FROM drift_events ORDER BY ALL").fetchall() == before


@pytest.mark.slow
def test_fixed_look_mode_flags_the_demo_decline_too(demo_copy):
    con, world = demo_copy
    put_in_force(con, resolve(con, drift_mode="fixed"))
    assert stale_drift(con, resolve(con))
    drift(con)
    rows = episode_days(con)
    assert any(st == "opened" and day < world.rebuild_day for day, _, st, _ in rows)
    methods = {m for (m,) in con.sql("SELECT DISTINCT method FROM drift_events "
                                     "WHERE decision NOT IN ('baseline')").fetchall()}
    assert methods <= {"welch_adjusted_cluster", "newcombe_cluster_wilson"}
    assert_flagged_only_beyond_the_margin(con)


def assert_flagged_only_beyond_the_margin(con):
    """Every drop lies wholly below -margin and every rise above +margin; and where a window's
    slices are a family of one, the interval rule alone decides (BH/e-BH change nothing)."""
    wrong = con.sql("""
        SELECT count(*) FROM drift_events
        WHERE (decision = 'drop' AND NOT delta_high <= -margin)
           OR (decision = 'rise' AND NOT delta_low >= margin)""").fetchall()[0][0]
    assert wrong == 0
    lone = con.sql("""
        SELECT decision, delta_low, delta_high, margin, delta FROM drift_events d
        WHERE decision IN ('drop', 'rise', 'stable') AND state = 'none'
          AND (SELECT count(*) FROM drift_events e WHERE e.window_start = d.window_start
               AND e.route = d.route AND e.k = d.k AND e.gold_version = d.gold_version
               AND e.metric = d.metric AND e.delta IS NOT NULL) = 1""").fetchall()
    for decision, low, high, margin, delta in lone:
        beyond = (high < -margin and delta < 0) or (low > margin and delta > 0)
        assert (decision != "stable") == beyond


@pytest.mark.slow
def test_rebaseline_ends_the_open_episode_and_restarts_the_baseline_on_that_day(demo_copy):
    con, world = demo_copy
    put_in_force(con, resolve(con, baselines={"all": "first:3@2026-10-15"}))
    drift(con)
    rows = {day: (decision, st, base) for day, decision, st, base in episode_days(con)}
    assert rows[date(2026, 10, 15)][:2] == ("baseline", "resolved")
    assert [rows[date(2026, 10, d)][0] for d in (15, 16, 17)] == ["baseline"] * 3
    # from then on the slice is compared with its new baseline, the other slices are not
    assert rows[date(2026, 10, 18)][2] == date(2026, 10, 15)
    other = con.sql("SELECT DISTINCT baseline_start::DATE FROM drift_events WHERE slice = "
                    "'index_version=idx-v1' AND baseline_start IS NOT NULL").fetchall()
    assert other == [(date(2026, 10, 1),)]


def test_a_second_rebaseline_of_a_slice_keeps_the_first(tmp_path):
    # recall 0.8 for 12 days, 0.5 until day 29, then 0.3: a person accepts the 0.5 level from
    # day 15 and later the 0.3 level from day 32; each acceptance holds from its day on
    gold, logs = graded_world(tmp_path, {
        date(2026, 9, 1) + timedelta(days=d): 6 if d < 12 else 3 if d < 29 else 1
        for d in range(40)})
    warehouse = tmp_path / "w.duckdb"
    api.run(warehouse, logs=[str(logs)], gold=str(gold), gold_version="v1")

    def rebaselined(day: str) -> list[tuple]:
        api.rebaseline(warehouse, "all", day)
        api.run(warehouse)
        with connect(warehouse, read_only=True) as con:
            return con.sql("SELECT window_start::DATE, state, episode_id FROM drift_events "
                           "WHERE slice = 'all' AND k = 10 AND metric = 'mean_recall' "
                           "AND state IN ('opened', 'resolved') ORDER BY 1").fetchall()

    first = rebaselined("2026-09-16")
    assert [(day, state) for day, state, _ in first] == [
        (date(2026, 9, 13), "opened"), (date(2026, 9, 16), "resolved"),
        (date(2026, 10, 1), "opened")]
    second = rebaselined("2026-10-03")
    # the first acceptance still holds (its episode stays resolved on 09-16), and the drop
    # seen against the 0.5 level ends on the day of the second
    assert second == [*first, (date(2026, 10, 3), "resolved", first[-1][2])]
    with connect(warehouse, read_only=True) as con:
        assert resolve(con).baseline_for("all").text == "first:7@2026-09-16@2026-10-03"


@pytest.mark.slow
def test_pinned_index_baseline_compares_every_other_version_with_it(demo_copy):
    con, world = demo_copy
    put_in_force(con, resolve(con, baselines={"all": "index:idx-v1"}))
    drift(con)
    rows = episode_days(con)
    v1_days = [r for r in rows if r[0] < world.rebuild_day]
    v2_days = [r for r in rows if r[0] >= world.rebuild_day]
    assert {decision for _, decision, _, _ in v1_days} == {"baseline"}
    assert all(base == date(2026, 10, 1) for _, _, _, base in v2_days)


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "gap"), [("fixed", 0), ("anytime", 3)])
def test_trailing_baseline_ends_just_before_in_a_fixed_look_and_its_length_earlier_anytime(
        demo_copy, mode, gap):
    # anytime: the detector gathers its evidence over several windows; a baseline of the
    # windows just before took the first windows of a drop in and followed it down
    con, _ = demo_copy
    put_in_force(con, resolve(con, drift_mode=mode, baselines={"*": "trailing:3"}))
    drift(con)
    rows = con.sql("SELECT window_start::DATE, baseline_start::DATE, baseline_end::DATE, state "
                   "FROM drift_events WHERE slice = 'all' AND k = 5 AND metric = "
                   "'mean_recall' AND baseline_start IS NOT NULL ORDER BY 1").fetchall()
    quiet = [r for r in rows if r[3] == "none"]
    assert quiet
    # the last: the first quiet windows of the rebuilt index carry the last full baseline
    # of the index before over, until the new version's own has formed
    for window, start, end, _ in quiet[-3:]:
        assert (window - end).days == gap and (end - start).days >= 3
    # rows an earlier release judged without the gap are judged again by the next `run`
    config = resolve(con)
    assert not stale_drift(con, config)
    con.execute("UPDATE drift_events SET built_with = replace(built_with, ';gap=3', '')")
    assert stale_drift(con, config) == (gap > 0)
    # and so are rows judged under the rules before a rise let windows join a baseline
    drift(con)
    con.execute("UPDATE drift_events SET built_with = replace(built_with, $rules, '')",
                {"rules": f";rules={RULES}"})
    assert stale_drift(con, config)


def test_a_fixed_look_judged_alone_keeps_its_interval_within_minus_1_and_1(con, tmp_path):
    # a new index serves two requests on day 8: the slice 'all' is the only one of its family
    # with a baseline (index_version=idx-2 has none yet), so its interval was stored as
    # computed, [-2.17, 1.80] for a difference of two recalls, where a family of two slices
    # has its bounds clipped to [-1, 1]
    gold = [f"c{j}" for j in range(4)]
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", gold)])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r{d}-{i}", gold[:hit] + [f"x{j}" for j in range(4 - hit)],
                ts=f"2026-11-{d:02d}T{10 + i}:00:00Z",
                index_version="idx-1" if d < 8 else "idx-2")
        for d in range(1, 9) for i, hit in enumerate((3, 4, 2) if d < 8 else (1, 2))])
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    put_in_force(con, resolve(con, drift_mode="fixed"))
    drift(con)
    rows = con.sql("SELECT slice, k, metric, delta, delta_low, delta_high FROM drift_events "
                   "WHERE window_start = '2026-11-08' AND delta IS NOT NULL").fetchall()
    assert {(slice_, metric) for slice_, k, metric, *_ in rows if k == 5} == {
        ("all", metric) for metric in ("mean_recall", "pass_rate", "full_coverage_rate")}
    for row in rows:
        assert -1.0 <= row[4] <= row[3] <= row[5] <= 1.0, row


def test_a_window_flagged_as_a_drop_joins_no_baseline_though_it_ends_a_rise(con, tmp_path):
    # a rise opens on 10-21; on 10-22 recall falls far below: the rise ends there and the
    # window's own decision is a drop, but only an open drop kept windows out, so 10-22
    # joined the trailing baseline the drop that opened on 10-23 was then measured against
    days = {date(2026, 10, 1) + timedelta(days=n): 4 if n < 20 else 6 if n == 20 else 1
            for n in range(30)}
    gold, logs = graded_world(tmp_path, days)
    run(con, logs=[str(logs)], gold=str(gold), gold_version="v1")
    put_in_force(con, resolve(con, drift_mode="fixed", baselines={"*": "trailing:3"}))
    drift(con)
    rows = con.sql("SELECT window_start::DATE, decision, state, baseline_start::DATE, "
                   "baseline_end::DATE FROM drift_events WHERE slice = 'all' AND k = 10 "
                   "AND metric = 'mean_recall' ORDER BY 1").fetchall()
    decided = {day: (decision, state) for day, decision, state, _, _ in rows}
    assert decided[date(2026, 10, 21)] == ("rise", "opened")
    assert decided[date(2026, 10, 22)] == ("drop", "resolved")
    assert {decision for day, (decision, _) in decided.items()
            if day > date(2026, 10, 22)} == {"drop"}
    for day, _, _, start, end in rows:
        if start is not None:
            inside = [d for d in decided if start <= d < end]
            assert all(decided[d][0] != "drop" for d in inside), (day, start, end)


def test_a_window_too_small_to_see_the_detectable_drop_is_insufficient_not_stable(con, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [golden(f"g-{i}", [f"c{i}", f"d{i}"]) for i in range(5)])
    records = []
    for day in range(1, 13):
        for i in range(5):
            chunks = [f"c{i}", f"d{i}"] if (day + i) % 3 else [f"c{i}"]
            records.append(request(f"r{day}-{i}", chunks, ts=f"2026-11-{day:02d}T10:00:00Z",
                                   gold_id=f"g-{i}"))
    write_jsonl(tmp_path / "logs.jsonl", records)
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    rows = con.sql("SELECT decision, min_detectable_delta, n_needed FROM drift_events "
                   "WHERE slice = 'all' AND k = 5 AND metric = 'mean_recall' "
                   "AND decision <> 'baseline'").fetchall()
    assert len(rows) == 5
    for decision, mdd, needed in rows:
        assert decision == "insufficient"
        assert mdd is None or mdd > 0.10
        assert needed is None or needed > 5


def test_a_drop_after_a_long_stable_stretch_has_an_interval_not_crossed_bounds(con, tmp_path):
    # 14 days at mean recall 0.8, then 0.5: the rise detector still rules out the stable
    # stretch's level while the drop detector rules out today's
    gold, logs = graded_world(tmp_path, {date(2026, 10, day): 6 if day <= 14 else 3
                                         for day in range(1, 17)})
    run(con, logs=[str(logs)], gold=str(gold), gold_version="v1")
    rows = con.sql("SELECT window_start::DATE, delta, delta_low, delta_high, decision "
                   "FROM drift_events WHERE slice = 'all' AND k = 10 "
                   "AND metric = 'mean_recall' AND window_start >= '2026-10-15'").fetchall()
    assert [decision for *_, decision in rows] == ["drop", "drop"]
    for _, delta, low, high, _ in rows:
        assert low <= delta <= high < -0.05   # holds today's -0.3, and wholly below the margin
    assert_intervals_never_cross(con)


def test_a_flagged_window_after_a_long_stable_stretch_keeps_its_interval_beyond_the_margin(
        con, tmp_path):
    # 40 days with 80 % of requests finding their one gold chunk, then 15 days of 60 %: the
    # rows cross, and the restarted interval of the window alone reached above 0
    rng = random.Random(3)
    write_jsonl(tmp_path / "gold.jsonl", [golden(f"g-{i}", [f"c{i}"]) for i in range(20)])
    records = []
    for n in range(55):
        day = date(2026, 1, 1) + timedelta(days=n)
        for i in range(200):
            hit = rng.random() < (0.8 if n < 40 else 0.6)
            records.append(request(f"r{n}-{i}", [f"c{i % 20}" if hit else "x", "y"],
                                   ts=f"{day}T{i // 60:02d}:{i % 60:02d}:00Z",
                                   gold_id=f"g-{i % 20}"))
    write_jsonl(tmp_path / "logs.jsonl", records)
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    flagged = con.sql("SELECT metric, decision, delta_low, delta_high, margin FROM drift_events "
                      "WHERE decision IN ('drop', 'rise')").fetchall()
    assert {metric for metric, decision, *_ in flagged if decision == "drop"} == {
        "mean_recall", "pass_rate", "full_coverage_rate"}
    for metric, decision, low, high, margin in flagged:
        assert (high < -margin if decision == "drop" else low > margin), (metric, low, high)
    assert_intervals_never_cross(con)


def assert_intervals_never_cross(con):
    assert con.sql("SELECT count(*) FROM drift_events WHERE delta_low > delta_high"
                   ).fetchall() == [(0,)]


def test_drift_settings_are_checked_and_put_in_force_explicitly(con):
    assert parse_baseline("first:7@2026-11-12") == Baseline("first", 7,
                                                             restarts=(date(2026, 11, 12),))
    # days in any order, once each, written back in order
    assert parse_baseline("first:7@2026-11-12@2026-11-01@2026-11-12").text == \
        "first:7@2026-11-01@2026-11-12"
    assert parse_baseline("dates:2026-11-01..2026-11-08").until == date(2026, 11, 8)
    for bad in ("first", "first:x", "first:7@", "first:7@2026-11-01@x", "trailing:0",
                "dates:2026-11-08..2026-11-01", "index:", "weekly:3"):
        with pytest.raises(RecallwatchError, match="baseline"):
            parse_baseline(bad)
    with pytest.raises(RecallwatchError, match="--drift-mode"):
        resolve(con, drift_mode="sometimes")
    with pytest.raises(RecallwatchError, match="--detectable-drop"):
        resolve(con, drift_margin=0.2, detectable_drop=0.1)
    with pytest.raises(RecallwatchError, match="--alert-k"):
        resolve(con, alert_k=7)
    config = resolve(con, drift_mode="fixed", baselines={"all": "trailing:14"})
    assert resolve(con).drift_mode == "anytime"   # resolving saves nothing
    put_in_force(con, config)
    again = resolve(con)
    assert again.drift_mode == "fixed"
    assert again.baseline_for("all") == Baseline("trailing", 14)
    assert again.baseline_for("tenant=acme") == Baseline("first", 7)
    assert again.alert_cutoff == 10


def test_drift_and_rebaseline_from_the_cli(run_cli, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r{d}", ["a", "b"], ts=f"2026-11-{d:02d}T10:00:00Z") for d in range(1, 10)])
    code, out, _ = run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold",
                           tmp_path / "gold.jsonl", "--gold-version", "v1")
    assert code == 0 and "drift: 0 episode(s) opened, 0 resolved in all (recallwatch" in out
    code, out, _ = run_cli("drift")
    assert code == 0 and "drift_events:" in out and "(unchanged)" in out
    code, out, _ = run_cli("drift", "rebaseline", "--slice", "all", "--from", "2026-11-05")
    assert code == 0 and "first:7@2026-11-05" in out
    code, out, _ = run_cli("drift")
    assert code == 0 and "(unchanged)" not in out
    code, out, err = run_cli("drift", "rebaseline", "--slice", "all")
    assert code == 2 and "--from" in err
    # a slice the warehouse has not got is a typo, not a baseline kept for nothing
    code, out, err = run_cli("drift", "rebaseline", "--slice", "al", "--from", "2026-11-05")
    assert code == 2 and "no slice 'al'" in err and "all" in err
    # a range holding no window's start says so, not that there are no metrics
    code, out, _ = run_cli("drift", "--start", "2026-11-03T06:00", "--end", "2026-11-03T18:00")
    assert code == 0 and "none of the 9 window(s)" in out and "no window metrics" not in out
    code, out, _ = run_cli("drift", "--start", "2026-11-03", "--end", "2026-11-04")
    assert code == 0 and "drift_events: 42 rows" in out   # one window: 1/9 of the 378
    code, out, _ = run_cli("config", "--drift-mode", "fixed", "--baseline", "*=trailing:3")
    assert code == 0 and "drift mode fixed" in out and "*=trailing:3" in out
    code, _, err = run_cli("config", "--baseline", "trailing:3")
    assert code == 2 and "SLICE=SPEC" in err


def test_a_mistyped_rebaseline_slice_lists_the_slices_in_one_line_without_escapes(
        run_cli, tmp_path):
    # the slices a wrong --slice may choose from were joined as stored: a line break or a
    # terminal escape logged in a tag split the one-sentence error and reached the terminal
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"], tags={"a": "x\x1b[31mred\ny"})])
    code, _, _ = run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold",
                         tmp_path / "gold.jsonl", "--gold-version", "v1")
    assert code == 0
    code, _, err = run_cli("drift", "rebaseline", "--slice", "nope", "--from", "2026-11-01")
    assert code == 2 and "no slice 'nope'" in err
    assert err.count("\n") == 1 and "\x1b" not in err
    assert "a=x\\x1b[31mred\\x0ay" in err
    code, out, _ = run_cli("export", "drift_events", tmp_path / "drift.csv")
    assert code == 0 and (tmp_path / "drift.csv").read_text().startswith("window_start")


@pytest.mark.slow
def test_run_sends_the_demo_episode_to_a_webhook_once_and_never_again(demo_copy, monkeypatch):
    from test_alerts import HookServer

    from pipeline.alerts import Channel
    from pipeline.ingest import ingest_gold

    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    con, world = demo_copy
    server = HookServer()
    try:
        channel = Channel("webhook", url=server.url("/hook"), secret="s3cret")
        now = datetime(2026, 10, 31, 6)
        # the channel set up before the demo's logs begin (no day judged yet then): every
        # episode of them is news
        con.execute("INSERT INTO alert_channels VALUES ('webhook', '2026-01-01')")
        first = run(con, alert_channels=[channel], now=now)
        bodies = [r.body for r in server.received]
        assert first.alerts.failed == 0 and first.alerts.sent == len(bodies) > 0
        opened = con.sql("SELECT count(*) FROM drift_events WHERE grain = 'day' AND k = 10 "
                         "AND metric = 'mean_recall' AND state IN ('opened', 'resolved')"
                         ).fetchall()[0][0]
        assert len(bodies) == opened   # one message per opening or resolution, slice by slice
        assert any(b'"slice": "all"' in b and b'"event": "opened"' in b for b in bodies)
        before = snapshot(con)
        second = run(con, alert_channels=[channel], now=now)
        assert second.alerts.sent == 0 and len(server.received) == len(bodies)
        assert snapshot(con) == before
        # a new gold version re-judges the whole history and finds the same episodes
        ingest_gold(con, str(world.gold_path), "gold-refreshed")
        third = run(con, alert_channels=[channel], now=now)
        assert con.sql("SELECT DISTINCT gold_version FROM drift_events").fetchall() == [
            ("gold-refreshed",)]
        assert third.alerts.sent == 0 and len(server.received) == len(bodies)
    finally:
        server.stop()


def test_rescoring_a_day_rejudges_it_and_every_later_window_only(con, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [golden(f"g-{i}", [f"c{i}", f"d{i}"]) for i in range(4)])

    def day_logs(day: int, hit: bool) -> list[dict]:
        return [request(f"r{day}-{i}", [f"c{i}", f"d{i}"] if hit or i else [f"x{i}"],
                        ts=f"2026-11-{day:02d}T10:00:00Z", gold_id=f"g-{i}",
                        session_id=f"s{day}-{i // 2}") for i in range(4)]

    for day in range(1, 13):
        write_jsonl(tmp_path / "logs" / f"{day:02d}.jsonl", day_logs(day, True))
    run(con, logs=[str(tmp_path / "logs")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    before = con.sql("SELECT * FROM drift_events ORDER BY ALL").fetchall()
    # day 10 is re-delivered with a miss: its scores, metrics and drift from it on change
    write_jsonl(tmp_path / "logs" / "10.jsonl", day_logs(10, False))
    run(con, logs=[str(tmp_path / "logs")])
    after = con.sql("SELECT * FROM drift_events ORDER BY ALL").fetchall()
    cut = datetime(2026, 11, 10)
    assert [r for r in after if r[0] < cut] == [r for r in before if r[0] < cut]
    changed = {r[0] for r in set(after) ^ set(before)}
    assert changed and min(changed) == cut
    value = con.sql("SELECT value FROM drift_events WHERE window_start = '2026-11-10' AND "
                    "slice = 'all' AND k = 5 AND metric = 'mean_recall'").fetchall()[0][0]
    assert value == pytest.approx(3 / 4)   # one request of four found nothing


@pytest.mark.parametrize("mode", ["fixed", "anytime"])
def test_a_window_and_baseline_whose_recalls_are_all_equal_are_not_certain(con, tmp_path, mode):
    # two requests a day that each find 3 of their 6 gold chunks, then a day on which both
    # find 2: Welch saw no spread on either side, put the difference at exactly -1/6 and the
    # fixed look flagged a drop from two requests
    gold = [f"c{j}" for j in range(6)]
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", gold)])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r{day}-{i}", gold[:3 if day < 8 else 2], ts=f"2026-11-{day:02d}T1{i}:00:00Z")
        for day in range(1, 9) for i in range(2)])
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    put_in_force(con, resolve(con, drift_mode=mode))
    drift(con)
    delta, low, high, decision, method = con.sql(
        "SELECT delta, delta_low, delta_high, decision, method FROM drift_events "
        "WHERE slice = 'all' AND k = 5 AND metric = 'mean_recall' "
        "AND window_start = '2026-11-08'").fetchall()[0]
    assert delta == pytest.approx(-1 / 6)
    assert low < -0.4 and high > 0.1, (low, high)   # two requests and 14: far from certain
    assert decision == "insufficient"
    assert "wilson" in method


@pytest.mark.parametrize("mode", ["anytime", "fixed"])
def test_a_drop_on_a_small_slice_resolves_once_recall_is_back_for_some_days(con, tmp_path,
                                                                            mode):
    # 20 requests a day at mean recall 0.8 (each finding 6 to 10 of 10 gold chunks), five days
    # at 0.5, then the first level again exactly: one day of 20 requests is too few for its own
    # interval to lie above -0.05 (about -0.07 at best), so the episode stayed open for ever;
    # the recovered days pooled show it within the margin after a few days
    gold = [f"c{j}" for j in range(10)]
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", gold)])
    level = {n: 6 if n < 10 or n >= 15 else 3 for n in range(30)}
    records = []
    for n, low in level.items():
        day = date(2026, 10, 1) + timedelta(days=n)
        for i in range(20):
            hit = low + i % 5
            records.append(request(f"r{n}-{i}", gold[:hit] + [f"x{j}" for j in range(10 - hit)],
                                   ts=f"{day}T10:{i:02d}:00Z"))
    write_jsonl(tmp_path / "logs.jsonl", records)
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    put_in_force(con, resolve(con, drift_mode=mode))
    drift(con)
    rows = con.sql("SELECT window_start::DATE, delta, state FROM drift_events "
                   "WHERE slice = 'all' AND k = 10 AND metric = 'mean_recall' "
                   "AND state <> 'none' ORDER BY 1").fetchall()
    opened = [day for day, _, state in rows if state == "opened"]
    resolved = [day for day, _, state in rows if state == "resolved"]
    assert len(opened) == 1 and date(2026, 10, 11) <= opened[0] < date(2026, 10, 16)
    # back on 10-16, resolved within the first days back, once and for good
    assert len(resolved) == 1 and date(2026, 10, 16) <= resolved[0] <= date(2026, 10, 21), rows
    back = [delta for day, delta, _ in rows if date(2026, 10, 16) <= day]
    assert all(delta == pytest.approx(0.0, abs=1e-12) for delta in back)
    # the report says the episode resolved on that day, though the day alone decides nothing
    from pipeline.report.drift import decision_text

    cursor = con.execute("SELECT * FROM drift_events WHERE state = 'resolved' AND slice = 'all' "
                         "AND k = 10 AND metric = 'mean_recall'")
    row = dict(zip([c[0] for c in cursor.description], cursor.fetchone(), strict=True))
    assert "episode resolved" in decision_text(row), decision_text(row)


def hundred_a_day(con, tmp_path, days: list[date], serve) -> None:
    """100 requests on each day against a golden of 10 chunks, the i-th finding 6 + i % 5 of
    them, each with the fields serve(day, i) gives (its index version, tags), run."""
    gold = [f"c{j}" for j in range(10)]
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", gold)])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r{day}-{i}", gold[:6 + i % 5] + [f"x{j}" for j in range(4 - i % 5)],
                ts=f"{day}T{i // 60:02d}:{i % 60:02d}:00Z", **serve(day, i))
        for day in days for i in range(100)])
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")


def test_a_smoke_request_on_the_next_index_is_no_change_point_until_it_takes_over(con, tmp_path):
    # idx-1 serves 100 requests a day; on 11-04 one request is a smoke test of idx-2, which
    # goes live on 11-08 (a canary at a quarter of the traffic on 11-07). A window belongs to
    # the newest version serving at least a tenth of it: one change point, at the canary, not
    # one on the smoke test's day and another the day after
    days = [date(2026, 11, 1) + timedelta(days=n) for n in range(10)]

    def serve(day: date, i: int) -> dict:
        canary = day >= date(2026, 11, 8) or (day == date(2026, 11, 7) and i < 25) or (
            day == date(2026, 11, 4) and i == 0)
        return {"index_version": "idx-2" if canary else "idx-1"}

    hundred_a_day(con, tmp_path, days, serve)
    rows = con.sql("SELECT window_start::DATE, index_version, change_point FROM drift_events "
                   "WHERE slice = 'all' AND k = 10 AND metric = 'mean_recall' "
                   "AND grain = 'day' ORDER BY 1").fetchall()
    assert [(day, version) for day, version, _ in rows] == [
        (day, "idx-2" if day >= date(2026, 11, 7) else "idx-1") for day in days]
    assert [day for day, _, change in rows if change] == [date(2026, 11, 7)]
    # a version's own slice is labelled with it, however little it served
    smoke = con.sql("SELECT index_version FROM drift_events WHERE slice = 'index_version=idx-2' "
                    "AND window_start::DATE = '2026-11-04' AND k = 10 "
                    "AND metric = 'mean_recall'").fetchall()
    assert smoke == [("idx-2",)]


def test_a_tag_slice_is_labelled_by_the_versions_serving_its_own_requests(con, tmp_path):
    # a canary by tenant: on 11-05 half of acme's requests (4 of the day's 100) go to idx-2,
    # from 11-06 all 8 of them; the other tenant stays on idx-1. acme's slice changes index on
    # 11-05 although idx-2 serves under a tenth of the whole window; slice 'all' never does
    days = [date(2026, 11, 1) + timedelta(days=n) for n in range(8)]

    def serve(day: date, i: int) -> dict:
        tenant = "acme" if i < 8 else "globex"
        canary = tenant == "acme" and (day >= date(2026, 11, 6) or (
            day == date(2026, 11, 5) and i < 4))
        return {"index_version": "idx-2" if canary else "idx-1", "tags": {"tenant": tenant}}

    hundred_a_day(con, tmp_path, days, serve)

    def labels(slice_):
        return con.execute(
            "SELECT window_start::DATE, index_version, change_point FROM drift_events "
            "WHERE slice = $s AND k = 10 AND metric = 'mean_recall' AND grain = 'day' "
            "ORDER BY 1", {"s": slice_}).fetchall()

    acme = labels("tenant=acme")
    assert [(day, version) for day, version, _ in acme] == [
        (day, "idx-2" if day >= date(2026, 11, 5) else "idx-1") for day in days]
    assert [day for day, _, change in acme if change] == [date(2026, 11, 5)]
    assert {version for _, version, _ in labels("all")} == {"idx-1"}
    assert {version for _, version, _ in labels("tenant=globex")} == {"idx-1"}


def test_a_window_with_nothing_scored_forms_no_baseline(con, tmp_path):
    # days 1-3 of requests whose golden is unknown (n = 0), then 8 days of scored ones: the
    # empty days were "baseline" (a window that forms one) though none joins it
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-1"])])
    records = [request(f"r{d}", ["c-1"], ts=f"2026-11-{d:02d}T10:00:00Z",
                       gold_id=None if d > 3 else "nowhere", query="what is the minimum balance?"
                       if d > 3 else "no gold question") for d in range(1, 12)]
    write_jsonl(tmp_path / "logs.jsonl", records)
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    rows = episode_days(con, k=1)
    assert [decision for _, decision, _, _ in rows[:10]] == (
        ["insufficient"] * 3 + ["baseline"] * 7), rows
    # the first seven days scored form it, and the next day is compared with them
    assert rows[10][3] == date(2026, 11, 4), rows


@pytest.mark.parametrize("mode", ["anytime", "fixed"])
def test_a_days_interval_lies_beyond_the_margin_exactly_when_it_is_flagged(con, tmp_path, mode):
    # six tenants, each day's slices judged together: the decision controls false discoveries
    # across them (BH, e-BH), and the interval was the one slice's alone, so a day could show
    # an interval wholly below -margin yet be no drop ("insufficient", "too few requests")
    rng = random.Random(7)
    gold = [f"c{j}" for j in range(10)]
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", gold)])
    records = []
    for n in range(24):
        day = date(2026, 10, 1) + timedelta(days=n)
        for tenant in range(6):
            # drops of several sizes from day 10 on, tenant 0 not at all
            level = 0.8 - (0.03 * tenant if n >= 10 else 0.0)
            for i in range(40):
                hit = sum(rng.random() < level for _ in gold)
                records.append(request(
                    f"r{n}-{tenant}-{i}", gold[:hit] + [f"x{j}" for j in range(10 - hit)],
                    ts=f"{day}T{i // 4:02d}:{i % 4 * 15:02d}:00Z", tags={"tenant": f"t{tenant}"}))
        # a tenant of one request a day: no interval, no p-value (BH leaves it out of m)
        hit = 3 + n % 5
        records.append(request(f"r{n}-tiny", gold[:hit] + [f"x{j}" for j in range(10 - hit)],
                               ts=f"{day}T23:00:00Z", tags={"tenant": "tiny"}))
    write_jsonl(tmp_path / "logs.jsonl", records)
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    put_in_force(con, resolve(con, drift_mode=mode))
    drift(con)
    rows = con.sql("SELECT decision, delta_low, delta_high, margin FROM drift_events "
                   "WHERE delta_high IS NOT NULL AND delta_low IS NOT NULL").fetchall()
    assert len({decision for decision, *_ in rows} & {"drop", "rise"}) >= 1
    for decision, low, high, margin in rows:
        assert (decision == "drop") == (high <= -margin), (decision, low, high)
        assert (decision == "rise") == (low >= margin), (decision, low, high)


def test_a_slice_without_a_p_value_does_not_widen_the_others_intervals():
    # a one-request slice of fractional recall has no fixed-look p-value, which BH leaves out
    # of its count; the interval shares counted it, so a flagged drop's interval was built too
    # wide and reached above -margin (-0.048) beside it
    from pipeline import drift as judged
    from pipeline.config import Config

    rng = random.Random(3)

    def recalls(level, n):
        return [sum(rng.random() < level for _ in range(10)) / 10 for _ in range(n)]

    def sums(values):
        v = [float(x) for x in values]
        return np.array([len(v), len(v), sum(v), sum(x * x for x in v), sum(v), len(v), 1.0])

    base = recalls(0.8, 280)

    def item(name, values):
        series = judged._Series(key=(name, "ids", 10, "v1", "mean_recall"),
                                baseline=parse_baseline("first:7"))
        pool = judged._Pool(("first",))
        pool.sums, pool.binary = sums(base), False
        window = judged._Window(datetime(2026, 11, 1), datetime(2026, 11, 2), len(values),
                                ("idx-1",), "idx-1", False, sums(values))
        return judged._Item(series, window, pool)

    config = Config(drift_mode="fixed", gold_version="v1")
    flagged = 0
    for _ in range(200):
        day = recalls(0.70, 40)
        tests = judged._Tests.of([item("big", day), item("tiny", [0.5])], config)
        assert np.isnan(tests.evidence[1])
        if tests.drop[0]:
            flagged += 1
            assert tests.high[0] <= -config.drift_margin, tests.high[0]
    assert flagged > 10


def test_pooled_size_histograms_give_the_cr2_sums_of_the_pooled_days():
    # the CR2 weights 1 / (1 - n_g / n) depend on the pooled n and do not add up across days;
    # the clusters by size do, and give the sums of the days' requests taken together
    from pipeline.drift import _Pool, _Window, cr2_sums, merge_histograms, size_histogram
    from pipeline.stats import adjusted_difference_interval, cr2_sufficient_stats
    rng = np.random.default_rng(5)
    pool, recalls, groups = _Pool(("x",)), [], []
    for day in range(4):
        sizes = np.array([40, 3, 3] + [1] * int(rng.integers(5, 20)))
        y = rng.binomial(4, 0.8, sizes.sum()) / 4
        cluster = np.repeat(np.arange(sizes.size), sizes)
        s = np.bincount(cluster, y)
        rows = [{"size": int(m), "clusters": int((sizes == m).sum()),
                 "recall_s": float(s[sizes == m].sum()),
                 "recall_sq": float(s[sizes == m] @ s[sizes == m])} for m in np.unique(sizes)]
        sums = np.array([y.size, sizes.size, y.sum(), s @ s, s @ sizes, sizes @ sizes,
                         sizes.max()], dtype=float)
        pool.add(_Window(datetime(2026, 1, 1 + day), datetime(2026, 1, 2 + day), y.size, ("v",),
                         "v", True, sums, False, size_histogram(rows, "recall", sums)))
        recalls.append(y)
        groups.append(cluster + 1000 * day)
    y, g = np.concatenate(recalls), np.concatenate(groups)
    assert pool.hist[:, 0].tolist() == [1, 3, 40]
    assert cr2_sums(pool.hist, y.size) == pytest.approx(cr2_sufficient_stats(y, g), rel=1e-12)
    # a window of an earlier release, without a histogram: its pool falls back on CR1
    old = _Window(datetime(2026, 1, 9), datetime(2026, 1, 10), 3, ("v",), "v", True,
                  np.array([3, 2, 2.0, 2.5, 2.5, 5, 2]), False, None)
    pool.add(old)
    assert pool.hist is None and np.isnan(cr2_sums(pool.hist, 10)).all()
    # one of single requests keeps them from its sums; merging is by size
    single = size_histogram(None, "recall", np.array([5, 5, 4.0, 4.0, 4.0, 5, 1]))
    assert merge_histograms(single, single).tolist() == [[1, 10, 8, 8]]
    # sides of single requests (max size 1) are unchanged by the CR2 sums
    side = (np.array([30.0]), np.array([30.0]), np.array([24.0]), np.array([21.0]),
            np.array([24.0]), np.array([30.0]))
    cr2 = tuple(np.array([v]) for v in cr2_sums(size_histogram(None, "recall", np.array(
        [30, 30, 24.0, 21.0, 24.0, 30, 1])), 30.0))
    assert adjusted_difference_interval(side, side, 0.05, cr2=(cr2, cr2)) == \
        adjusted_difference_interval(side, side, 0.05)


def test_anytime_detectors_own_their_grid_rather_than_pinning_the_window_array(con, tmp_path,
                                                                               monkeypatch):
    """Each series' detector carries its row of e-values over the grid of differences to the
    next window. A view into the window's (series x grid) array kept that whole array alive
    while any series of it waited for its next window (a slice absent on later days): with
    3,000 tag values over 30 days the drift step grew past 4.5 GB. Each must own its row."""
    made = []
    real = drift_module._Detector

    def recorded(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    gold, logs = graded_world(tmp_path, {date(2026, 10, day): 6 for day in range(1, 11)})
    run(con, logs=[str(logs)], gold=str(gold), gold_version="v1")
    monkeypatch.setattr(drift_module, "_Detector", recorded)
    con.execute("DELETE FROM drift_events")
    drift(con)
    grids = [d.log_s_grid for d in made if d.log_s_grid is not None]
    assert grids   # windows 8-10 were judged against the first 7
    assert all(g.base is None and g.ndim == 1 for g in grids)


@pytest.mark.parametrize("rows", [1, 7])
def test_series_run_over_the_grid_a_few_at_a_time_give_every_row_to_the_last_bit(demo_copy,
                                                                                  monkeypatch,
                                                                                  rows):
    """A window's series run over the grid of differences GRID_ROWS at a time (a window of
    3,000 tag values made a dozen arrays of 200 MB at once), and the restarted detectors only
    where a row reads them: the demo's drops, resolutions and intervals come out the same to
    the last bit whatever the group."""
    con, _ = demo_copy
    whole = con.execute("SELECT * FROM drift_events ORDER BY ALL").fetchall()
    assert {row[23] for row in whole} >= {"opened", "ongoing", "resolved"}
    monkeypatch.setattr(drift_module, "GRID_ROWS", rows)
    con.execute("DELETE FROM drift_events")
    drift(con)
    assert con.execute("SELECT * FROM drift_events ORDER BY ALL").fetchall() == whole


def test_windows_given_out_of_order_are_judged_as_in_order(demo_copy):
    """judge reads its windows one time at a time from a table in time order (as
    sql/drift_windows.sql gives it); a table in another order is put in order first."""
    con, _ = demo_copy
    config = resolve(con)
    first_seen = dict(con.execute(
        "SELECT index_version, min(timestamp) FROM requests GROUP BY ALL").fetchall())
    windows = run_script(con, "drift_windows", {"grain": "day"}, as_arrow=True)
    shuffled = windows.take(np.random.default_rng(7).permutation(windows.num_rows))
    assert shuffled.column("window_start") != windows.column("window_start")

    def rows(table):
        return sorted(map(repr, drift_module.judge(table, config, "day", first_seen).to_pylist()))

    assert rows(shuffled) == rows(windows)
