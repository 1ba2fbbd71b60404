"""Tests of pipeline.report.drift: the report's drift section drawn from drift_events,
window_metrics and requests.

The warehouse is built row by row. Slice 'all' has 24 days: a baseline (days 1-7), stable
days, a mean-recall drop episode opened on day 10 and resolved on day 20, the day index idx-b
arrives; a pass-rate episode that opens on day 12 and stays open; and an insufficient latest
full-coverage window. Eleven more slices (one named with a script tag) test the cap of drawn
timelines and the escaping. A tiny requests table of two goldens over three days gives churn
numbers computed by hand.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from pathlib import Path

import markupsafe
import numpy as np
import pytest
from conftest import chromium, insert_rows, needs_chromium
from PIL import Image

from pipeline.report import Scope, write_report
from pipeline.report.charts import DROP_COLOR, Chart
from pipeline.report.drift import MAX_DRIFT_SLICES, drift_section
from pipeline.report.reads import prepare, rows
from pipeline.warehouse import connect, queries

GOLD = "gs-1"
ROUTE = "ids"
K = 5
SCOPE = Scope(route=ROUTE, k=K, gold_version=GOLD)
DAYS = [date(2026, 11, 1) + timedelta(days=i) for i in range(24)]
OPENED, RESOLVED, PASS_OPENED = DAYS[9], DAYS[19], DAYS[11]
PAYLOAD = "tenant=<script>alert('pwned')</script>"
N_ALL = 40          # scored requests per window of slice 'all'
N_NEEDED_ALL = 1200
N_NEEDED_PAYLOAD = 3456
STABLE_SLICES = [f"tag=s{i:02d}" for i in range(9)]
DROP_SLICE = "tag=s09"


def _ts(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time())


def _drift_row(day: date, slice_: str, metric: str, **given) -> dict:
    row = {
        "window_start": _ts(day), "window_end": _ts(day) + timedelta(days=1), "grain": "day",
        "slice": slice_, "route": ROUTE, "k": K, "gold_version": GOLD, "metric": metric,
        "index_version": "idx-a", "change_point": False, "n": N_ALL,
        "baseline_start": _ts(DAYS[0]), "baseline_end": _ts(DAYS[7]), "baseline_n": 7 * N_ALL,
        "value": 0.90, "baseline_value": 0.90, "delta": 0.0, "delta_low": -0.03,
        "delta_high": 0.03, "margin": 0.02, "method": "anytime", "evidence": 1.0,
        "decision": "stable", "state": "none", "episode_id": None,
        "min_detectable_delta": 0.05, "n_needed": None, "built_with": "test",
    }
    row.update(given)
    return row


def _all_slice_rows() -> list[dict]:
    """Slice 'all': the mean-recall episode, the pass-rate episode, the insufficient window."""
    out = []
    for i, day in enumerate(DAYS):
        version = "idx-b" if day >= RESOLVED else "idx-a"
        common = {"index_version": version, "change_point": day == RESOLVED}
        if i < 7:
            mean = {"decision": "baseline", "baseline_value": None, "delta": None,
                    "delta_low": None, "delta_high": None, "baseline_start": None,
                    "baseline_end": None, "baseline_n": None, "value": 0.90 + i / 1000}
        elif OPENED <= day < RESOLVED:
            drop = -0.10 - (0.02 if day == DAYS[14] else 0.0)  # the worst day: day 15
            mean = {"decision": "drop", "value": 0.90 + drop, "delta": drop,
                    "delta_low": drop - 0.03, "delta_high": drop + 0.03,
                    "state": "opened" if day == OPENED else "ongoing", "episode_id": "ep-1"}
        elif day == RESOLVED:
            mean = {"state": "resolved", "episode_id": "ep-1", "value": 0.89, "delta": -0.01,
                    "delta_low": -0.04, "delta_high": 0.02}
        else:
            mean = {}
        out.append(_drift_row(day, "all", "mean_recall", **common, **mean))

        passed = {"decision": "baseline"} if i < 7 else {}
        if day >= PASS_OPENED:
            passed = {"decision": "drop", "delta": -0.2, "delta_low": -0.3, "delta_high": -0.1,
                      "state": "opened" if day == PASS_OPENED else "ongoing",
                      "episode_id": "ep-2", "method": "fixed"}
        out.append(_drift_row(day, "all", "pass_rate", **common, **passed))

        full = {"decision": "baseline"} if i < 7 else {}
        if day == DAYS[-1]:
            full = {"decision": "insufficient", "delta": None, "delta_low": None,
                    "delta_high": None, "min_detectable_delta": 0.08,
                    "n_needed": N_NEEDED_ALL, "method": "newcombe_cluster_wilson"}
        out.append(_drift_row(day, "all", "full_coverage_rate", **common, **full))
    return out


def _other_slice_rows() -> list[dict]:
    out = []
    for day in DAYS[-3:]:
        for name in STABLE_SLICES:
            out.append(_drift_row(day, name, "mean_recall", n=5))
        out.append(_drift_row(day, DROP_SLICE, "mean_recall", n=5,
                              **({"decision": "drop", "delta": -0.3, "delta_low": -0.4,
                                  "delta_high": -0.2, "state": "opened",
                                  "episode_id": "ep-3"} if day == DAYS[-1] else {})))
        hostile = {"decision": "rise", "delta": 0.2, "delta_low": 0.1, "delta_high": 0.3}
        if day == DAYS[-1]:
            hostile = {"decision": "insufficient", "delta": None, "delta_low": None,
                       "delta_high": None, "min_detectable_delta": 0.31,
                       "n_needed": N_NEEDED_PAYLOAD,
                       "method": "e_detector_bernstein_adjusted_t"}
        out.append(_drift_row(day, PAYLOAD, "mean_recall", n=3, **hostile))
    return out


def _window_metrics_rows() -> list[dict]:
    out = []
    for i, day in enumerate(DAYS):
        mean = 0.90 - (0.11 if OPENED <= day < RESOLVED else 0.0) + i / 1000
        out.append({
            "window_start": _ts(day), "window_end": _ts(day) + timedelta(days=1),
            "grain": "day", "slice": "all", "route": ROUTE, "k": K, "gold_version": GOLD,
            "n": N_ALL, "n_sessions": N_ALL, "mean_recall": mean, "ci_low": mean - 0.04,
            "ci_high": mean + 0.04, "ci_method": "adjusted_t", "mean_precision": None,
            "pass_mark": 0.7, "pass_rate": 0.8, "pass_ci_low": 0.7, "pass_ci_high": 0.9,
            "full_coverage_rate": 0.6, "fc_ci_low": 0.5, "fc_ci_high": 0.7,
            "index_versions": ["idx-b"] if day >= RESOLVED else ["idx-a"],
            "max_index_size": 100_000 + 1_000 * i + (50_000 if day >= RESOLVED else 0),
            "n_excluded": 0, "rate_ci_method": "wilson",
        })
    return out


# Two goldens over three days. Served = chunks whose best place in their step is within k.
# (request_id, day, gold_id, index_version, k, chunk_ids, chunk_ranks)
CHURN_REQUESTS = [
    ("r1", 0, "g-1", "idx-a", 2, ["a", "b", "c"], [1, 2, 3]),        # served a, b
    ("r2", 0, "g-1", "idx-a", 2, ["b", "d"], [1, 2]),                # served b, d
    ("r3", 0, "g-2", "idx-a", 2, ["x", "y"], [1, 2]),                # served x, y
    ("r4", 1, "g-1", "idx-a", 3, ["a", "b", "e"], [1, 2, 3]),        # served a, b, e
    ("r5", 2, "g-1", "idx-b", 2, ["a", "e", "f", "g"], [1, 2, 3, 4]),  # served a, e
    ("r6", 2, "g-2", "idx-a", 1, ["x", "z", "w"], [1, 1, 2]),        # two steps: served x, z
]
# Scored under another route only: must not move g-2's chunks.
OTHER_ROUTE_REQUEST = ("r7", 2, "g-2", "idx-a", 2, ["q"], [1])


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b)


# By hand: day 2 g-1 {a,b,e} vs day 1 {a,b,d}; day 3 g-1 {a,e} vs {a,b,e} under idx-b (a new
# version); day 3 g-2 {x,z} vs day 1 {x,y} (not asked on day 2).
EXPECTED_CHURN = [
    {"day": DAYS[1], "index_version": "idx-a", "goldens": 1,
     "mean_jaccard": _jaccard({"a", "b", "e"}, {"a", "b", "d"}), "requests": 1,
     "across_versions": 0},
    {"day": DAYS[2], "index_version": "idx-a", "goldens": 1,
     "mean_jaccard": _jaccard({"x", "z"}, {"x", "y"}), "requests": 1, "across_versions": 0},
    {"day": DAYS[2], "index_version": "idx-b", "goldens": 1,
     "mean_jaccard": _jaccard({"a", "e"}, {"a", "b", "e"}), "requests": 1,
     "across_versions": 1},
]


def _request_rows(requests: list[tuple], route: str) -> tuple[list[dict], list[dict]]:
    logged, scores = [], []
    for rid, d, gid, version, k, chunks, ranks in requests:
        ts = _ts(DAYS[d]) + timedelta(hours=9)
        logged.append({
            "request_id": rid, "timestamp": ts, "query": f"question of {gid}", "gold_id": gid,
            "index_version": version, "index_size": 100_000, "k": k,
            "n_steps": max(ranks.count(1), 1), "chunk_ids": chunks, "chunk_ranks": ranks,
            "source": "/logs/test.jsonl", "line": int(rid[1:]),
        })
        scores.append({
            "request_id": rid, "timestamp": ts, "gold_id": gid, "gold_version": GOLD,
            "index_version": version, "route": route, "k": k, "needed": 1, "covered": 1,
            "recall": 1.0, "full_coverage": True, "precision": 1.0, "status": "scored",
        })
    return logged, scores


def build_warehouse(path: Path, *, drift: bool = True) -> Path:
    con = connect(path)
    try:
        con.execute("INSERT INTO gold_versions VALUES ($gv, 1, '/gold.jsonl', 'h', 2, NULL)",
                    {"gv": GOLD})
        insert_rows(con, "window_metrics", _window_metrics_rows())
        logged, scores = _request_rows(CHURN_REQUESTS, ROUTE)
        other_logged, other_scores = _request_rows([OTHER_ROUTE_REQUEST], "passages")
        insert_rows(con, "requests", [{**r, "retrieved": []} for r in logged + other_logged])
        insert_rows(con, "request_scores", scores + other_scores)
        if drift:
            insert_rows(con, "drift_events", _all_slice_rows() + _other_slice_rows())
    finally:
        con.close()
    return path


@pytest.fixture(scope="module")
def warehouse_path(tmp_path_factory) -> Path:
    return build_warehouse(tmp_path_factory.mktemp("drift") / "warehouse.duckdb")


@pytest.fixture(scope="module")
def section(warehouse_path) -> dict:
    con = connect(warehouse_path, read_only=True)
    try:
        prepare(con)
        daily = rows(con, queries("report_sections")["daily_recall"],
                     **SCOPE.params("route", "k", "gold_version"))
        return drift_section(con, SCOPE, daily, "served")
    finally:
        con.close()


@pytest.fixture(scope="module")
def report(warehouse_path, tmp_path_factory) -> tuple[Path, str]:
    con = connect(warehouse_path, read_only=True)
    try:
        path = write_report(con, tmp_path_factory.mktemp("report"), route=ROUTE, k=K,
                            gold_version=GOLD)
    finally:
        con.close()
    return path, path.read_text(encoding="utf-8")


def _drift_html(text: str) -> str:
    return re.search(r'<section id="drift">.*?</section>', text, re.S).group(0)


def _items(chart: Chart, tag: str, css: str | None = None) -> list[dict]:
    return [it for it in chart.items if it["tag"] == tag
            and (css is None or it["attrs"].get("class", "").startswith(css))]


# ---------------------------------------------------------------------------------------------
# Episodes and the timeline


def test_episode_table_lists_each_episode_with_its_days_in_every_metric(section, report):
    by_id = {e["episode_id"]: e for e in section["episodes"]}
    assert set(by_id) == {"ep-1", "ep-2", "ep-3"}
    recall = by_id["ep-1"]
    assert (recall["slice"], recall["metric"], recall["direction"]) == ("all", "mean_recall",
                                                                        "drop")
    assert (recall["opened"], recall["resolved"], recall["windows"]) == (OPENED, RESOLVED, 10)
    # The worst window is the largest drop, with its own interval; not the resolving window.
    assert recall["worst"]["day"] == DAYS[14]
    assert recall["worst"]["delta"] == pytest.approx(-0.12)
    assert recall["worst_interval"] == "[-0.150, -0.090]"
    assert (by_id["ep-2"]["metric"], by_id["ep-2"]["opened"]) == ("pass_rate", PASS_OPENED)
    assert by_id["ep-2"]["resolved"] is None and by_id["ep-2"]["method"] == "fixed"

    html = _drift_html(report[1])
    table_rows = re.findall(r'<tr class="episode-row">(.*?)</tr>', html, re.S)
    assert len(table_rows) == 3
    first = next(r for r in table_rows if "mean recall" in r)
    assert f'<td class="opened">{OPENED}</td><td class="resolved">{RESOLVED}</td>' in first
    assert "-0.120" in first and "[-0.150, -0.090]" in first and "anytime" in first
    pass_row = next(r for r in table_rows if "pass rate" in r)
    assert '<td class="resolved">open</td>' in pass_row


def test_an_open_episode_on_a_slice_without_later_windows_says_since_when(tmp_path):
    path = build_warehouse(tmp_path / "w.duckdb")
    retired = [_drift_row(day, "index_version=idx-a", "mean_recall", decision="drop",
                          state="opened" if day == DAYS[8] else "ongoing", episode_id="ep-old")
               for day in DAYS[8:12]]
    con = connect(path)
    try:
        insert_rows(con, "drift_events", retired)
        html = _drift_html(write_report(con, tmp_path / "out", route=ROUTE, k=K,
                                        gold_version=GOLD).read_text(encoding="utf-8"))
    finally:
        con.close()
    rows_ = re.findall(r'<tr class="episode-row">(.*?)</tr>', html, re.S)
    old = next(r for r in rows_ if "index_version=idx-a" in r)
    assert f"open (no data after {DAYS[11]})" in old
    still = next(r for r in rows_ if "pass rate" in r)   # slice all goes on: plainly open
    assert '<td class="resolved">open</td>' in still


def test_timeline_shades_the_episode_and_marks_the_index_change(section):
    overall = section["timelines"][0]
    assert overall["slice"] == "all"
    chart = overall["chart"]
    points = _items(chart, "circle", "decision-")
    assert len(points) == len(DAYS)
    x = {day: float(p["attrs"]["cx"]) for day, p in zip(DAYS, points, strict=True)}
    shaded = _items(chart, "rect", "episode")
    assert len(shaded) == 1
    left = float(shaded[0]["attrs"]["x"])
    right = left + float(shaded[0]["attrs"]["width"])
    half = (x[DAYS[1]] - x[DAYS[0]]) / 2
    # From the start of the day it opened to the start of the day it resolved.
    assert left == pytest.approx(x[OPENED] - half, abs=0.1)
    assert right == pytest.approx(x[RESOLVED] - half, abs=0.1)
    assert "opened 2026-11-10, resolved 2026-11-20" in shaded[0]["title"]

    markers = _items(chart, "text", "marker")
    assert [m["text"] for m in markers] == ["idx-b"]
    dashed = [it for it in _items(chart, "line")
              if it["attrs"].get("stroke-dasharray") == "5 4"]
    assert [float(d["attrs"]["x1"]) for d in dashed] == pytest.approx([x[RESOLVED]], abs=0.1)
    assert overall["changes"] == [(RESOLVED, "idx-b")]

    classes = [p["attrs"]["class"] for p in points]
    assert classes[:7] == ["decision-baseline"] * 7
    assert classes[9:19] == ["decision-drop"] * 10
    assert classes[7] == classes[19] == "decision-stable"
    assert {p["attrs"]["fill"] for p in points[9:19]} == {DROP_COLOR}
    assert len(_items(chart, "rect", "baseline-windows")) == 1


def test_insufficient_windows_say_the_detectable_drop_and_requests_needed(section, report):
    latest = {row["slice"]: row for row in section["latest"]}
    full = latest["all"]["cells"][2]
    assert (full["metric"], full["decision"]) == ("full_coverage_rate", "insufficient")
    assert "smallest drop it could detect is 0.080" in full["text"]
    # fixed: in one window; anytime: more requests pooled with those since the detector started
    assert "a window would need about 1,200 requests" in full["text"]
    hostile = latest[PAYLOAD]["cells"][0]
    assert hostile["decision"] == "insufficient"
    assert "about 3,456 more requests would do" in hostile["text"]
    assert "a window would need" not in hostile["text"]
    assert latest["all"]["cells"][0]["decision"] == "stable"
    assert latest["all"]["cells"][1]["text"].endswith("episode ongoing")

    html = _drift_html(report[1])
    assert "about 1,200 requests" in html and "about 3,456 more requests" in html
    assert len(re.findall(r'<tr class="latest-row', html)) == 2 + len(STABLE_SLICES) + 1


def test_slices_are_capped_with_moving_slices_first(section, report):
    drawn = [t["slice"] for t in section["timelines"]]
    assert len(drawn) == MAX_DRIFT_SLICES
    assert drawn[:3] == ["all", PAYLOAD, DROP_SLICE]  # two rises, then one drop
    assert section["slices"] == 2 + len(STABLE_SLICES) + 1
    assert section["more_slices"] == section["slices"] - MAX_DRIFT_SLICES
    assert f"{section['more_slices']} more slices" in _drift_html(report[1])


def test_slice_name_with_a_script_tag_is_escaped(report):
    text = report[1]
    escaped = str(markupsafe.escape(PAYLOAD))
    assert PAYLOAD not in text
    assert "<script" not in text
    html = _drift_html(text)
    assert f'<td class="wrap">{escaped}</td>' in html            # the latest-decision table
    assert re.search(r'<text [^>]*class="panel-title">[^<]*' + re.escape(escaped), html)


# ---------------------------------------------------------------------------------------------
# Recall against index size, and retrieval churn


def test_recall_against_size_points_are_the_window_metrics_values(section, warehouse_path):
    con = connect(warehouse_path, read_only=True)
    try:
        expected = con.sql(
            "SELECT CAST(window_start AS DATE), max_index_size, mean_recall, ci_low, ci_high "
            "FROM window_metrics WHERE slice = 'all' AND grain = 'day' AND route = $route "
            "AND k = $k AND gold_version = $gold_version ORDER BY window_start",
            params=SCOPE.params("route", "k", "gold_version")).fetchall()
    finally:
        con.close()
    points = section["size"]["points"]
    assert [(p["day"], p["size"], p["mean_recall"], p["ci_low"], p["ci_high"])
            for p in points] == expected
    chart = section["size"]["chart"]
    circles = _items(chart, "circle", "point")
    assert len(circles) == len(DAYS)
    # Larger index, further right; every point says its day and value.
    by_size = sorted(zip((p["size"] for p in points), circles, strict=True),
                     key=lambda pair: pair[0])
    xs = [float(c["attrs"]["cx"]) for _, c in by_size]
    assert xs == sorted(xs)
    assert "2026-11-24 · idx-b" in circles[-1]["title"]
    legend = [it["text"] for it in _items(chart, "text", "legend")]
    assert legend == ["idx-a", "idx-b"]
    assert section["size"]["caption"]["n"] == N_ALL * len(DAYS)


def test_churn_equals_the_jaccard_overlaps_computed_by_hand(section):
    churn = section["churn"]
    got = [{**row, "mean_jaccard": pytest.approx(row["mean_jaccard"])} for row in churn["rows"]]
    assert got == EXPECTED_CHURN
    by_day = {row["day"]: row for row in churn["days"]}
    day3 = (_jaccard({"x", "z"}, {"x", "y"}) + _jaccard({"a", "e"}, {"a", "b", "e"})) / 2
    assert by_day[DAYS[2]]["churn"] == pytest.approx(1 - day3)
    assert by_day[DAYS[1]]["goldens"] == 1 and by_day[DAYS[2]]["goldens"] == 2
    assert [m["text"] for m in _items(churn["chart"], "text", "marker")] == ["idx-b"]
    assert churn["caption"]["n"] == 3  # r4, r5, r6: the requests behind the compared goldens


# ---------------------------------------------------------------------------------------------
# The whole report


CAPTION = re.compile(
    r'<figure id="(?P<id>[\w-]+)">\s*<figcaption>.*?<span class="meta"[^>]*>'
    r"k=(?P<k>.+?) · route=(?P<route>\S+) · gold set (?P<gold>\S+) · "
    r"n=(?P<n>[\d,]+) scored requests</span>",
    re.S,
)


def test_every_drift_figure_states_k_route_gold_version_and_n(report):
    html = _drift_html(report[1])
    captions = {m["id"]: m for m in CAPTION.finditer(html)}
    assert len(captions) == html.count("<figure")
    expected_n = {
        "fig-drift-1": N_ALL * len(DAYS), "fig-drift-episodes": N_ALL * len(DAYS),
        "fig-drift-latest": N_ALL, "fig-drift-size": N_ALL * len(DAYS), "fig-drift-churn": 3,
    }
    for fig, n in expected_n.items():
        caption = captions[fig]
        assert (caption["route"], caption["gold"]) == (ROUTE, GOLD), fig
        assert int(caption["n"].replace(",", "")) == n, fig
        assert caption["k"] == ("served per request (1–3)" if fig == "fig-drift-churn"
                                else str(K)), fig
    assert html.count("<svg") == MAX_DRIFT_SLICES + 2  # timelines, size, churn


@pytest.mark.parametrize("how", ["no-rows", "no-table"])
def test_without_drift_rows_the_section_says_to_run_drift(tmp_path, how):
    path = build_warehouse(tmp_path / "warehouse.duckdb", drift=False)
    con = connect(path)
    try:
        if how == "no-table":
            con.execute("DROP TABLE drift_events")
        out = write_report(con, tmp_path / "out", route=ROUTE, k=K, gold_version=GOLD)
    finally:
        con.close()
    html = _drift_html(out.read_text(encoding="utf-8"))
    assert "No drift computed yet — run <code>recallwatch drift</code>" in html
    assert "<figure" not in html


@pytest.mark.browser
@needs_chromium
def test_drift_section_draws_in_headless_chromium(report, tmp_path):
    path, _ = report
    dom = chromium(tmp_path, "--dump-dom", path.as_uri()).stdout
    drift = re.search(r'<section id="drift">.*?</section>', dom, re.S).group(0)
    assert "Drift against the baseline" in drift
    assert drift.count('class="episode"') >= 1 and "idx-b" in drift
    assert not re.search(r"<script\b", dom, re.I)

    png = tmp_path / "shot.png"
    shot = chromium(tmp_path, f"--screenshot={png}", "--window-size=1280,12000", path.as_uri())
    assert png.exists(), shot.stderr[-2000:]
    pixels = np.asarray(Image.open(png).convert("RGB"), dtype=np.int16)
    target = np.array([int(DROP_COLOR[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.int16)
    red = np.abs(pixels - target).max(axis=2) <= 10
    # The drop points of slice 'all' were painted, spread over several days.
    assert red.sum() > 300
    columns = np.flatnonzero(red.any(axis=0))
    assert columns.max() - columns.min() > 150
