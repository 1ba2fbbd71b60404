"""The report's drift section, for one scope at grain 'day': what the drift step decided
(drift_events) and two views of the index moving underneath. Per slice ('all' first, then the
slices with a drop or rise, at most MAX_DRIFT_SLICES drawn) a timeline of mean recall against
its baseline with the decisions, the episodes and the index changes; the table of episodes in
all three metrics; the latest decision of every slice (for an insufficient window, the smallest
drop it could see and the requests a window would need); daily mean recall against the index
size (window_metrics, slice 'all'); and retrieval churn, the Jaccard overlap of a golden's
served chunks from one day it is asked to the next. Its queries are sql/report_drift.sql.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date

import duckdb

from pipeline.config import parse_baseline
from pipeline.errors import RecallwatchError
from pipeline.report.charts import (
    MEAN_COLOR,
    SERIES_PALETTE,
    SIZE_COLOR,
    Episode,
    Panel,
    Point,
    Series,
    drift_timeline,
    scatter_chart,
    shorten,
    timeline,
    unit_domain,
)
from pipeline.report.formats import compact, count, f2, f3, interval
from pipeline.report.reads import rows, script_rows, tables
from pipeline.report.scope import Scope
from pipeline.warehouse import queries

MAX_DRIFT_SLICES = 8
METRIC_NAMES = {
    "mean_recall": "mean recall", "pass_rate": "pass rate",
    "full_coverage_rate": "full coverage",
}
DECISIONS = ("drop", "rise", "stable", "insufficient", "baseline")
VALUE_COLOR = "#4b5563"
CHURN_COLOR = "#b8860b"
SLICE_TITLE_CHARS = 60
NEVER_COMPARED_DAYS = 14   # days of a slice, all forming a baseline, before the report says so


def drift_section(con: duckdb.DuckDBPyConnection, scope: Scope, daily: list[dict],
                  served_k_text: str) -> dict | None:
    """The drift section, or None while drift_events is missing or holds nothing for the
    scope (the report then says to run `recallwatch drift`). `daily` is the report's daily
    series (daily_recall of report_sections.sql) the recall-against-size figure is drawn from;
    `served_k_text` is the k of per-request numbers, which churn is."""
    if scope.k is None or "drift_events" not in tables(con):
        return None
    by_scope = scope.params("route", "k", "gold_version")
    slices = rows(con, _drift_sql("drift_slices"), **by_scope)
    if not slices:
        return None
    shown = [row["slice"] for row in slices[:MAX_DRIFT_SLICES]]
    episodes = rows(con, _drift_sql("drift_episodes"), **by_scope)
    for e in episodes:
        e["css"] = _decision_css(e["direction"])
        worst = e["worst"] or {}
        e["worst_delta"] = _signed(worst.get("delta"))
        e["worst_interval"] = interval(worst.get("low"), worst.get("high"))
    windows: dict[str, list[dict]] = defaultdict(list)
    for row in rows(con, _drift_sql("drift_timeline"), **by_scope, slices=shown):
        windows[row["slice"]].append(row)
    timelines = [
        slice_timeline(scope, name, windows[name],
                       [e for e in episodes if e["slice"] == name and e["metric"] == "mean_recall"])
        for name in shown if windows[name]
    ]
    # n of the tables: the scored requests of the windows drift judged, in slice 'all' when
    # it has mean-recall windows (else the first slice drawn).
    overall = next((name for name in shown if windows[name]), shown[0])
    latest = rows(con, _drift_sql("drift_latest"), **by_scope)
    return {
        "timelines": timelines,
        "slices": len(slices),
        "more_slices": max(0, len(slices) - MAX_DRIFT_SLICES),
        "episodes": episodes,
        "metric_names": METRIC_NAMES,
        "latest": latest_decisions(latest, [row["slice"] for row in slices]),
        "latest_caption": scope.caption(_latest_n(latest, overall)),
        "size": size_section(scope, daily),
        "churn": churn_section(con, scope, served_k_text),
        "caption": scope.caption(sum(row["n"] for row in windows[overall])),
    }


def _drift_sql(name: str) -> str:
    """A named query of sql/report_drift.sql."""
    return queries("report_drift")[name]


def _decision_css(decision: str | None) -> str:
    """The CSS class of a decision badge; a value the template does not know gets a plain one
    (the class attribute never carries arbitrary text from the warehouse)."""
    return f"decision-{decision}" if decision in DECISIONS else "decision-other"


def _latest_n(latest: list[dict], name: str) -> int:
    """Scored requests of the latest mean-recall window of one slice."""
    return next((row["n"] for row in latest
                 if row["slice"] == name and row["metric"] == "mean_recall"), 0)


# ---------------------------------------------------------------------------------------------
# Timeline per slice


def slice_timeline(scope: Scope, name: str, windows: list[dict], episodes: list[dict]) -> dict:
    """The drift timeline of one slice's mean-recall windows: value, baseline ± margin,
    whiskers of the difference, decisions, shaded episodes, and a marker at each change point
    labelled with the index version it brought."""
    days = [row["day"] for row in windows]
    values = Series(
        f"mean recall@{scope.k}", VALUE_COLOR, [row["value"] for row in windows],
        [_plus(row["baseline_value"], row["delta_low"]) for row in windows],
        [_plus(row["baseline_value"], row["delta_high"]) for row in windows],
        [_window_tip(scope, row) for row in windows],
    )
    baseline = [row["baseline_value"] for row in windows]
    margin = [row["margin"] for row in windows]
    domain_values = values.all_values() + [
        b + sign * m for b, m in zip(baseline, margin, strict=True)
        if b is not None and m is not None for sign in (-1, 1)
    ]
    markers = [
        (row["day"], row["index_version"] or "new index",
         f"{row['day']}: first window of index version {row['index_version'] or '(unknown)'}")
        for row in windows if row["change_point"]
    ]
    shaded = [
        Episode(e["opened"], e["resolved"], e["direction"], _episode_tip(e)) for e in episodes
    ]
    chart = drift_timeline(
        days,
        Panel(f"Mean recall@{scope.k}, slice {shorten(name, SLICE_TITLE_CHARS)}", values,
              unit_domain(domain_values), f2, height=220),
        baseline, margin, [row["decision"] for row in windows], shaded, markers,
        f"Daily mean recall@{scope.k} of slice {name} against its baseline, with drift "
        "decisions, episodes and index changes",
    )
    return {
        "slice": name,
        "chart": chart,
        "n": sum(row["n"] for row in windows),
        "first": days[0],
        "last": days[-1],
        "decisions": {d: sum(row["decision"] == d for row in windows) for d in DECISIONS},
        # two weeks of days and not one compared though a first:N or trailing:N baseline of
        # fewer days would have formed: index versions that serve fewer days, or days served
        # by several versions at once, which never join one; the chart alone hides it
        "never_compared": _never_compared(windows),
        "changes": [(day, text) for day, text, _ in markers],
        "caption": scope.caption(sum(row["n"] for row in windows)),
    }


def _never_compared(windows: list[dict]) -> str | None:
    """The slice's baseline (first:N or trailing:N) when NEVER_COMPARED_DAYS of its days and
    more all formed a baseline though the days it needs are fewer (a trailing baseline in
    anytime mode: N and the gap of N before the day judged), else None."""
    if len(windows) < NEVER_COMPARED_DAYS or any(r["decision"] != "baseline" for r in windows):
        return None
    text = windows[-1].get("baseline")
    try:
        baseline = parse_baseline(text) if text else None
    except RecallwatchError:   # a row of a release that stored another spelling
        return None
    if baseline is None or baseline.windows is None or (
            baseline.windows + (windows[-1].get("gap") or 0) >= NEVER_COMPARED_DAYS):
        return None
    return text


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _signed(x: float | None) -> str:
    return "—" if x is None else f"{x:+.3f}"


def _window_tip(scope: Scope, row: dict) -> str:
    parts = [f"{row['day']} · mean recall@{scope.k} {f3(row['value'])}"]
    if row["baseline_value"] is not None:
        parts.append(f"baseline {f3(row['baseline_value'])}")
    if row["delta"] is not None:
        parts.append(f"Δ {_signed(row['delta'])} {interval(row['delta_low'], row['delta_high'])}")
    parts.append(row["decision"] + ("" if row["state"] == "none" else f" ({row['state']})"))
    if row["decision"] == "insufficient":
        parts.append(_insufficient_text(row))
    parts.append(f"n={count(row['n'])}")
    if row["index_version"] is not None:
        parts.append(row["index_version"])
    return " · ".join(parts)


def _episode_tip(e: dict) -> str:
    end = f"resolved {e['resolved']}" if e["resolved"] is not None else "still open"
    return f"{e['direction']} episode of {METRIC_NAMES.get(e['metric'], e['metric'])}: " \
           f"opened {e['opened']}, {end}"


# ---------------------------------------------------------------------------------------------
# Latest decision per slice


def latest_decisions(latest: list[dict], order: list[str]) -> list[dict]:
    """One row per slice (in `order`): its latest day and, per metric, the decision with a
    sentence saying what it rests on."""
    by_slice: dict[str, dict[str, dict]] = defaultdict(dict)
    for row in latest:
        by_slice[row["slice"]][row["metric"]] = row
    out = []
    for name in order:
        metrics = by_slice.get(name, {})
        if not metrics:
            continue
        out.append({
            "slice": name,
            "day": max(row["day"] for row in metrics.values()),
            "cells": [
                {"metric": metric, "decision": metrics[metric]["decision"],
                 "css": _decision_css(metrics[metric]["decision"]),
                 "day": metrics[metric]["day"], "text": decision_text(metrics[metric])}
                if metric in metrics else None
                for metric in METRIC_NAMES
            ],
        })
    return out


def decision_text(row: dict) -> str:
    """What a window's decision rests on, in one sentence."""
    decision = row["decision"]
    if decision == "baseline":
        return f"forms the baseline: {f3(row['value'])}, n={count(row['n'])}"
    if decision == "insufficient":
        text = _insufficient_text(row)
        # the day alone decides nothing, but with the recovered days before it pooled the
        # difference lies within the margin (pipeline/drift.py)
        return text + ("; episode resolved, with the days back since the episode's last "
                       "beyond the margin" if row["state"] == "resolved" else "")
    text = (f"{f3(row['value'])} vs baseline {f3(row['baseline_value'])}: Δ "
            f"{_signed(row['delta'])} {interval(row['delta_low'], row['delta_high'])}, margin "
            f"{f3(row['margin'])}, n={count(row['n'])}")
    if row["state"] in ("opened", "ongoing"):
        text += f"; episode {row['state']}"
    elif row["state"] == "resolved":
        text += "; episode resolved"
    return text


def _insufficient_text(row: dict) -> str:
    parts = [f"too few requests to decide (n={count(row['n'])})"]
    if row["min_detectable_delta"] is not None:
        parts.append(f"the smallest drop it could detect is {f3(row['min_detectable_delta'])}")
    if row["n_needed"] is not None and str(row.get("method") or "").startswith("e_detector"):
        # anytime: evidence pools over the windows since the detector started
        parts.append(f"about {count(row['n_needed'])} more requests would do")
    elif row["n_needed"] is not None:
        parts.append(f"a window would need about {count(row['n_needed'])} requests")
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------------
# Mean recall against index size


def size_section(scope: Scope, daily: list[dict]) -> dict | None:
    """Daily mean recall (slice 'all') with its interval against the day's largest index size,
    one colour per set of index versions serving the day."""
    points = [row for row in daily
              if row["mean_recall"] is not None and row["max_index_size"] is not None]
    if not points:
        return None
    groups: dict[str, list[Point]] = {}
    for row in points:
        versions = ", ".join(row["index_versions"] or []) or "unknown version"
        groups.setdefault(versions, []).append(Point(
            row["max_index_size"], row["mean_recall"], row["ci_low"], row["ci_high"],
            f"{row['day']} · {versions} · index size {count(row['max_index_size'])} · mean "
            f"recall@{scope.k} {f3(row['mean_recall'])} "
            f"{interval(row['ci_low'], row['ci_high'])} · n={count(row['n'])}",
        ))
    colors = [MEAN_COLOR, *SERIES_PALETTE]
    chart = scatter_chart(
        [(name, colors[i % len(colors)], group) for i, (name, group) in enumerate(groups.items())],
        f"Mean recall@{scope.k} per day (whiskers: interval)",
        "largest index size of the day (chunks)", compact,
        f"Daily mean recall@{scope.k} against the index size, by index version",
    )
    return {
        "chart": chart,
        "points": [
            {"day": row["day"], "size": row["max_index_size"], "mean_recall": row["mean_recall"],
             "ci_low": row["ci_low"], "ci_high": row["ci_high"], "n": row["n"],
             "versions": row["index_versions"] or []}
            for row in points
        ],
        "skipped": len(daily) - len(points),
        "caption": scope.caption(sum(row["n"] for row in points)),
    }


# ---------------------------------------------------------------------------------------------
# Retrieval churn


def churn_section(con: duckdb.DuckDBPyConnection, scope: Scope,
                  served_k_text: str) -> dict | None:
    """Retrieval churn per day: 1 − the mean Jaccard overlap of each golden's served chunks
    with the golden's previous day, over the index versions of the day (a golden asked under
    two versions counts once per version), with the goldens compared below and a marker where
    an index version first appears."""
    found = script_rows(con, "report_churn", **scope.params("route", "gold_version"))
    if not found:
        return None
    per_day: dict[date, list[dict]] = defaultdict(list)
    for row in found:
        per_day[row["day"]].append(row)
    days = sorted(per_day)
    goldens = [sum(row["goldens"] for row in per_day[day]) for day in days]
    overlap = [sum(row["mean_jaccard"] * row["goldens"] for row in per_day[day]) / g
               for day, g in zip(days, goldens, strict=True)]
    churn = [1.0 - o for o in overlap]
    tips = [
        f"{day} · churn {f3(c)} (mean Jaccard {f3(o)}) over {g:,} goldens · "
        + "; ".join(f"{row['index_version']}: {f3(row['mean_jaccard'])} ({row['goldens']:,})"
                    for row in per_day[day])
        for day, c, o, g in zip(days, churn, overlap, goldens, strict=True)
    ]
    seen = {row["index_version"] for row in per_day[days[0]]}
    markers = []
    for day in days[1:]:
        new = sorted({row["index_version"] for row in per_day[day]} - seen)
        if new:
            markers.append((day, ", ".join(new), f"{day}: first compared under {', '.join(new)}"))
            seen.update(new)
    top = max(0.1, min(1.0, (int(max(churn) * 10) + 1) / 10))
    chart = timeline(
        days,
        [
            Panel("Retrieval churn: 1 − mean Jaccard with the golden's previous day",
                  Series("churn", CHURN_COLOR, churn, tips=tips), (0.0, top), f2, height=180),
            Panel("Goldens compared", Series(
                "goldens", SIZE_COLOR, goldens,
                tips=[f"{day} · {g:,} goldens compared" for day, g in zip(days, goldens,
                                                                          strict=True)]),
                  (0.0, max(goldens) * 1.15), compact, height=100),
        ],
        markers,
        "Daily retrieval churn of the goldens asked again, and how many were compared",
    )
    return {
        "chart": chart,
        "rows": found,
        "days": [{"day": day, "goldens": g, "mean_jaccard": o, "churn": c}
                 for day, g, o, c in zip(days, goldens, overlap, churn, strict=True)],
        "caption": scope.caption(sum(row["requests"] for row in found), served_k_text),
    }
