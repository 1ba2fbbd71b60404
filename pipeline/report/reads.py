"""How the report reads the warehouse. Its queries are the named blocks of sql/report_scope.sql,
sql/report_summary.sql and sql/report_sections.sql; they run here with every value bound as a
$named parameter and come back as plain rows. Before its first query the report checks that
the tables it reads exist and defines the TEMP macro `scored_requests` (sql/report_macros.sql),
the one statement of which request scores belong to a route and gold set.
"""

from __future__ import annotations

import duckdb

from pipeline.errors import RecallwatchError
from pipeline.warehouse import queries, quote_identifier, run_script

READ_TABLES = (
    "window_metrics", "recall_at_k", "request_cutoffs", "request_scores", "miss_causes",
    "requests", "goldens", "quarantine", "ingest_files",
)


def rows(con: duckdb.DuckDBPyConnection, query: str, **params) -> list[dict]:
    # con.sql(...).pl() is the DuckDB 2.0 path that neither blocks the connection nor needs fetch.
    return con.sql(query, params=params or None).pl().to_dicts()


def script_rows(con: duckdb.DuckDBPyConnection, name: str, **params) -> list[dict]:
    """The rows of the last statement of the script sql/<name>.sql, the statements before it
    building the TEMP tables it reads; those tables are dropped after, so their memory goes back
    to the report's other queries."""
    before = _temp_tables(con)
    try:
        return run_script(con, name, params, as_arrow=True).to_pylist()
    finally:
        for table in sorted(_temp_tables(con) - before):
            con.execute(f"DROP TABLE IF EXISTS temp.main.{quote_identifier(table)}")


def _temp_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {name for (name,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()}


def scalar(con: duckdb.DuckDBPyConnection, query: str, **params):
    found = con.sql(query, params=params or None).fetchall()
    return found[0][0] if found else None


def tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    # Tables and views alike: recall_at_k is a view over request_cutoffs.
    found = con.sql(queries("report_scope")["list_tables"]).fetchall()
    return {name for (name,) in found}


def prepare(con: duckdb.DuckDBPyConnection) -> None:
    """Refuse a warehouse without the report's tables; define the report's TEMP macros. TEMP
    objects live on this connection only, so this works on a read-only warehouse too."""
    missing = [name for name in READ_TABLES if name not in tables(con)]
    if missing:
        raise RecallwatchError(
            f"the warehouse has no table {', '.join(missing)}: load it through recallwatch "
            "(`recallwatch ingest logs PATH` creates every table) before writing a report."
        )
    run_script(con, "report_macros")
