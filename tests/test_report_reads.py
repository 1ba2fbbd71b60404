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


def _cutoff_rows(seed: int) -> list[dict]:
    """Scored requests of two index versions and one other gold set, with the counts a route
    writes: some cutoffs not measured (NULL covered, as on the claims route below the whole
    served context), NULL relevant (claims), nothing served at a cutoff (precision NULL)."""
    import random

    rng = random.Random(seed)
    cutoffs = [1, 3, 5]
    found = []
    for i in range(60):
        needed = rng.randint(1, 4)
        whole = rng.random() < 0.3
        covered = [min(needed, rng.randint(0, c)) for c in cutoffs]
        covered = sorted(covered)
        if whole:
            covered = [None if j < rng.randint(0, 3) else c for j, c in enumerate(covered)]
        served = sorted(rng.choice([0, c]) for c in cutoffs)
        relevant = None if whole else [min(s, c or 0) for s, c in zip(served, covered, strict=True)]
        found.append({
            "id": f"r-{i}", "version": rng.choice(["idx-a", "idx-b"]),
            "gold": "gs-1" if i % 7 else "gs-0", "needed": needed, "cutoffs": cutoffs,
            "covered": covered, "served": served, "relevant": relevant,
            "ts": datetime(2026, 11, 1 + i % 5)})
    return found


def _write_cutoffs(path: Path, found: list[dict]) -> None:
    con = connect(path)
    for r in found:
        con.execute("INSERT INTO request_scores (request_id, timestamp, gold_version, "
                    "index_version, route, k, status) VALUES "
                    "($id, $ts, $gold, $version, 'ids', 5, 'scored')",
                    {k: r[k] for k in ("id", "ts", "gold", "version")})
        con.execute("INSERT INTO request_cutoffs VALUES ($id, 'ids', $needed, $cutoffs, "
                    "$covered, $served, $relevant)",
                    {k: r[k] for k in ("id", "needed", "cutoffs", "covered", "served",
                                       "relevant")})
    con.close()


def _curve_key(row: dict) -> tuple:
    return row["k"], row["index_version"] or ""


def test_the_recall_curve_is_recall_at_k_averaged_and_the_same_bits_in_any_row_order(tmp_path):
    from pipeline.report.reads import rows

    found = _cutoff_rows(7)
    curves = []
    for order, rows_in in (("as made", found), ("reversed", found[::-1])):
        _write_cutoffs(tmp_path / f"{order}.duckdb", rows_in)
        con = connect(tmp_path / f"{order}.duckdb", read_only=True)
        prepare(con)
        sections = queries("report_sections")
        curve = rows(con, sections["recall_curve"], route="ids", gold_version="gs-1")
        sizes = rows(con, sections["curve_sizes"], route="ids", gold_version="gs-1")
        # what the curve must average: the public view, row by row
        at_k = con.sql(
            "SELECT s.index_version, a.k, a.recall, a.precision, a.hit FROM recall_at_k a "
            "JOIN request_scores s USING (request_id, route) WHERE s.gold_version = 'gs-1'"
        ).fetchall()
        con.close()
        # rows of one k come in no set order of index_version
        curves.append((sorted(curve, key=_curve_key), sizes))

    assert curves[0] == curves[1]   # bit for bit
    curve, sizes = curves[0]
    expected = []
    for version in (None, "idx-a", "idx-b"):
        for k in (1, 3, 5):
            group = [r for r in at_k if r[1] == k and version in (None, r[0])]
            if not group:
                continue
            precisions = [r[3] for r in group if r[3] is not None]
            expected.append({
                "index_version": version, "k": k, "n": len(group),
                "recall": pytest.approx(sum(r[2] for r in group) / len(group), abs=1e-15),
                "precision": (pytest.approx(sum(precisions) / len(precisions), abs=1e-15)
                              if precisions else None),
                "n_precision": len(precisions),
                "hit_rate": pytest.approx(sum(r[4] for r in group) / len(group), abs=1e-15)})
    assert curve == sorted(expected, key=_curve_key)
    assert any(e["precision"] is None for e in expected) or any(
        e["n_precision"] < e["n"] for e in expected)   # the data holds unmeasured precision
    measured = {r[0] for r in at_k} | {None}
    in_scope = [r for r in found if r["gold"] == "gs-1"
                and any(c is not None for c in r["covered"])]
    assert {s["index_version"]: s["n"] for s in sizes} == {
        v: sum(1 for r in in_scope if v in (None, r["version"])) for v in measured}
