"""The report's data-quality section: what the quality gate (pipeline.quality) recorded in
`quality_checks` — the most recently checked intervals with their blocking failures (such an
interval was not loaded) and warnings, and every check of the newest one. Its queries are
sql/report_quality.sql; a warehouse without checks (or written before the table existed) has
no such section."""

from __future__ import annotations

import duckdb

from pipeline.quality import interval_text
from pipeline.report.reads import rows, scalar, tables
from pipeline.warehouse import queries

QUALITY_INTERVALS = 14


def quality_section(con: duckdb.DuckDBPyConnection) -> dict | None:
    """The section's values, or None when no interval has been checked."""
    if "quality_checks" not in tables(con):
        return None
    named = queries("report_quality")
    intervals = rows(con, named["quality_intervals"], limit=QUALITY_INTERVALS)
    if not intervals:
        return None
    for row in intervals:
        row["label"] = interval_text(row["interval_start"], row["interval_end"])
    total = scalar(con, named["quality_interval_count"])
    return {
        "intervals": intervals,
        "more": max(0, total - len(intervals)),
        "latest": rows(con, named["quality_latest"]),
        "latest_label": intervals[0]["label"],
    }
