"""The per-index-version table the CLI prints after a run: for each index version (and gold
set), the days whose requests all used it, their scored requests, and mean recall at the
scope's k on its first, last and lowest day, with the largest index size. It shows the shape of
drift at a glance; the report's own sections are in pipeline.report.sections.
"""

from __future__ import annotations

import duckdb

from pipeline.report.reads import rows
from pipeline.report.scope import Scope
from pipeline.warehouse import queries


def index_version_summary(con: duckdb.DuckDBPyConnection, scope: Scope) -> list[dict]:
    """Rows of daily window_metrics (each index version's own slice, 'index_version=<v>') at
    the scope's route and k, one per index version x gold version in order of first day, with
    keys index_version, gold_version, days, n, first_recall, last_recall, lowest, index_size.
    Every gold set is listed, not only the scope's. Empty when the scope has no k (nothing
    scored)."""
    if scope.k is None:
        return []
    return rows(con, queries("report_sections")["index_version_summary"],
                **scope.params("route", "k"))
