"""Chart geometry of the report, as inline SVG drawn from plain numbers: timelines of daily
values with shaded intervals and version markers, the recall@k curve, and plain and stacked
horizontal bars. Python computes every coordinate into a `Chart` of element dicts; the template
(charts.html.j2) writes them with every attribute and text autoescaped, so labels taken from the
warehouse stay text. Nothing here reads the warehouse.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date

from pipeline.report.formats import cut, f2

# Fixed colours: the browser test looks for MEAN_COLOR pixels, so keep it in sync with the test.
MEAN_COLOR = "#1f5fbf"
SIZE_COLOR = "#2a9d8f"
PASS_COLOR = "#d9822b"
FC_COLOR = "#7b4fa0"
MARK_COLOR = "#6b7280"
GRID_COLOR = "#e5e7eb"
AXIS_COLOR = "#9ca3af"
SERIES_PALETTE = ("#e4572e", "#2a9d8f", "#7b4fa0", "#d9822b", "#4b5563", "#b8860b")
CAUSE_COLORS = {
    "not_in_index": "#c0392b", "beyond_k": "#d9822b",
    "not_retrieved": "#7b4fa0",
}

SVG_TAGS = frozenset({"rect", "line", "path", "circle", "text"})
WIDTH = 960
LEFT, RIGHT = 64, 24
LEGEND_CHARS = 40
LABEL_CHARS = 22
MARKER_CHARS = 28
MARKER_ROWS = 3   # rows of index-change labels at the top of a timeline
# 7 px per character is a safe estimate for the 12 px system sans-serif.
CHAR_PX = 7


@dataclass
class Chart:
    width: int
    height: int
    label: str
    items: list[dict] = field(default_factory=list)

    def add(self, tag: str, text: str | None = None, title: str | None = None, **attrs) -> None:
        """Append one element; `class_` becomes class, `stroke_width` stroke-width."""
        if tag not in SVG_TAGS:
            raise ValueError(f"unsupported SVG element {tag!r}")
        self.items.append({
            "tag": tag,
            "attrs": {name.rstrip("_").replace("_", "-"): _svg_value(v)
                      for name, v in attrs.items() if v is not None},
            "text": text,
            "title": title,
        })


def _svg_value(v) -> str:
    if isinstance(v, float):
        return f"{v:.1f}"
    return str(v)


@dataclass
class Series:
    label: str
    color: str
    values: list[float | None]
    low: list[float | None] | None = None
    high: list[float | None] | None = None
    tips: list[str] | None = None

    def all_values(self) -> list[float]:
        out = [v for v in self.values if v is not None]
        for bound in (self.low or [], self.high or []):
            out += [v for v in bound if v is not None]
        return out


@dataclass
class Panel:
    title: str
    series: Series
    domain: tuple[float, float]
    tick_format: Callable[[float], str]
    height: int = 200


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """At most `count` round ticks (steps of 1, 2, 2.5 or 5 times a power of ten) in [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = magnitude * 10
    for m in (1, 2, 2.5, 5, 10):
        if (hi - lo) / (m * magnitude) <= count:
            step = m * magnitude
            break
    first = math.ceil(lo / step - 1e-9)
    last = math.floor(hi / step + 1e-9)
    return [round(i * step, 10) for i in range(first, last + 1)]


def unit_domain(values: list[float]) -> tuple[float, float]:
    """A [lo, 1] axis for proportions: starts near the data so a drop stays visible."""
    if not values:
        return 0.0, 1.0
    lo = max(0.0, math.floor((min(values) - 0.02) * 10) / 10)
    return min(lo, 0.8), 1.0


def size_domain(values: list[float | None]) -> tuple[float, float]:
    """An axis around the values with some room, never below zero (counts such as index size)."""
    present = [v for v in values if v is not None]
    if not present:
        return 0.0, 1.0
    lo, hi = min(present), max(present)
    pad = max((hi - lo) * 0.15, hi * 0.02, 1.0)
    return max(0.0, lo - pad), hi + pad


def day_runs(days: list[date], ok: list[bool]) -> list[list[int]]:
    """Indices split into runs of consecutive calendar days where ok holds (gaps break lines)."""
    runs: list[list[int]] = []
    for i, good in enumerate(ok):
        if not good:
            continue
        if runs and runs[-1][-1] == i - 1 and (days[i] - days[i - 1]).days == 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def shorten(text: str, limit: int) -> str:
    """`text` within `limit` character widths (text_width), cut with an ellipsis when wider."""
    if text_width(text) <= limit:
        return text
    used, end = 1.0, 0   # the ellipsis takes one
    while end < len(text) and used + _width(text[end]) <= limit:
        used += _width(text[end])
        end += 1
    return cut(text, end) + "…"


def text_width(text: str) -> float:
    """How wide `text` draws, in widths of an average lowercase letter (CHAR_PX): a capital or
    a digit a fifth wider, an East Asian wide character nearly two, a combining mark none."""
    return sum(_width(ch) for ch in text)


def _width(ch: str) -> float:
    if unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0.0
    if unicodedata.east_asian_width(ch) in ("W", "F"):
        return 1.8
    return 1.2 if ch.isupper() or ch.isdigit() else 1.0


def legend(chart: Chart, x: float, y: float, entries: list[tuple[str, str]]) -> int:
    """Swatch + label entries left to right, wrapping at the right edge; returns rows used."""
    x_start, rows = x, 1
    for label, color in entries:
        short = shorten(label, LEGEND_CHARS)
        width = 12 + 6 + CHAR_PX * text_width(short) + 18
        if x + width > WIDTH - RIGHT and x > x_start:
            x, y, rows = x_start, y + 18, rows + 1
        chart.add("rect", x=x, y=y - 5, width=12, height=10, rx=2, fill=color)
        chart.add("text", short, title=label, x=x + 18, y=y + 4, class_="legend")
        x += width
    return rows


# ---------------------------------------------------------------------------------------------
# Timeline: panels stacked over one day axis


def timeline(days: list[date], panels: list[Panel], markers: list[tuple[date, str, str]],
             label: str) -> Chart:
    """Panels of daily values over one shared day axis, with dashed markers (day, label,
    tooltip) across all of them. A missing day breaks a line rather than bridging it."""
    header, gap, axis = 26, 18, 44
    height = sum(p.height + header for p in panels) + gap * (len(panels) - 1) + axis + 8
    chart = Chart(WIDTH, height, label)
    x_of = _day_scale(days, LEFT, WIDTH - RIGHT)
    tick_days = _tick_days(days)

    top = 8
    plot_top = plot_bottom = top + header
    for panel in panels:
        plot_bottom = _timeline_panel(chart, panel, days, tick_days, x_of, top, header)
        top = plot_bottom + gap
    _timeline_markers(chart, markers, x_of, plot_top, plot_bottom)
    _day_axis(chart, days, tick_days, x_of, plot_bottom)
    return chart


def _day_scale(days: list[date], x0: float, x1: float) -> Callable[[date], float]:
    """x of a day's centre: each day of the span gets an equal slot."""
    d0, d1 = days[0].toordinal() - 0.5, days[-1].toordinal() + 0.5

    def x_of(day: date) -> float:
        return x0 + (day.toordinal() - d0) / (d1 - d0) * (x1 - x0)

    return x_of


def _tick_days(days: list[date]) -> list[date]:
    """Every day for a short span; about a dozen evenly spaced days for a long one."""
    span = days[-1].toordinal() - days[0].toordinal() + 1
    step = 1 if span <= 16 else math.ceil(span / 12)
    return [date.fromordinal(days[0].toordinal() + i) for i in range(0, span, step)]


def _value_scale(domain: tuple[float, float], y_top: float,
                 y_bottom: float) -> Callable[[float], float]:
    """y of a value, clamped to the domain so an outlier stays on its panel."""
    lo, hi = domain

    def y_of(v: float) -> float:
        v = min(max(v, lo), hi)
        return y_bottom - (v - lo) / (hi - lo) * (y_bottom - y_top)

    return y_of


def _timeline_panel(chart: Chart, panel: Panel, days: list[date], tick_days: list[date],
                    x_of: Callable[[date], float], top: float, header: int) -> float:
    """Draw one panel (title, grid, axes, interval band, line, points); return its bottom."""
    chart.add("text", panel.title, x=LEFT, y=top + 14, class_="panel-title")
    y_top, y_bottom = top + header, top + header + panel.height
    y_of = _value_scale(panel.domain, y_top, y_bottom)
    x0, x1 = LEFT, WIDTH - RIGHT
    lo, hi = panel.domain
    for tick in nice_ticks(lo, hi, max(4, panel.height // 32)):
        y = y_of(tick)
        chart.add("line", x1=x0, x2=x1, y1=y, y2=y, stroke=GRID_COLOR)
        chart.add("text", panel.tick_format(tick), x=x0 - 8, y=y + 4, text_anchor="end",
                  class_="tick")
    for day in tick_days:
        chart.add("line", x1=x_of(day), x2=x_of(day), y1=y_top, y2=y_bottom, stroke=GRID_COLOR)
    chart.add("line", x1=x0, x2=x1, y1=y_bottom, y2=y_bottom, stroke=AXIS_COLOR)
    chart.add("line", x1=x0, x2=x0, y1=y_top, y2=y_bottom, stroke=AXIS_COLOR)

    s = panel.series
    if s.low is not None and s.high is not None:
        _interval_band(chart, s, days, x_of, y_of)
    _series_line(chart, s, days, x_of, y_of, width=2.5)
    for i, v in enumerate(s.values):
        if v is not None:
            chart.add("circle", title=s.tips[i] if s.tips else None, cx=x_of(days[i]),
                      cy=y_of(v), r=4, fill=s.color, stroke="#ffffff", stroke_width=1)
    return y_bottom


def _series_line(chart: Chart, s: Series, days: list[date], x_of: Callable[[date], float],
                 y_of: Callable[[float], float], *, width: float) -> None:
    """The series as a line through its days, broken where a day has no value."""
    for run in day_runs(days, [v is not None for v in s.values]):
        if len(run) > 1:
            points = [f"{x_of(days[i]):.1f},{y_of(s.values[i]):.1f}" for i in run]
            chart.add("path", d="M" + " L".join(points), fill="none", stroke=s.color,
                      stroke_width=width, stroke_linejoin="round")


def _interval_band(chart: Chart, s: Series, days: list[date], x_of: Callable[[date], float],
                   y_of: Callable[[float], float]) -> None:
    """Shade [low, high] per run of days; a lone day gets a short bar instead of a polygon."""
    ok = [a is not None and b is not None for a, b in zip(s.low, s.high, strict=True)]
    for run in day_runs(days, ok):
        if len(run) == 1:
            i = run[0]
            chart.add("rect", x=x_of(days[i]) - 5, y=y_of(s.high[i]), width=10,
                      height=max(1.0, y_of(s.low[i]) - y_of(s.high[i])),
                      fill=s.color, fill_opacity=0.18)
            continue
        upper = [f"{x_of(days[i]):.1f},{y_of(s.high[i]):.1f}" for i in run]
        lower = [f"{x_of(days[i]):.1f},{y_of(s.low[i]):.1f}" for i in reversed(run)]
        chart.add("path", d="M" + " L".join(upper + lower) + " Z",
                  fill=s.color, fill_opacity=0.18, stroke="none")


def _timeline_markers(chart: Chart, markers: list[tuple[date, str, str]],
                      x_of: Callable[[date], float], plot_top: float, plot_bottom: float) -> None:
    taken: list[list[tuple[float, float]]] = [[] for _ in range(MARKER_ROWS)]
    for n_marker, (day, text, tip) in enumerate(markers):
        x = x_of(day)
        chart.add("line", title=tip, x1=x, x2=x, y1=plot_top - 4, y2=plot_bottom,
                  stroke=MARK_COLOR, stroke_width=1.5, stroke_dasharray="5 4")
        short = shorten(text, MARKER_CHARS)
        width = 1.15 * CHAR_PX * text_width(short)   # bold
        # Near the right edge the label goes to the left of its line instead of off the chart.
        left = x + 5 + width > WIDTH
        span = (x - 5 - width, x - 5) if left else (x + 5, x + 5 + width)
        # the first row where it covers no other label (else the rows in turn)
        row = next((r for r, spans in enumerate(taken)
                    if all(span[1] < a or b < span[0] for a, b in spans)),
                   n_marker % MARKER_ROWS)
        taken[row].append(span)
        chart.add("text", short, title=tip, x=x - 5 if left else x + 5,
                  y=plot_top + 12 + 14 * row, text_anchor="end" if left else None,
                  class_="marker")


def _day_axis(chart: Chart, days: list[date], tick_days: list[date],
              x_of: Callable[[date], float], plot_bottom: float) -> None:
    for day in tick_days:
        chart.add("text", f"{day:%b} {day.day}", x=x_of(day), y=plot_bottom + 18,
                  text_anchor="middle", class_="tick")
    years = f"{days[0].year}" + (f"–{days[-1].year}" if days[-1].year != days[0].year else "")
    chart.add("text", f"day (UTC), {years}", x=(LEFT + WIDTH - RIGHT) / 2, y=plot_bottom + 38,
              text_anchor="middle", class_="axis-title")


# ---------------------------------------------------------------------------------------------
# Curve and bars


def curve_chart(cutoffs: list[int], series: list[Series], mark_k: int | None,
                label: str) -> Chart:
    """Mean recall per cutoff, one line per series, with the report's k marked."""
    plot_h, axis = 260, 44
    chart = Chart(WIDTH, 0, label)
    x0, x1 = LEFT, WIDTH - RIGHT
    chart.add("text", "Mean recall@k", x=x0, y=22, class_="panel-title")
    rows = legend(chart, x0 + 130, 18, [(s.label, s.color) for s in series])
    y_top = 8 + 30 + 18 * (rows - 1)
    y_bottom = y_top + plot_h
    chart.height = int(y_bottom + axis + 8)
    # Cutoffs are spaced evenly: 1, 3, 5, 10, 20, 50, 100 would crowd the left on a linear axis.
    slot = (x1 - x0) / len(cutoffs)

    def x_of(i: int) -> float:
        return x0 + slot * (i + 0.5)

    y_of = _value_scale((0.0, 1.0), y_top, y_bottom)
    for tick in nice_ticks(0.0, 1.0, 5):
        chart.add("line", x1=x0, x2=x1, y1=y_of(tick), y2=y_of(tick), stroke=GRID_COLOR)
        chart.add("text", f2(tick), x=x0 - 8, y=y_of(tick) + 4, text_anchor="end",
                  class_="tick")
    chart.add("line", x1=x0, x2=x1, y1=y_bottom, y2=y_bottom, stroke=AXIS_COLOR)
    chart.add("line", x1=x0, x2=x0, y1=y_top, y2=y_bottom, stroke=AXIS_COLOR)
    if mark_k in cutoffs:
        x = x_of(cutoffs.index(mark_k))
        chart.add("line", x1=x, x2=x, y1=y_top, y2=y_bottom, stroke=MARK_COLOR,
                  stroke_width=1.5, stroke_dasharray="5 4")
        chart.add("text", f"report k={mark_k}", x=x + 5, y=y_bottom - 8, class_="marker")
    for s_index, s in enumerate(series):
        width = 3 if s_index == 0 else 2
        present = [i for i, v in enumerate(s.values) if v is not None]
        if len(present) > 1:
            d = "M" + " L".join(f"{x_of(i):.1f},{y_of(s.values[i]):.1f}" for i in present)
            chart.add("path", d=d, fill="none", stroke=s.color, stroke_width=width,
                      stroke_linejoin="round")
        for i in present:
            chart.add("circle", title=s.tips[i] if s.tips else None, cx=x_of(i),
                      cy=y_of(s.values[i]), r=4.5 if s_index == 0 else 3.5, fill=s.color,
                      stroke="#ffffff", stroke_width=1)
    for i, cutoff in enumerate(cutoffs):
        chart.add("text", str(cutoff), x=x_of(i), y=y_bottom + 18, text_anchor="middle",
                  class_="tick")
    chart.add("text", "cutoff k", x=(x0 + x1) / 2, y=y_bottom + 38, text_anchor="middle",
              class_="axis-title")
    return chart


def bar_chart(rows: list[tuple[str, float, str, str]], label: str) -> Chart:
    """Horizontal bars: (label, value, colour, text after the bar)."""
    row_h, label_w, text_w = 30, 150, 190
    chart = Chart(WIDTH, row_h * len(rows) + 16, label)
    x0, x1 = LEFT + label_w - 40, WIDTH - RIGHT - text_w
    top = max((value for _, value, _, _ in rows), default=0) or 1
    for i, (name, value, color, text) in enumerate(rows):
        y = 8 + i * row_h
        chart.add("text", shorten(name, LABEL_CHARS), title=name, x=x0 - 10,
                  y=y + row_h / 2 + 4, text_anchor="end", class_="bar-label")
        width = max(1.0, value / top * (x1 - x0))
        chart.add("rect", title=f"{name}: {text}", x=x0, y=y + 5, width=width,
                  height=row_h - 10, rx=2, fill=color)
        chart.add("text", text, x=x0 + width + 8, y=y + row_h / 2 + 4, class_="bar-value")
    return chart


def stacked_bars(rows: list[tuple[str, list[tuple[float, str, str]], str]],
                 entries: list[tuple[str, str]], label: str) -> Chart:
    """One 100% bar per row: (label, [(value, colour, tooltip)], text after the bar), under a
    legend of (label, colour) entries."""
    row_h, label_w, text_w = 30, 150, 250
    chart = Chart(WIDTH, 0, label)
    x0, x1 = LEFT + label_w - 40, WIDTH - RIGHT - text_w
    header = 26 + 18 * (legend(chart, x0, 12, entries) - 1)
    chart.height = header + row_h * len(rows) + 12
    for i, (name, segments, text) in enumerate(rows):
        y = header + i * row_h
        chart.add("text", shorten(name, LABEL_CHARS), title=name, x=x0 - 10,
                  y=y + row_h / 2 + 4, text_anchor="end", class_="bar-label")
        total = sum(value for value, _, _ in segments)
        x = float(x0)
        if not total:
            chart.add("rect", x=x0, y=y + 5, width=x1 - x0, height=row_h - 10,
                      fill=GRID_COLOR)
        for value, color, tip in segments:
            if not value:
                continue
            width = value / total * (x1 - x0)
            chart.add("rect", title=tip, x=x, y=y + 5, width=width, height=row_h - 10,
                      fill=color)
            x += width
        chart.add("text", text, x=x1 + 10, y=y + row_h / 2 + 4, class_="bar-value")
    return chart


# ---------------------------------------------------------------------------------------------
# Drift: daily values against their baseline, and a scatter of a value against a count

DROP_COLOR = "#c0392b"
RISE_COLOR = "#2e8b57"
STABLE_COLOR = "#9ca3af"
BASELINE_COLOR = "#374151"
# Fill and stroke of a window's point per drift decision; an insufficient window is hollow.
DECISION_STYLES = {
    "drop": (DROP_COLOR, "#ffffff"),
    "rise": (RISE_COLOR, "#ffffff"),
    "stable": (STABLE_COLOR, "#ffffff"),
    "insufficient": ("#ffffff", STABLE_COLOR),
    "baseline": (MEAN_COLOR, "#ffffff"),
}
EPISODE_COLORS = {"drop": DROP_COLOR, "rise": RISE_COLOR}
EPISODE_OPACITY = 0.12


@dataclass
class Episode:
    """A shaded stretch of a drift timeline: from the day it opened to the day it resolved
    (None while open), in the colour of its direction (drop | rise)."""
    start: date
    end: date | None
    direction: str
    tip: str


def drift_timeline(days: list[date], panel: Panel, baseline: list[float | None],
                   margin: list[float | None], decisions: list[str], episodes: list[Episode],
                   markers: list[tuple[date, str, str]], label: str) -> Chart:
    """One panel of daily values against their baseline over a day axis.

    panel.series holds the window values; its low/high are the interval of the difference
    placed at the baseline (baseline + delta_low, baseline + delta_high), drawn as whiskers, so
    a drop is a whisker wholly below the band baseline ± margin and a rise one wholly above.
    The baseline is a dashed step per day. Points take the colour of their decision
    (DECISION_STYLES; insufficient is hollow); windows that form a baseline are also marked
    along the bottom. Episodes are shaded from the start of the day they opened to the start of
    the day they resolved (to the right edge while open). Markers as in `timeline`.
    """
    chart = Chart(WIDTH, 0, label)
    entries = [
        ("drop", DROP_COLOR), ("rise", RISE_COLOR), ("stable", STABLE_COLOR),
        ("insufficient (hollow)", STABLE_COLOR), ("baseline window", MEAN_COLOR),
        ("baseline (dashed) ± margin", BASELINE_COLOR), ("drop episode (shaded)", "#f3d5d1"),
    ]
    header = 26
    top = 8 + 18 * legend(chart, LEFT, 14, entries)
    y_top, y_bottom = top + header, top + header + panel.height
    chart.height = int(y_bottom + 44 + 8)
    x_of = _day_scale(days, LEFT, WIDTH - RIGHT)
    half = x_of(days[0]) - LEFT  # half a day's slot
    y_of = _value_scale(panel.domain, y_top, y_bottom)

    for episode in episodes:
        x0 = max(LEFT, x_of(episode.start) - half)
        x1 = WIDTH - RIGHT if episode.end is None else min(WIDTH - RIGHT, x_of(episode.end) - half)
        chart.add("rect", title=episode.tip, x=x0, y=y_top, width=max(1.0, x1 - x0),
                  height=panel.height, fill=EPISODE_COLORS.get(episode.direction, MARK_COLOR),
                  fill_opacity=EPISODE_OPACITY, class_="episode")
    tick_days = _tick_days(days)
    # Title, grid and axes of an ordinary timeline panel; the layers below are drift's own.
    bare = Series(panel.series.label, panel.series.color, [None] * len(days))
    _timeline_panel(chart, Panel(panel.title, bare, panel.domain, panel.tick_format,
                                 panel.height), days, tick_days, x_of, top, header)

    # Baseline and margin band are steps, one level per day's slot: each window has its own.
    banded = [b is not None and m is not None for b, m in zip(baseline, margin, strict=True)]
    for run in day_runs(days, banded):
        upper = [f"{x_of(days[i]) + dx:.1f},{y_of(baseline[i] + margin[i]):.1f}"
                 for i in run for dx in (-half, half)]
        lower = [f"{x_of(days[i]) + dx:.1f},{y_of(baseline[i] - margin[i]):.1f}"
                 for i in reversed(run) for dx in (half, -half)]
        chart.add("path", d="M" + " L".join(upper + lower) + " Z", fill=BASELINE_COLOR,
                  fill_opacity=0.15, stroke="none", class_="margin-band")
    for run in day_runs(days, [b is not None for b in baseline]):
        steps = [f"{x_of(days[i]) + dx:.1f},{y_of(baseline[i]):.1f}"
                 for i in run for dx in (-half, half)]
        chart.add("path", d="M" + " L".join(steps), fill="none", stroke=BASELINE_COLOR,
                  stroke_width=1.5, stroke_dasharray="3 3", class_="baseline")
    for run in day_runs(days, [d == "baseline" for d in decisions]):
        first, last = days[run[0]], days[run[-1]]
        chart.add("rect", title=f"baseline windows {first} – {last}", x=x_of(first) - half,
                  y=y_bottom - 5, width=x_of(last) - x_of(first) + 2 * half, height=5,
                  fill=MEAN_COLOR, fill_opacity=0.5, class_="baseline-windows")

    s = panel.series
    _series_line(chart, s, days, x_of, y_of, width=1.5)
    for i, v in enumerate(s.values):
        if v is None:
            continue
        fill, stroke = DECISION_STYLES.get(decisions[i], (MARK_COLOR, "#ffffff"))
        if s.low is not None and s.high is not None and s.low[i] is not None \
                and s.high[i] is not None:
            chart.add("line", x1=x_of(days[i]), x2=x_of(days[i]), y1=y_of(s.low[i]),
                      y2=y_of(s.high[i]), stroke=stroke if fill == "#ffffff" else fill,
                      stroke_width=1.5, class_="whisker")
        css = f"decision-{decisions[i]}" if decisions[i] in DECISION_STYLES else "decision"
        chart.add("circle", title=s.tips[i] if s.tips else None, cx=x_of(days[i]),
                  cy=y_of(v), r=4.5, fill=fill, stroke=stroke, stroke_width=1.5, class_=css)
    _timeline_markers(chart, markers, x_of, y_top, y_bottom)
    _day_axis(chart, days, tick_days, x_of, y_bottom)
    return chart


@dataclass
class Point:
    x: float
    y: float
    low: float | None = None
    high: float | None = None
    tip: str | None = None


def scatter_chart(groups: list[tuple[str, str, list[Point]]], title: str, x_title: str,
                  x_format: Callable[[float], str], label: str) -> Chart:
    """Points of (label, colour, points) groups under a legend of the groups: y on a proportion
    axis (`unit_domain`) with whiskers [low, high], x on a count axis (`size_domain`); the
    points of a group are joined in x order by a thin line."""
    plot_h, axis = 260, 44
    chart = Chart(WIDTH, 0, label)
    x0, x1 = LEFT, WIDTH - RIGHT
    chart.add("text", title, x=x0, y=22, class_="panel-title")
    rows = legend(chart, x0, 44, [(name, color) for name, color, _ in groups])
    y_top = 44 + 18 * rows
    y_bottom = y_top + plot_h
    chart.height = int(y_bottom + axis + 8)
    points = [p for _, _, group in groups for p in group]
    x_lo, x_hi = size_domain([p.x for p in points])
    ys = [p.y for p in points] + [v for p in points for v in (p.low, p.high) if v is not None]
    y_of = _value_scale(unit_domain(ys), y_top, y_bottom)

    def x_of(x: float) -> float:
        return x0 + (x - x_lo) / (x_hi - x_lo) * (x1 - x0)

    y_lo, y_hi = unit_domain(ys)
    for tick in nice_ticks(y_lo, y_hi, 6):
        chart.add("line", x1=x0, x2=x1, y1=y_of(tick), y2=y_of(tick), stroke=GRID_COLOR)
        chart.add("text", f2(tick), x=x0 - 8, y=y_of(tick) + 4, text_anchor="end",
                  class_="tick")
    for tick in nice_ticks(x_lo, x_hi, 6):
        chart.add("line", x1=x_of(tick), x2=x_of(tick), y1=y_top, y2=y_bottom, stroke=GRID_COLOR)
        chart.add("text", x_format(tick), x=x_of(tick), y=y_bottom + 18, text_anchor="middle",
                  class_="tick")
    chart.add("line", x1=x0, x2=x1, y1=y_bottom, y2=y_bottom, stroke=AXIS_COLOR)
    chart.add("line", x1=x0, x2=x0, y1=y_top, y2=y_bottom, stroke=AXIS_COLOR)
    for _, color, group in groups:
        ordered = sorted(group, key=lambda p: p.x)
        if len(ordered) > 1:
            chart.add("path", d="M" + " L".join(f"{x_of(p.x):.1f},{y_of(p.y):.1f}"
                                                for p in ordered),
                      fill="none", stroke=color, stroke_width=1, stroke_opacity=0.5)
        for p in ordered:
            if p.low is not None and p.high is not None:
                chart.add("line", x1=x_of(p.x), x2=x_of(p.x), y1=y_of(p.low), y2=y_of(p.high),
                          stroke=color, stroke_width=1.5, stroke_opacity=0.6)
            chart.add("circle", title=p.tip, cx=x_of(p.x), cy=y_of(p.y), r=4.5, fill=color,
                      stroke="#ffffff", stroke_width=1, class_="point")
    chart.add("text", x_title, x=(x0 + x1) / 2, y=y_bottom + 38, text_anchor="middle",
              class_="axis-title")
    return chart
