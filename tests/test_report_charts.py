"""Tests of pipeline.report.charts: the chart geometry is plain arithmetic on numbers and dates,
checked here without a warehouse: round axis ticks, lines broken at calendar gaps, proportion
axes that keep a drop visible, and labels that stay inside the chart."""

from __future__ import annotations

import ast
from datetime import date, timedelta
from pathlib import Path

import pytest

import pipeline.report.charts as charts
from pipeline.report.charts import (
    LEFT,
    RIGHT,
    WIDTH,
    Chart,
    Panel,
    Series,
    day_runs,
    legend,
    nice_ticks,
    timeline,
    unit_domain,
)
from pipeline.report.formats import f2

NOV = [date(2026, 11, 1) + timedelta(days=i) for i in range(8)]
# The estimate the charts use for the width of a character of 12 px sans-serif.
CHAR_PX = charts.CHAR_PX


def _items(chart: Chart, tag: str, css_class: str | None = None) -> list[dict]:
    return [it for it in chart.items
            if it["tag"] == tag and (css_class is None or it["attrs"].get("class") == css_class)]


@pytest.mark.parametrize(("lo", "hi", "count", "expected"), [
    (0.0, 1.0, 5, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    (0.5, 1.0, 6, [0.5, 0.6, 0.7, 0.8, 0.9, 1.0]),
    (0.0, 10.0, 4, [0.0, 2.5, 5.0, 7.5, 10.0]),
    (180_000, 242_300, 4, [180_000, 200_000, 220_000, 240_000]),
])
def test_nice_ticks_are_round_steps_inside_the_range(lo, hi, count, expected):
    assert nice_ticks(lo, hi, count) == expected


def test_nice_ticks_of_an_empty_range_is_its_one_value():
    assert nice_ticks(0.5, 0.5) == [0.5]


def test_runs_split_at_calendar_gaps_not_only_at_missing_values():
    days = [date(2026, 11, 1), date(2026, 11, 2), date(2026, 11, 3), date(2026, 11, 5),
            date(2026, 11, 6)]
    # Adjacent rows two days apart must not be joined into one line.
    assert day_runs(days, [True] * 5) == [[0, 1, 2], [3, 4]]
    assert day_runs(days, [True, True, False, True, True]) == [[0, 1], [3, 4]]
    assert day_runs(days, [False, True, False, False, True]) == [[1], [4]]
    assert day_runs(days, [False] * 5) == []


@pytest.mark.parametrize(("values", "expected"), [
    ([0.55, 0.93], (0.5, 1.0)),   # starts just under the lowest value
    ([0.97, 0.99], (0.8, 1.0)),   # never narrower than [0.8, 1]: small noise stays small
    ([0.01, 0.4], (0.0, 1.0)),    # never below zero
    ([], (0.0, 1.0)),
])
def test_unit_domain_starts_near_the_data_and_ends_at_one(values, expected):
    assert unit_domain(values) == pytest.approx(expected)


def _one_panel_timeline(days, values, markers=()) -> Chart:
    series = Series("mean recall@5", "#1f5fbf", values)
    panel = Panel("Mean recall", series, unit_domain([v for v in values if v is not None]), f2)
    return timeline(days, [panel], list(markers), "test timeline")


def test_timeline_marker_near_the_right_edge_is_anchored_to_its_left():
    label = "idx-2026-11-rebuild"
    chart = _one_panel_timeline(NOV, [0.9] * len(NOV), [
        (NOV[1], label, "day 2"),
        (NOV[-1], label, "last day"),
    ])
    lines = [it for it in _items(chart, "line") if it["title"] in ("day 2", "last day")]
    texts = _items(chart, "text", "marker")
    assert [t["title"] for t in texts] == ["day 2", "last day"]
    for line, text in zip(lines, texts, strict=True):
        x_line, x_text = float(line["attrs"]["x1"]), float(text["attrs"]["x"])
        width = CHAR_PX * len(text["text"])
        if text["attrs"].get("text-anchor") == "end":
            assert x_text < x_line and x_text - width >= 0
        else:
            assert x_text > x_line and x_text + width <= WIDTH
    early, late = texts
    assert "text-anchor" not in early["attrs"]
    assert late["attrs"]["text-anchor"] == "end"


def test_timeline_breaks_its_line_at_a_missing_day_but_keeps_every_point():
    days = NOV[:3] + NOV[4:6]  # Nov 4 has no row
    chart = _one_panel_timeline(days, [0.9, 0.8, 0.85, 0.6, 0.7])
    lines = [it for it in _items(chart, "path") if it["attrs"].get("fill") == "none"]
    assert [it["attrs"]["d"].count("L") for it in lines] == [2, 1]  # 3 points, then 2
    assert len(_items(chart, "circle")) == 5


def test_timeline_shades_a_lone_day_with_a_bar_and_a_run_with_a_closed_band():
    days = [NOV[0], NOV[2], NOV[3]]
    series = Series("pass rate", "#d9822b", [0.8, 0.7, 0.75], [0.7, 0.6, 0.65],
                    [0.9, 0.8, 0.85])
    chart = timeline(days, [Panel("Pass rate", series, (0.5, 1.0), f2)], [], "bands")
    shaded = [it for it in chart.items if "fill-opacity" in it["attrs"]]
    assert [it["tag"] for it in shaded] == ["rect", "path"]
    assert shaded[1]["attrs"]["d"].endswith(" Z")
    # The band of the two-day run has two upper and two lower corners.
    assert shaded[1]["attrs"]["d"].count(",") == 4


def test_timeline_height_fits_its_panels_and_x_axis():
    values = [0.9] * len(NOV)
    one = _one_panel_timeline(NOV, values)
    assert one.height == 26 + 200 + 44 + 8
    day_labels = _items(one, "text", "tick")
    assert "Nov 1" in [t["text"] for t in day_labels]
    assert all(float(t["attrs"]["y"]) < one.height for t in one.items if t["tag"] == "text")


def test_legend_wraps_long_entries_and_keeps_them_inside_the_chart():
    chart = Chart(WIDTH, 100, "legend")
    entries = [(f"index version number {i} of a long rebuild", "#123456") for i in range(6)]
    rows = legend(chart, LEFT + 130, 18, entries)
    swatches = _items(chart, "rect")
    assert rows > 1
    assert len({s["attrs"]["y"] for s in swatches}) == rows
    for text in _items(chart, "text", "legend"):
        assert float(text["attrs"]["x"]) + CHAR_PX * len(text["text"]) <= WIDTH - RIGHT


def test_chart_refuses_elements_other_than_its_shapes():
    with pytest.raises(ValueError, match="unsupported SVG element 'script'"):
        Chart(WIDTH, 10, "x").add("script", "alert(1)")


def test_chart_geometry_imports_nothing_that_reads_the_warehouse():
    tree = ast.parse(Path(charts.__file__).read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {m for m in imported if m.split(".")[0] == "duckdb"}
    assert not imported & {"pipeline.warehouse", "pipeline.report.reads",
                           "pipeline.report.scope", "pipeline.report.sections"}


@pytest.mark.parametrize(("text", "limit", "kept"), [
    ("Cafe\u0301 au lait", 4, "Caf"),          # e and its accent stay together
    ("go \U0001f1e9\U0001f1ea now", 4, "go "),   # a flag's two regional indicators
    ("\U0001f1e9\U0001f1ea\U0001f1eb\U0001f1f7", 3, "\U0001f1e9\U0001f1ea"),
    ("a\U0001f469\u200d\U0001f4bb b", 3, "a"),   # an emoji sequence joined by ZWJ
    ("ok\U0001f44d\U0001f3fd", 3, "ok"),         # an emoji and its skin-tone modifier
    ("plain text", 5, "plain"),
])
def test_text_is_cut_between_the_characters_a_reader_sees(text, limit, kept):
    # cut at a code point: a lone regional indicator or a letter without its accent showed
    from pipeline.report.formats import cut

    assert cut(text, limit) == kept


def test_labels_are_shortened_by_how_wide_they_draw_not_by_their_count():
    # 22 capitals, or 22 CJK characters, are wider than the 22 lowercase letters the label
    # space holds: the start of "PROD-EMBEDDINGS-..." was drawn off the chart's left edge
    for name in ("PROD-EMBEDDINGS-HNSW-M32-EF256", "索引版本二〇二六年十一月一日重建",
                 "idx-2026-11-01-hnsw-m32-ef256"):
        short = charts.shorten(name, charts.LABEL_CHARS)
        assert short.endswith("…") and charts.text_width(short) <= charts.LABEL_CHARS
    assert charts.shorten("idx-v2", charts.LABEL_CHARS) == "idx-v2"
    # the cut keeps an accent with its letter
    assert charts.shorten("e\u0301" * 30, 10) == "e\u0301" * 9 + "…"
