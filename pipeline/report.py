"""Self-contained HTML report of context recall for one route, cutoff k and gold-set version.

`write_report` reads the scored warehouse (window_metrics, recall_at_k, request_scores,
miss_causes, requests, goldens, quarantine, ingest_files; gold_versions only to pick the default
gold set) through the queries of sql/report_*.sql, and writes one offline HTML file: header
counts, daily mean recall with its interval and the index size, the recall@k curve, pass and
full-coverage rates, miss causes, the worst goldens and the latest day per slice. Charts are
inline SVG drawn here from numbers; every string from the warehouse reaches the page through
Jinja2 autoescaping, never marked safe, so a logged query cannot become markup. Every figure
carries a caption with its k, route, gold-set version and n, because a recall without them
describes nothing anyone can check.
"""

from __future__ import annotations

import math
import os
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import duckdb
import jinja2

from pipeline.errors import RecallwatchError
from pipeline.warehouse import sql

TEMPLATES = Path(__file__).parent / "templates"
READ_TABLES = (
    "window_metrics", "recall_at_k", "request_scores", "miss_causes",
    "requests", "goldens", "quarantine", "ingest_files",
)
WORST_LIMIT = 20
WORST_MIN_N = 3
QUARANTINE_TOP = 10
RAW_PREVIEW_CHARS = 240
MISSING_CHUNKS_SHOWN = 8
MAX_VERSION_CURVES = 6
KNOWN_CAUSES = ("not_in_index", "beyond_k", "not_retrieved")

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


def write_report(
    con: duckdb.DuckDBPyConnection,
    out_dir: Path,
    *,
    route: str = "ids",
    k: int | None = None,
    gold_version: str | None = None,
    title: str = "recallwatch report",
) -> Path:
    """Write `out_dir/report.html` for one route, cutoff k and gold-set version; return its path.

    Defaults: the gold set with the highest `seq` in gold_versions (else the most common in
    window_metrics); k = the most common served k of scored requests if window_metrics has it,
    else the largest window_metrics k below it, else the smallest. With nothing scored the
    report still gets written and says so.
    """
    _require_tables(con)
    gold_choice = "given"
    if gold_version is None:
        gold_version, gold_choice = default_gold_version(con, route)
    else:
        known = [row["gold_version"] for row in _rows(con, sql("report_known_gold_versions"))]
        if gold_version not in known:
            raise RecallwatchError(
                f"gold version {gold_version!r} is not in the warehouse; known: "
                f"{', '.join(known) or 'none'}.")
    k_choice = "given"
    if k is None:
        k, k_choice = default_k(con, route)
    else:
        cutoffs = [row["k"] for row in _rows(con, sql("report_window_cutoffs"), route=route)]
        if cutoffs and k not in cutoffs:
            raise RecallwatchError(
                f"--k {k} is not a scored cutoff; choose one of {', '.join(map(str, cutoffs))} "
                "(or score with --cutoffs including it).")
    scope = Scope(route=route, k=k, gold_version=gold_version)

    summary = _summary(con, scope)
    daily = _daily(con, scope)
    context = {
        "title": title,
        "scope": scope,
        "gold_choice": gold_choice,
        "k_choice": k_choice,
        "summary": summary,
        "nothing_scored": summary["scored"] == 0 and not daily,
        "daily": _daily_section(scope, daily),
        "curve": _curve_section(con, scope),
        "misses": _miss_section(con, scope, summary),
        "worst": _worst_section(con, scope, summary),
        "latest": _latest_section(con, scope),
        "colors": {"mean": MEAN_COLOR, "size": SIZE_COLOR, "pass": PASS_COLOR, "fc": FC_COLOR},
    }
    html = _environment().get_template("report.html.j2").render(**context)

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "report.html"
    # Write then rename, so a reader (or a scheduled mail) never sees half a report.
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, path)
    return path


# ---------------------------------------------------------------------------------------------
# Scope, defaults and captions


@dataclass(frozen=True)
class Scope:
    route: str
    k: int | None
    gold_version: str | None

    def params(self, *names: str) -> dict:
        values = {"route": self.route, "k": self.k, "gold_version": self.gold_version}
        return {name: values[name] for name in names}

    def caption(self, n: int, k_text: str | None = None) -> dict:
        """What every figure states beside it: k, route, gold-set version and n."""
        return {
            "k": "" if self.k is None else self.k,
            "k_text": k_text if k_text is not None else str(self.k),
            "route": self.route,
            "gold_version": self.gold_version or "none",
            "n": n,
        }


def _rows(con: duckdb.DuckDBPyConnection, query: str, **params) -> list[dict]:
    # con.sql(...).pl() is the DuckDB 2.0 path that neither blocks the connection nor needs fetch.
    return con.sql(query, params=params or None).pl().to_dicts()


def _scalar(con: duckdb.DuckDBPyConnection, query: str, **params):
    rows = con.sql(query, params=params or None).fetchall()
    return rows[0][0] if rows else None


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    # Tables and views alike: recall_at_k is a view over request_cutoffs.
    rows = con.sql(sql("report_list_tables")).fetchall()
    return {name for (name,) in rows}


def _require_tables(con: duckdb.DuckDBPyConnection) -> None:
    missing = [name for name in READ_TABLES if name not in _tables(con)]
    if missing:
        raise ValueError(
            f"The warehouse has no table {', '.join(missing)}: create the schema "
            "(sql/schema.sql) and ingest before writing a report."
        )


def default_gold_version(con, route: str) -> tuple[str | None, str]:
    """The gold set a report shows when none is asked for, and why it was chosen."""
    if "gold_versions" in _tables(con):
        newest = _scalar(con, sql("report_newest_gold_version"))
        if newest is not None:
            return newest, "newest loaded gold set (highest seq in gold_versions)"
    common = _scalar(con, sql("report_common_gold_version"))
    if common is not None:
        return common, "most common gold set in window_metrics"
    scored = _scalar(con, sql("report_scored_gold_version"), route=route)
    if scored is not None:
        return scored, "most common gold set among scored requests"
    return None, "no gold set loaded"


def default_k(con, route: str) -> tuple[int | None, str]:
    """The headline cutoff when none is asked for (the most common served k), and why."""
    served = _scalar(con, sql("report_common_served_k"), route=route)
    cutoffs = [
        k for (k,) in con.sql(sql("report_window_cutoffs"), params={"route": route}).fetchall()
    ]
    if not cutoffs:
        if served is None:
            return None, "nothing scored"
        return served, "most common served k (window_metrics has no cutoff for it yet)"
    if served in cutoffs:
        return served, "most common served k"
    below = [k for k in cutoffs if served is not None and k <= served]
    if below:
        return max(below), (
            f"largest window_metrics cutoff not above the most common served k ({served})"
        )
    return cutoffs[0], "smallest window_metrics cutoff"


# ---------------------------------------------------------------------------------------------
# Section 1: header summary


def _summary(con, scope: Scope) -> dict:
    requests = _rows(con, sql("report_request_span"))[0]
    # A request that matched no golden may carry no gold_version; it still belongs to this run.
    statuses = _rows(con, sql("report_status_counts"), **scope.params("route", "gold_version"))
    total = sum(row["n"] for row in statuses)
    for row in statuses:
        row["share"] = row["n"] / total if total else None
    scored = sum(row["n"] for row in statuses if row["status"] == "scored")

    joins = _rows(con, sql("report_gold_joins"), **scope.params("route", "gold_version"))[0]
    matched = joins["by_gold_id"] + joins["by_query"]
    attempted = matched + joins["unmatched_gold_id"] + joins["unmatched_query"]
    joins["matched"] = matched
    joins["matched_share"] = matched / attempted if attempted else None

    unscored = _scalar(con, sql("report_unscored_requests"), route=scope.route)
    other_versions = _scalar(
        con, sql("report_other_gold_versions"), **scope.params("route", "gold_version")
    )
    served_k = _rows(con, sql("report_served_k_counts"), **scope.params("route", "gold_version"))
    routes = _rows(con, sql("report_route_versions"))
    quarantine_total = _scalar(con, sql("report_quarantine_total"))
    quarantine = _rows(con, sql("report_quarantine_reasons"), top=QUARANTINE_TOP)
    for row in quarantine:
        row["raw"] = _preview(row["raw"])
    reasons = _scalar(con, sql("report_quarantine_reason_count"))
    files = _rows(con, sql("report_ingest_files"))
    return {
        "requests": requests,
        "statuses": statuses,
        "status_total": total,
        "scored": scored,
        "excluded": total - scored,
        "joins": joins,
        "unscored": unscored,
        "other_versions": other_versions,
        "served_k": served_k,
        "served_k_text": _served_k_text(served_k),
        "routes": routes,
        "quarantine_total": quarantine_total,
        "quarantine": quarantine,
        "quarantine_more": max(0, reasons - len(quarantine)),
        "files": files,
        "files_total": sum(row["files"] for row in files),
        "status_caption": scope.caption(scored, _served_k_text(served_k)),
    }


def _served_k_text(served_k: list[dict]) -> str:
    """k of per-request numbers (request_scores, miss_causes): each request's served k."""
    ks = [row["k"] for row in served_k]
    if not ks:
        return "served"
    if len(ks) == 1:
        return f"{ks[0]} (served)"
    return f"served per request ({min(ks)}–{max(ks)})"


def _preview(text: str | None) -> str | None:
    if text is None or len(text) <= RAW_PREVIEW_CHARS:
        return text
    return text[:RAW_PREVIEW_CHARS] + f"… ({len(text) - RAW_PREVIEW_CHARS} more characters)"


# ---------------------------------------------------------------------------------------------
# Sections 2 and 4: daily series from window_metrics (slice 'all', grain 'day')


def _daily(con, scope: Scope) -> list[dict]:
    if scope.k is None:
        return []
    return _rows(con, sql("report_daily_recall"), **scope.params("route", "k", "gold_version"))


def _version_changes(daily: list[dict]) -> tuple[list[dict], list[tuple[date, str, str]]]:
    """Days on which the set of index versions changes: a table and chart markers."""
    changes, markers = [], []
    previous: set[str] | None = None
    for row in daily:
        if row["index_versions"] is None:
            continue  # unknown for that day: not evidence of a change
        current = set(row["index_versions"])
        if previous is None:
            changes.append({"day": row["day"], "added": sorted(current), "dropped": []})
        elif current != previous:
            added, dropped = sorted(current - previous), sorted(previous - current)
            changes.append({"day": row["day"], "added": added, "dropped": dropped})
            label = ", ".join(added) if added else "without " + ", ".join(dropped)
            tip = f"{row['day']}: index versions {', '.join(sorted(current)) or 'none'}"
            markers.append((row["day"], label, tip))
        previous = current
    return changes, markers


def _daily_section(scope: Scope, daily: list[dict]) -> dict | None:
    if not daily:
        return None
    days = [row["day"] for row in daily]
    n = sum(row["n"] for row in daily)
    changes, markers = _version_changes(daily)

    def tips(metric: str, value: str, low: str | None, high: str | None) -> list[str]:
        return [
            f"{row['day']} · {metric} {_f3(row[value])}"
            + (f" {_interval(row[low], row[high])}" if low else "")
            + f" · n={row['n']:,}"
            for row in daily
        ]

    recall = Series(
        f"mean recall@{scope.k}", MEAN_COLOR,
        [row["mean_recall"] for row in daily],
        [row["ci_low"] for row in daily], [row["ci_high"] for row in daily],
        tips(f"mean recall@{scope.k}", "mean_recall", "ci_low", "ci_high"),
    )
    size = Series(
        "max index size (chunks)", SIZE_COLOR,
        [row["max_index_size"] for row in daily],
        tips=[f"{row['day']} · max index size {_count(row['max_index_size'])}" for row in daily],
    )
    passed = Series(
        "pass rate", PASS_COLOR, [row["pass_rate"] for row in daily],
        [row["pass_ci_low"] for row in daily], [row["pass_ci_high"] for row in daily],
        tips("pass rate", "pass_rate", "pass_ci_low", "pass_ci_high"),
    )
    full = Series(
        "full coverage", FC_COLOR, [row["full_coverage_rate"] for row in daily],
        [row["fc_ci_low"] for row in daily], [row["fc_ci_high"] for row in daily],
        tips("full coverage", "full_coverage_rate", "fc_ci_low", "fc_ci_high"),
    )
    recall_chart = _timeline(
        days,
        [
            Panel(f"Mean recall@{scope.k} (shaded: interval)", recall,
                  _unit_domain(recall.all_values()), _f2, height=230),
            Panel("Index size (max per day)", size, _size_domain(size.values),
                  _compact, height=120),
        ],
        markers,
        f"Daily mean recall@{scope.k} with interval, and index size",
    )
    rates_chart = _timeline(
        days,
        [
            Panel("Pass rate (shaded: interval)", passed,
                  _unit_domain(passed.all_values()), _f2, height=170),
            Panel("Full-coverage rate (shaded: interval)", full,
                  _unit_domain(full.all_values()), _f2, height=170),
        ],
        markers,
        f"Daily pass rate and full-coverage rate at k={scope.k}",
    )
    pass_marks = sorted({row["pass_mark"] for row in daily})
    return {
        "rows": daily,
        "first": days[0],
        "last": days[-1],
        "changes": changes,
        "recall_chart": recall_chart,
        "rates_chart": rates_chart,
        "pass_marks": pass_marks,
        "caption": scope.caption(n),
        "n": n,
    }


# ---------------------------------------------------------------------------------------------
# Section 3: recall@k curve


def _curve_section(con, scope: Scope) -> dict | None:
    params = scope.params("route", "gold_version")
    points = _rows(con, sql("report_recall_curve"), **params)
    if not points:
        return None
    # n per curve: distinct scored requests, with the version's first use to order the legend.
    curves = _rows(con, sql("report_curve_sizes"), **params)
    cutoffs = sorted({row["k"] for row in points})
    by_curve: dict[str | None, dict[int, dict]] = defaultdict(dict)
    for row in points:
        by_curve[row["index_version"]][row["k"]] = row

    overall = curves[0]
    versions = [row for row in curves if row["index_version"] is not None]
    # Past a handful of curves the colours repeat and the chart stops being readable.
    hidden = max(0, len(versions) - MAX_VERSION_CURVES)
    versions = versions[hidden:]
    series = [
        Series(f"all (n={overall['n']:,})", MEAN_COLOR,
               [_get(by_curve[None], c, "recall") for c in cutoffs],
               tips=[_curve_tip("all", c, by_curve[None].get(c)) for c in cutoffs])
    ]
    if len(versions) >= 2:
        for i, row in enumerate(versions):
            name = row["index_version"]
            series.append(
                Series(f"{_short(name, LABEL_CHARS)} (n={row['n']:,})",
                       SERIES_PALETTE[i % len(SERIES_PALETTE)],
                       [_get(by_curve[name], c, "recall") for c in cutoffs],
                       tips=[_curve_tip(name, c, by_curve[name].get(c)) for c in cutoffs])
            )
    table = [by_curve[None][c] for c in cutoffs]
    k_text = ", ".join(str(c) for c in cutoffs) + " (cutoffs)"
    if scope.k in cutoffs:
        k_text += f"; report k={scope.k} marked"
    return {
        "chart": _curve_chart(cutoffs, series, scope.k,
                              f"recall@k curve at cutoffs {', '.join(map(str, cutoffs))}"),
        "table": table,
        "versions": versions if len(versions) >= 2 else [],
        "hidden_versions": hidden,
        "by_version": {row["index_version"]: by_curve[row["index_version"]] for row in versions},
        "cutoffs": cutoffs,
        "caption": scope.caption(overall["n"], k_text),
    }


def _get(points: dict[int, dict], cutoff: int, key: str) -> float | None:
    row = points.get(cutoff)
    return None if row is None else row[key]


def _curve_tip(name: str, cutoff: int, row: dict | None) -> str:
    if row is None:
        return f"{name} · k={cutoff}: no data"
    return (f"{name} · recall@{cutoff} {_f3(row['recall'])} · precision@{cutoff} "
            f"{_f3(row['precision'])} · n={row['n']:,}")


# ---------------------------------------------------------------------------------------------
# Section 5: miss causes


def _miss_section(con, scope: Scope, summary: dict) -> dict | None:
    if summary["scored"] == 0:
        return None
    params = scope.params("route", "gold_version")
    # Only misses of requests scored under this route and gold set: stale rows never count.
    counts = _rows(con, sql("report_miss_counts"), **params)
    scored_by_version = _rows(con, sql("report_scored_by_version"), **params)
    with_miss = _scalar(con, sql("report_requests_with_miss"), **params)
    totals: Counter[str] = Counter()
    per_version: dict[str, Counter[str]] = defaultdict(Counter)
    for row in counts:
        totals[row["cause"]] += row["misses"]
        per_version[row["index_version"]][row["cause"]] += row["misses"]
    causes = _cause_order(totals)
    all_misses = sum(totals.values())
    versions = [row["index_version"] for row in scored_by_version]
    version_n = {row["index_version"]: row["n"] for row in scored_by_version}
    table = [
        {
            "cause": cause,
            "color": _cause_color(cause, i),
            "misses": totals[cause],
            "share": totals[cause] / all_misses if all_misses else None,
            "per_version": [per_version[v][cause] for v in versions],
        }
        for i, cause in enumerate(causes)
    ]
    bars = _bar_chart(
        [(row["cause"], row["misses"], row["color"],
          f"{row['misses']:,} ({_f3(row['share'])} of misses)") for row in table],
        "Missing gold chunks per cause",
    ) if all_misses else None
    stacked = _stacked_bars(
        [
            (
                v,
                [(per_version[v][row["cause"]], row["color"],
                  f"{v} · {row['cause']}: {per_version[v][row['cause']]:,}") for row in table],
                f"n={version_n[v]:,} · {_f3(sum(per_version[v].values()) / version_n[v])} "
                "misses/request",
            )
            for v in versions
        ],
        [(row["cause"], row["color"]) for row in table],
        "Miss causes per index version (share of that version's misses)",
    ) if all_misses else None
    return {
        "table": table,
        "versions": versions,
        "version_n": version_n,
        "version_totals": [sum(per_version[v].values()) for v in versions],
        "all_misses": all_misses,
        "with_miss": with_miss,
        "bars": bars,
        "stacked": stacked,
        "caption": scope.caption(summary["scored"], summary["served_k_text"]),
    }


def _cause_order(totals: Counter[str]) -> list[str]:
    known = [c for c in KNOWN_CAUSES if totals[c]]
    return known + sorted(c for c in totals if c not in KNOWN_CAUSES)


def _cause_color(cause: str, i: int) -> str:
    return CAUSE_COLORS.get(cause, SERIES_PALETTE[i % len(SERIES_PALETTE)])


# ---------------------------------------------------------------------------------------------
# Section 6: worst goldens


def _worst_section(con, scope: Scope, summary: dict) -> dict | None:
    if summary["scored"] == 0:
        return None
    params = scope.params("route", "gold_version")
    worst = _rows(con, sql("report_worst_goldens"), **params, min_n=WORST_MIN_N, limit=WORST_LIMIT)
    gold_ids = [row["gold_id"] for row in worst]
    misses = _rows(
        con, sql("report_worst_missing_chunks"), **params, gold_ids=gold_ids
    ) if gold_ids else []
    # The lowest-recall request shows the failure best; the newest one breaks ties.
    examples = _rows(
        con, sql("report_worst_examples"), **params, gold_ids=gold_ids
    ) if gold_ids else []

    chunks: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for row in misses:
        chunks[row["gold_id"]][row["chunk_id"]][row["cause"]] += row["misses"]
    example_by_gold = {row["gold_id"]: row for row in examples}
    for row in worst:
        missing = [
            {"chunk_id": chunk, "misses": sum(causes.values()), "cause": _dominant(causes)}
            for chunk, causes in chunks[row["gold_id"]].items()
        ]
        missing.sort(key=lambda m: (-m["misses"], m["chunk_id"]))
        row["missing"] = missing[:MISSING_CHUNKS_SHOWN]
        row["missing_more"] = max(0, len(missing) - MISSING_CHUNKS_SHOWN)
        row["example"] = example_by_gold.get(row["gold_id"])
    return {
        "rows": worst,
        "min_n": WORST_MIN_N,
        "limit": WORST_LIMIT,
        "caption": scope.caption(sum(row["n"] for row in worst), summary["served_k_text"]),
    }


def _dominant(causes: Counter[str]) -> str:
    """Most frequent cause; ties go to the cause listed first in KNOWN_CAUSES, then by name."""
    rank = {c: i for i, c in enumerate(KNOWN_CAUSES)}
    return min(causes, key=lambda c: (-causes[c], rank.get(c, len(rank)), c))


# ---------------------------------------------------------------------------------------------
# Section 7: per-slice table for the latest day


def _latest_section(con, scope: Scope) -> dict | None:
    if scope.k is None:
        return None
    rows = _rows(con, sql("report_latest_slices"), **scope.params("route", "k", "gold_version"))
    if not rows:
        return None
    overall = next((row for row in rows if row["slice"] == "all"), None)
    n = overall["n"] if overall else max(row["n"] for row in rows)
    return {"day": rows[0]["day"], "rows": rows, "overall": overall,
            "caption": scope.caption(n)}


# ---------------------------------------------------------------------------------------------
# Number formats (also Jinja filters)


def _f3(x) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _f2(x) -> str:
    return f"{x:.2f}"


def _interval(low, high) -> str:
    if low is None or high is None:
        return "—"
    return f"[{_f3(low)}, {_f3(high)}]"


def _count(n) -> str:
    return "—" if n is None else f"{n:,}"


def _compact(x: float) -> str:
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= size:
            return f"{x / size:.3g}{suffix}"
    return f"{x:.3g}"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # the template is .j2, which select_autoescape would not match
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(f3=_f3, interval=_interval, count=_count)
    return env


# ---------------------------------------------------------------------------------------------
# Inline SVG: Python computes geometry; the template writes elements with every attribute and
# text autoescaped, so labels taken from the warehouse stay text.

SVG_TAGS = frozenset({"rect", "line", "path", "circle", "text"})
WIDTH = 960
LEFT, RIGHT = 64, 24
LEGEND_CHARS = 40
LABEL_CHARS = 22
MARKER_CHARS = 28


@dataclass
class Chart:
    width: int
    height: int
    label: str
    items: list[dict] = field(default_factory=list)

    def add(self, tag: str, text: str | None = None, title: str | None = None, **attrs) -> None:
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


def _nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
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


def _unit_domain(values: list[float]) -> tuple[float, float]:
    """A [lo, 1] axis for proportions: starts near the data so a drop stays visible."""
    if not values:
        return 0.0, 1.0
    lo = max(0.0, math.floor((min(values) - 0.02) * 10) / 10)
    return min(lo, 0.8), 1.0


def _size_domain(values: list[float | None]) -> tuple[float, float]:
    present = [v for v in values if v is not None]
    if not present:
        return 0.0, 1.0
    lo, hi = min(present), max(present)
    pad = max((hi - lo) * 0.15, hi * 0.02, 1.0)
    return max(0.0, lo - pad), hi + pad


def _runs(days: list[date], ok: list[bool]) -> list[list[int]]:
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


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _legend(chart: Chart, x: float, y: float, entries: list[tuple[str, str]]) -> int:
    """Swatch + label entries left to right, wrapping at the right edge; returns rows used."""
    x_start, rows = x, 1
    for label, color in entries:
        short = _short(label, LEGEND_CHARS)
        # 7 px per character is a safe estimate for the 12 px system sans-serif.
        width = 12 + 6 + 7 * len(short) + 18
        if x + width > WIDTH - RIGHT and x > x_start:
            x, y, rows = x_start, y + 18, rows + 1
        chart.add("rect", x=x, y=y - 5, width=12, height=10, rx=2, fill=color)
        chart.add("text", short, title=label, x=x + 18, y=y + 4, class_="legend")
        x += width
    return rows


def _timeline(days: list[date], panels: list[Panel], markers: list[tuple[date, str, str]],
              label: str) -> Chart:
    header, gap, axis = 26, 18, 44
    height = sum(p.height + header for p in panels) + gap * (len(panels) - 1) + axis + 8
    chart = Chart(WIDTH, height, label)
    x0, x1 = LEFT, WIDTH - RIGHT
    d0, d1 = days[0].toordinal() - 0.5, days[-1].toordinal() + 0.5

    def x_of(day: date) -> float:
        return x0 + (day.toordinal() - d0) / (d1 - d0) * (x1 - x0)

    span = days[-1].toordinal() - days[0].toordinal() + 1
    step = 1 if span <= 16 else math.ceil(span / 12)
    tick_days = [date.fromordinal(days[0].toordinal() + i) for i in range(0, span, step)]

    top = 8
    plot_top = plot_bottom = 0.0
    for p_index, panel in enumerate(panels):
        chart.add("text", panel.title, x=x0, y=top + 14, class_="panel-title")
        y_top, y_bottom = top + header, top + header + panel.height
        if p_index == 0:
            plot_top = y_top
        plot_bottom = y_bottom
        lo, hi = panel.domain

        def y_of(v: float, lo=lo, hi=hi, y_top=y_top, y_bottom=y_bottom) -> float:
            v = min(max(v, lo), hi)
            return y_bottom - (v - lo) / (hi - lo) * (y_bottom - y_top)

        for tick in _nice_ticks(lo, hi, max(4, panel.height // 32)):
            y = y_of(tick)
            chart.add("line", x1=x0, x2=x1, y1=y, y2=y, stroke=GRID_COLOR)
            chart.add("text", panel.tick_format(tick), x=x0 - 8, y=y + 4, text_anchor="end",
                      class_="tick")
        for day in tick_days:
            chart.add("line", x1=x_of(day), x2=x_of(day), y1=y_top, y2=y_bottom,
                      stroke=GRID_COLOR)
        chart.add("line", x1=x0, x2=x1, y1=y_bottom, y2=y_bottom, stroke=AXIS_COLOR)
        chart.add("line", x1=x0, x2=x0, y1=y_top, y2=y_bottom, stroke=AXIS_COLOR)

        s = panel.series
        if s.low is not None and s.high is not None:
            ok = [a is not None and b is not None for a, b in zip(s.low, s.high, strict=True)]
            for run in _runs(days, ok):
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
        for run in _runs(days, [v is not None for v in s.values]):
            if len(run) > 1:
                points = [f"{x_of(days[i]):.1f},{y_of(s.values[i]):.1f}" for i in run]
                chart.add("path", d="M" + " L".join(points), fill="none", stroke=s.color,
                          stroke_width=2.5, stroke_linejoin="round")
        for i, v in enumerate(s.values):
            if v is not None:
                chart.add("circle", title=s.tips[i] if s.tips else None, cx=x_of(days[i]),
                          cy=y_of(v), r=4, fill=s.color, stroke="#ffffff", stroke_width=1)
        top = y_bottom + gap

    for n_marker, (day, text, tip) in enumerate(markers):
        x = x_of(day)
        chart.add("line", title=tip, x1=x, x2=x, y1=plot_top - 4, y2=plot_bottom,
                  stroke=MARK_COLOR, stroke_width=1.5, stroke_dasharray="5 4")
        short = _short(text, MARKER_CHARS)
        # Near the right edge the label goes to the left of its line instead of off the chart.
        left = x + 5 + 7 * len(short) > WIDTH
        chart.add("text", short, title=tip, x=x - 5 if left else x + 5,
                  y=plot_top + 12 + 14 * (n_marker % 2),
                  text_anchor="end" if left else None, class_="marker")

    for day in tick_days:
        chart.add("text", f"{day:%b} {day.day}", x=x_of(day), y=plot_bottom + 18,
                  text_anchor="middle", class_="tick")
    years = f"{days[0].year}" + (f"–{days[-1].year}" if days[-1].year != days[0].year else "")
    chart.add("text", f"day (UTC), {years}", x=(x0 + x1) / 2, y=plot_bottom + 38,
              text_anchor="middle", class_="axis-title")
    return chart


def _curve_chart(cutoffs: list[int], series: list[Series], mark_k: int | None,
                 label: str) -> Chart:
    plot_h, axis = 260, 44
    chart = Chart(WIDTH, 0, label)
    x0, x1 = LEFT, WIDTH - RIGHT
    chart.add("text", "Mean recall@k", x=x0, y=22, class_="panel-title")
    rows = _legend(chart, x0 + 130, 18, [(s.label, s.color) for s in series])
    y_top = 8 + 30 + 18 * (rows - 1)
    y_bottom = y_top + plot_h
    chart.height = int(y_bottom + axis + 8)
    # Cutoffs are spaced evenly: 1, 3, 5, 10, 20, 50, 100 would crowd the left on a linear axis.
    slot = (x1 - x0) / len(cutoffs)

    def x_of(i: int) -> float:
        return x0 + slot * (i + 0.5)

    def y_of(v: float) -> float:
        return y_bottom - min(max(v, 0.0), 1.0) * (y_bottom - y_top)

    for tick in _nice_ticks(0.0, 1.0, 5):
        chart.add("line", x1=x0, x2=x1, y1=y_of(tick), y2=y_of(tick), stroke=GRID_COLOR)
        chart.add("text", _f2(tick), x=x0 - 8, y=y_of(tick) + 4, text_anchor="end",
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


def _bar_chart(rows: list[tuple[str, float, str, str]], label: str) -> Chart:
    """Horizontal bars: (label, value, colour, text after the bar)."""
    row_h, label_w, text_w = 30, 150, 190
    chart = Chart(WIDTH, row_h * len(rows) + 16, label)
    x0, x1 = LEFT + label_w - 40, WIDTH - RIGHT - text_w
    top = max((value for _, value, _, _ in rows), default=0) or 1
    for i, (name, value, color, text) in enumerate(rows):
        y = 8 + i * row_h
        chart.add("text", _short(name, LABEL_CHARS), title=name, x=x0 - 10,
                  y=y + row_h / 2 + 4, text_anchor="end", class_="bar-label")
        width = max(1.0, value / top * (x1 - x0))
        chart.add("rect", title=f"{name}: {text}", x=x0, y=y + 5, width=width,
                  height=row_h - 10, rx=2, fill=color)
        chart.add("text", text, x=x0 + width + 8, y=y + row_h / 2 + 4, class_="bar-value")
    return chart


def _stacked_bars(rows: list[tuple[str, list[tuple[float, str, str]], str]],
                  legend: list[tuple[str, str]], label: str) -> Chart:
    """One 100% bar per row: (label, [(value, colour, tooltip)], text after the bar)."""
    row_h, label_w, text_w = 30, 150, 250
    chart = Chart(WIDTH, 0, label)
    x0, x1 = LEFT + label_w - 40, WIDTH - RIGHT - text_w
    header = 26 + 18 * (_legend(chart, x0, 12, legend) - 1)
    chart.height = header + row_h * len(rows) + 12
    for i, (name, segments, text) in enumerate(rows):
        y = header + i * row_h
        chart.add("text", _short(name, LABEL_CHARS), title=name, x=x0 - 10, y=y + row_h / 2 + 4,
                  text_anchor="end", class_="bar-label")
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
