"""Tests of pipeline.report.reads: the report refuses a warehouse without its tables in one
sentence, defines its scoped macro on a read-only warehouse, and the filter of which request
scores are in scope is written once, in sql/report_macros.sql."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from pipeline.errors import RecallwatchError
from pipeline.report import write_report
from pipeline.report.reads import READ_TABLES, prepare
from pipeline.warehouse import connect, queries

SQL_DIR = Path(__file__).resolve().parents[1] / "sql"
MACROS = "report_macros.sql"


def test_scored_requests_macro_is_defined_on_a_read_only_warehouse(tmp_path):
    path = tmp_path / "wh.duckdb"
    writer = connect(path)
    writer.executemany(
        "INSERT INTO request_scores (request_id, timestamp, gold_version, index_version, route,"
        " k, status) VALUES ($id, $ts, $gold, 'idx-1', $route, 5, $status)",
        [{"id": rid, "ts": datetime(2026, 11, 1), "gold": gold, "route": route, "status": status}
         for rid, gold, route, status in [
             ("in-scope-1", "gs-1", "ids", "scored"),
             ("in-scope-2", "gs-1", "ids", "scored"),
             ("other-gold", "gs-0", "ids", "scored"),
             ("other-route", "gs-1", "passages", "scored"),
             ("no-evidence", "gs-1", "ids", "no_evidence"),
             ("no-gold", None, "ids", "no_gold_match"),
         ]],
    )
    writer.close()

    con = connect(path, read_only=True)
    try:
        prepare(con)
        found = con.sql(
            "SELECT request_id FROM scored_requests($route, $gold_version) ORDER BY 1",
            params={"route": "ids", "gold_version": "gs-1"},
        ).fetchall()
    finally:
        con.close()
    assert found == [("in-scope-1",), ("in-scope-2",)]


def test_warehouse_without_the_report_tables_is_refused_in_one_sentence(tmp_path):
    con = duckdb.connect()
    con.execute("CREATE TABLE request_scores (request_id VARCHAR)")
    with pytest.raises(RecallwatchError) as raised:
        write_report(con, tmp_path / "out")
    message = str(raised.value)
    missing = [name for name in READ_TABLES if name != "request_scores"]
    assert f"the warehouse has no table {', '.join(missing)}:" in message
    assert "request_scores," not in message
    assert "\n" not in message and message.endswith(".")
    assert not (tmp_path / "out").exists()


def _statements(path: Path) -> dict[str, str]:
    """The queries of one SQL file: its named queries, else the file as one."""
    text = path.read_text(encoding="utf-8")
    if re.search(r"^-- name: ", text, re.MULTILINE):
        return queries(path.stem)
    return {path.stem: text}


def test_scored_request_filter_is_written_once_in_the_macro_file():
    # As filters (WHERE or AND), not e.g. ORDER BY (status = 'scored').
    scored = re.compile(r"(?:WHERE|AND)\s+(?:\w+\.)?status\s*=\s*'scored'", re.IGNORECASE)
    in_gold_set = re.compile(r"(?:WHERE|AND)\s+(?:\w+\.)?gold_version\s*=\s*\$gold_version",
                             re.IGNORECASE)
    repeated = [
        f"{path.name}: {name}"
        for path in sorted(SQL_DIR.glob("*.sql")) if path.name != MACROS
        for name, text in _statements(path).items()
        if scored.search(text) and in_gold_set.search(text)
    ]
    assert repeated == [], "read the scope's scored requests from scored_requests() instead"
    macro = (SQL_DIR / MACROS).read_text(encoding="utf-8")
    assert "MACRO scored_requests(_route, _gold_version)" in macro
    assert re.search(r"AND status = 'scored'", macro)


def test_the_miss_sentence_counts_requests_with_a_miss_once(tmp_path, run_cli):
    """'N missing gold chunks in M of K scored requests': a request missing two gold chunks is
    counted once among the M."""
    from tests.conftest import golden, request, write_jsonl

    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b", "c"])])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("r-1", ["a"]),             # misses b, c
        request("r-2", ["a", "b"]),        # misses c
        request("r-3", ["a", "b", "c"]),   # misses nothing
    ])
    code, _, _ = run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold",
                         tmp_path / "gold.jsonl", "--gold-version", "v1",
                         "--out", tmp_path / "report")
    assert code == 0
    page = (tmp_path / "report" / "report.html").read_text()
    assert "3 missing gold chunks in 2 of 3 scored requests." in page
