"""A big Parquet file is judged and loaded a part of its rows at a time (so the judged records
of one part, never the whole file's, are held in memory); its records get exactly the outcome
they get when the file is loaded in one piece: duplicates across parts, conflicts with what is
already loaded, bad records and their lines, counts."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.ingest import ingest_logs
from pipeline.ingest import logs as log_ingest
from pipeline.warehouse import connect
from tests.conftest import request, write_jsonl

TABLES = {
    "requests": "SELECT * EXCLUDE (source) FROM requests",
    "request_copies": "SELECT request_id, line FROM request_copies",
    "quarantine": "SELECT line, reason, raw FROM quarantine WHERE source LIKE '%big.parquet'",
    "ingest_files": "SELECT n_read, n_loaded, n_quarantined FROM ingest_files "
                    "WHERE source LIKE '%big.parquet'",
}


def records() -> list[dict]:
    rows = [request(f"r{i}", [f"c{i}", f"c{i + 1}", f"c{i + 2}"],
                    ts=f"2026-11-0{1 + i % 3}T10:00:00Z") for i in range(40)]
    rows[3] = request("r3", [{"chunk_id": "a", "rank": 2}, {"chunk_id": "b", "rank": 1}])
    rows[5] = request("r5", [{"chunk_id": "a", "rank": 0}])                # bad rank
    rows[7] = {**request("x", ["a"]), "request_id": None}                  # no request_id
    rows[25] = dict(rows[2])                                               # identical copy
    rows[31] = request("r9", ["other"])                                    # conflicts with r9
    rows[33] = request("old-same", ["a", "b"])                             # loaded before
    rows[36] = request("old-other", ["z"])                                 # loaded, other
    rows[38] = request("r9", ["c9", "c10", "c11"])                         # identical to r9
    return rows


def load(tmp_path, name: str, rows_per_part: int, monkeypatch) -> dict:
    monkeypatch.setattr(log_ingest, "part_rows", lambda con: rows_per_part)
    earlier = write_jsonl(tmp_path / "earlier.jsonl",
                          [request("old-same", ["a", "b"]), request("old-other", ["y"])])
    big = tmp_path / "big.parquet"
    rows = records()
    keys = sorted({key for row in rows for key in row})
    pq.write_table(pa.Table.from_pylist([{key: r.get(key) for key in keys} for r in rows]),
                   big, row_group_size=4)
    with connect(tmp_path / f"{name}.duckdb") as con:
        ingest_logs(con, [str(earlier)])
        (result,) = ingest_logs(con, [str(big)]).files
        tables = {table: sorted(con.sql(query).fetchall(), key=repr)
                  for table, query in TABLES.items()}
        staged = con.sql("SELECT count(*) FROM stage_requests").fetchall()[0][0]
    return {"result": (result.read, result.loaded, result.quarantined), "staged": staged,
            **tables}


@pytest.mark.parametrize("rows_per_part", [1, 7, 16])
def test_a_file_loaded_in_parts_gives_what_it_gives_in_one_piece(tmp_path, monkeypatch,
                                                                  rows_per_part):
    whole = load(tmp_path, "whole", 1_000_000, monkeypatch)
    parts = load(tmp_path, "parts", rows_per_part, monkeypatch)
    assert parts == whole
    # what the one-piece load gives, checked here so that the parts cannot agree on a wrong one
    assert whole["result"] == (40, 34, 6)
    assert [(line, reason.split(" already loaded")[0]) for line, reason, _ in
            sorted(whole["quarantine"])] == [
        (6, "retrieved item 1 has rank 0 (ranks start at 1)"),
        (8, "missing or null required field: request_id"),
        (10, "conflicting duplicate request_id r9 (lines 10, 32, 39)"),
        (32, "conflicting duplicate request_id r9 (lines 10, 32, 39)"),
        (37, "conflicts with request_id old-other"),
        (39, "conflicting duplicate request_id r9 (lines 10, 32, 39)")]
    assert sorted(whole["request_copies"]) == [("old-same", 34), ("r2", 26)]
    assert all(raw for _, _, raw in whole["quarantine"])   # each keeps its record
    assert whole["staged"] == 40   # the view of the whole file is back after the parts
