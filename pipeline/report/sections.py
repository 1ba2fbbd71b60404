"""The sections of the report, each built from the warehouse for one scope: the header summary
(ingested, scored, joined, quarantined), the daily series of mean recall with its interval and
the index size, the recall@k curve, pass and full-coverage rates, miss causes, the worst goldens
and the latest day per slice. Each builder returns the plain values and charts its part of the
template shows, with the caption every figure carries; a section with nothing to show is None.
Per-request numbers read only the scope's scored requests (the TEMP macro scored_requests), so
rows of another route, another gold set or a stale score never count.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import date

import duckdb

from pipeline.ingest.files import RAW_LIMIT
from pipeline.report.audit import audit_section
from pipeline.report.charts import (
    CAUSE_COLORS,
    FC_COLOR,
    LABEL_CHARS,
    MEAN_COLOR,
    PASS_COLOR,
    SERIES_PALETTE,
    SIZE_COLOR,
    Chart,
    Panel,
    Series,
    bar_chart,
    curve_chart,
    shorten,
    size_domain,
    stacked_bars,
    timeline,
    unit_domain,
)
from pipeline.report.drift import drift_section
from pipeline.report.formats import compact, count, cut, f2, f3, interval
from pipeline.report.quality import quality_section
from pipeline.report.reads import rows, scalar
from pipeline.report.rebuild import rebuild_section
from pipeline.report.scope import Scope
from pipeline.warehouse import queries

WORST_LIMIT = 20
WORST_MIN_N = 3
QUARANTINE_TOP = 10
RAW_PREVIEW_CHARS = 240
MISSING_CHUNKS_SHOWN = 8
MAX_VERSION_CURVES = 6
KNOWN_CAUSES = ("not_in_index", "beyond_k", "not_retrieved")


def build_sections(con: duckdb.DuckDBPyConnection, scope: Scope) -> dict:
    """Every section of the report for one scope, keyed as the template names them."""
    summary = header_summary(con, scope)
    daily = _daily_rows(con, scope)
    return {
        "summary": summary,
        "nothing_scored": summary["scored"] == 0 and not daily,
        "daily": daily_section(scope, daily),
        "curve": curve_section(con, scope),
        "misses": miss_section(con, scope, summary),
        "worst": worst_section(con, scope, summary),
        "latest": latest_section(con, scope),
        "drift": drift_section(con, scope, daily, summary["served_k_text"]),
        "quality": quality_section(con),
        "rebuild": rebuild_section(con, scope, summary["served_k_text"]),
        "audit": audit_section(con, scope),
    }


def _summary_sql(name: str) -> str:
    """A named query of sql/report_summary.sql."""
    return queries("report_summary")[name]


def _section_sql(name: str) -> str:
    """A named query of sql/report_sections.sql."""
    return queries("report_sections")[name]


# ---------------------------------------------------------------------------------------------
# Section 1: header summary


def header_summary(con: duckdb.DuckDBPyConnection, scope: Scope) -> dict:
    by_scope = scope.params("route", "gold_version")
    requests = rows(con, _summary_sql("request_span"))[0]
    # A request that matched no golden may carry no gold_version; it still belongs to this run.
    statuses = rows(con, _summary_sql("status_counts"), **by_scope)
    total = sum(row["n"] for row in statuses)
    for row in statuses:
        row["share"] = row["n"] / total if total else None
    scored = sum(row["n"] for row in statuses if row["status"] == "scored")

    joins = rows(con, _summary_sql("gold_joins"), **by_scope)[0]
    matched = joins["by_gold_id"] + joins["by_query"]
    attempted = matched + joins["unmatched_gold_id"] + joins["unmatched_query"]
    joins["matched"] = matched
    joins["matched_share"] = matched / attempted if attempted else None

    served_k = rows(con, _summary_sql("served_k_counts"), **by_scope)
    quarantine = rows(con, _summary_sql("quarantine_reasons"), top=QUARANTINE_TOP)
    for row in quarantine:
        row["raw"] = _preview(row["raw"])
    reasons = scalar(con, _summary_sql("quarantine_reason_count"))
    files = rows(con, _summary_sql("ingest_files"))
    return {
        "requests": requests,
        "statuses": statuses,
        "status_total": total,
        "scored": scored,
        "excluded": total - scored,
        "joins": joins,
        "unscored": scalar(con, _summary_sql("unscored_requests"), route=scope.route),
        "other_versions": scalar(con, _summary_sql("other_gold_versions"), **by_scope),
        "served_k": served_k,
        "served_k_text": _served_k_text(served_k),
        "routes": rows(con, _summary_sql("route_versions")),
        "quarantine_total": scalar(con, _summary_sql("quarantine_total")),
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
    """A quarantined record's first characters. Ingest keeps RAW_LIMIT characters of a record:
    one of that length was most likely longer, so what is left out is told as "at least"."""
    if text is None or len(text) <= RAW_PREVIEW_CHARS:
        return text
    shown = cut(text, RAW_PREVIEW_CHARS)
    more = len(text) - len(shown)
    return shown + (f"… (at least {more} more characters)" if len(text) >= RAW_LIMIT
                    else f"… ({more} more characters)")


# ---------------------------------------------------------------------------------------------
# Sections 2 and 4: daily series from window_metrics (slice 'all', grain 'day')


def _daily_rows(con: duckdb.DuckDBPyConnection, scope: Scope) -> list[dict]:
    if scope.k is None:
        return []
    return rows(con, _section_sql("daily_recall"), **scope.params("route", "k", "gold_version"))


def daily_section(scope: Scope, daily: list[dict]) -> dict | None:
    """Two timelines (mean recall over index size; pass and full-coverage rates), marked on the
    days the index versions change, and the table of those changes."""
    if not daily:
        return None
    days = [row["day"] for row in daily]
    changes, markers = _version_changes(daily)
    recall, size, passed, full = _daily_series(scope, daily)
    recall_chart = timeline(
        days,
        [
            Panel(f"Mean recall@{scope.k} (shaded: interval)", recall,
                  unit_domain(recall.all_values()), f2, height=230),
            Panel("Index size (max per day)", size, size_domain(size.values),
                  compact, height=120),
        ],
        markers,
        f"Daily mean recall@{scope.k} with interval, and index size",
    )
    rates_chart = timeline(
        days,
        [
            Panel("Pass rate (shaded: interval)", passed,
                  unit_domain(passed.all_values()), f2, height=170),
            Panel("Full-coverage rate (shaded: interval)", full,
                  unit_domain(full.all_values()), f2, height=170),
        ],
        markers,
        f"Daily pass rate and full-coverage rate at k={scope.k}",
    )
    n = sum(row["n"] for row in daily)
    return {
        "rows": daily,
        "first": days[0],
        "last": days[-1],
        "changes": changes,
        "recall_chart": recall_chart,
        "rates_chart": rates_chart,
        "pass_marks": sorted({row["pass_mark"] for row in daily}),
        "caption": scope.caption(n),
        "n": n,
        "excluded": sum(row["n_excluded"] or 0 for row in daily),
    }


def _daily_series(scope: Scope, daily: list[dict]) -> tuple[Series, Series, Series, Series]:
    """Mean recall, index size, pass rate and full coverage per day, with intervals and tips."""
    recall = Series(
        f"mean recall@{scope.k}", MEAN_COLOR,
        [row["mean_recall"] for row in daily],
        [row["ci_low"] for row in daily], [row["ci_high"] for row in daily],
        _day_tips(daily, f"mean recall@{scope.k}", "mean_recall", "ci_low", "ci_high"),
    )
    size = Series(
        "max index size (chunks)", SIZE_COLOR,
        [row["max_index_size"] for row in daily],
        tips=[f"{row['day']} · max index size {count(row['max_index_size'])}" for row in daily],
    )
    passed = Series(
        "pass rate", PASS_COLOR, [row["pass_rate"] for row in daily],
        [row["pass_ci_low"] for row in daily], [row["pass_ci_high"] for row in daily],
        _day_tips(daily, "pass rate", "pass_rate", "pass_ci_low", "pass_ci_high"),
    )
    full = Series(
        "full coverage", FC_COLOR, [row["full_coverage_rate"] for row in daily],
        [row["fc_ci_low"] for row in daily], [row["fc_ci_high"] for row in daily],
        _day_tips(daily, "full coverage", "full_coverage_rate", "fc_ci_low", "fc_ci_high"),
    )
    return recall, size, passed, full


def _day_tips(daily: list[dict], metric: str, value: str, low: str, high: str) -> list[str]:
    return [
        f"{row['day']} · {metric} {f3(row[value])} {interval(row[low], row[high])}"
        f" · n={row['n']:,}"
        for row in daily
    ]


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


# ---------------------------------------------------------------------------------------------
# Section 3: recall@k curve


def curve_section(con: duckdb.DuckDBPyConnection, scope: Scope) -> dict | None:
    by_scope = scope.params("route", "gold_version")
    points = rows(con, _section_sql("recall_curve"), **by_scope)
    if not points:
        return None
    # n per curve: distinct scored requests, with the version's first use to order the legend.
    curves = rows(con, _section_sql("curve_sizes"), **by_scope)
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
               [_recall_at(by_curve[None], c) for c in cutoffs],
               tips=[_curve_tip("all", c, by_curve[None].get(c)) for c in cutoffs])
    ]
    if len(versions) >= 2:
        for i, row in enumerate(versions):
            name = row["index_version"]
            series.append(
                Series(f"{shorten(name, LABEL_CHARS)} (n={row['n']:,})",
                       SERIES_PALETTE[i % len(SERIES_PALETTE)],
                       [_recall_at(by_curve[name], c) for c in cutoffs],
                       tips=[_curve_tip(name, c, by_curve[name].get(c)) for c in cutoffs])
            )
    k_text = ", ".join(str(c) for c in cutoffs) + " (cutoffs)"
    if scope.k in cutoffs:
        k_text += f"; report k={scope.k} marked"
    return {
        "chart": curve_chart(cutoffs, series, scope.k,
                             f"recall@k curve at cutoffs {', '.join(map(str, cutoffs))}"),
        "table": [by_curve[None][c] for c in cutoffs],
        "versions": versions if len(versions) >= 2 else [],
        "hidden_versions": hidden,
        "by_version": {row["index_version"]: by_curve[row["index_version"]] for row in versions},
        "cutoffs": cutoffs,
        "caption": scope.caption(overall["n"], k_text),
    }


def _recall_at(points: dict[int, dict], cutoff: int) -> float | None:
    row = points.get(cutoff)
    return None if row is None else row["recall"]


def _curve_tip(name: str, cutoff: int, row: dict | None) -> str:
    if row is None:
        return f"{name} · k={cutoff}: no data"
    return (f"{name} · recall@{cutoff} {f3(row['recall'])} · precision@{cutoff} "
            f"{f3(row['precision'])} · n={row['n']:,}")


# ---------------------------------------------------------------------------------------------
# Section 5: miss causes


def miss_section(con: duckdb.DuckDBPyConnection, scope: Scope, summary: dict) -> dict | None:
    if summary["scored"] == 0:
        return None
    by_scope = scope.params("route", "gold_version")
    counts = rows(con, _section_sql("miss_counts"), **by_scope)
    scored_by_version = rows(con, _section_sql("scored_by_version"), **by_scope)
    totals: Counter[str] = Counter()
    per_version: dict[str, Counter[str]] = defaultdict(Counter)
    for row in counts:
        totals[row["cause"]] += row["misses"]
        per_version[row["index_version"]][row["cause"]] += row["misses"]
    all_misses = sum(totals.values())
    versions = [row["index_version"] for row in scored_by_version]
    version_n = {row["index_version"]: row["n"] for row in scored_by_version}
    table = [
        {
            "cause": cause,
            "color": CAUSE_COLORS.get(cause, SERIES_PALETTE[i % len(SERIES_PALETTE)]),
            "misses": totals[cause],
            "share": totals[cause] / all_misses if all_misses else None,
            "per_version": [per_version[v][cause] for v in versions],
        }
        for i, cause in enumerate(_cause_order(totals))
    ]
    bars = stacked = None
    if all_misses:
        bars = _miss_bars(table, scope.items)
        stacked = _miss_bars_per_version(table, versions, version_n, per_version)
    return {
        "table": table,
        "versions": versions,
        "version_n": version_n,
        "version_totals": [sum(per_version[v].values()) for v in versions],
        "all_misses": all_misses,
        "with_miss": scalar(con, _section_sql("requests_with_miss"), **by_scope),
        "bars": bars,
        "stacked": stacked,
        "caption": scope.caption(summary["scored"], summary["served_k_text"]),
    }


def _miss_bars(table: list[dict], items: str) -> Chart:
    return bar_chart(
        [(row["cause"], row["misses"], row["color"],
          f"{row['misses']:,} ({f3(row['share'])} of misses)") for row in table],
        f"Missing {items} per cause",
    )


def _miss_bars_per_version(table: list[dict], versions: list[str], version_n: dict[str, int],
                           per_version: dict[str, Counter[str]]) -> Chart:
    bars = [
        (
            v,
            [(per_version[v][row["cause"]], row["color"],
              f"{v} · {row['cause']}: {per_version[v][row['cause']]:,}") for row in table],
            f"n={version_n[v]:,} · {f3(sum(per_version[v].values()) / version_n[v])} "
            "misses/request",
        )
        for v in versions
    ]
    return stacked_bars(
        bars,
        [(row["cause"], row["color"]) for row in table],
        "Miss causes per index version (share of that version's misses)",
    )


def _cause_order(totals: Counter[str]) -> list[str]:
    known = [c for c in KNOWN_CAUSES if totals[c]]
    return known + sorted(c for c in totals if c not in KNOWN_CAUSES)


# ---------------------------------------------------------------------------------------------
# Section 6: worst goldens


def worst_section(con: duckdb.DuckDBPyConnection, scope: Scope, summary: dict) -> dict | None:
    if summary["scored"] == 0:
        return None
    by_scope = scope.params("route", "gold_version")
    ranked = rows(con, _section_sql("worst_goldens"), **by_scope,
                  min_n=WORST_MIN_N, limit=WORST_LIMIT)
    # a golden whose every request found all it needed is no worst golden, however few
    # goldens there are (they rank last, so the limit keeps every golden that missed)
    worst = [row for row in ranked if row["mean_recall"] < 1.0]
    gold_ids = [row["gold_id"] for row in worst]
    misses = rows(
        con, _section_sql("worst_missing_chunks"), **by_scope, gold_ids=gold_ids
    ) if gold_ids else []
    # The lowest-recall request shows the failure best; the newest one breaks ties.
    examples = rows(
        con, _section_sql("worst_examples"), **by_scope, gold_ids=gold_ids
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
        "all_found": bool(ranked) and not worst,
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


ABSENT_SHOWN = 20   # slices without requests on the latest day named under its table


def latest_section(con: duckdb.DuckDBPyConnection, scope: Scope) -> dict | None:
    if scope.k is None:
        return None
    found = rows(con, _section_sql("latest_slices"), **scope.params("route", "k", "gold_version"))
    if not found:
        return None
    overall = next((row for row in found if row["slice"] == "all"), None)
    n = overall["n"] if overall else max(row["n"] for row in found)
    # slices with no request that day are named, with their last day, not left out unsaid
    absent = rows(con, _section_sql("absent_slices"), **scope.params("route", "k",
                                                                     "gold_version"))
    return {"day": found[0]["day"], "rows": found, "overall": overall,
            "caption": scope.caption(n), "absent": absent[:ABSENT_SHOWN],
            "n_absent": len(absent)}
