"""JSON Lines parsed as DuckDB reads them, through the view stage_lines, rather than read into a
table of text first: every table ends as the table path leaves it (records, line numbers,
reasons and the raw text of quarantined records), and a file the view cannot number right, or
whose lines DuckDB rejects, takes the table path instead."""

from __future__ import annotations

import dataclasses
import json

import pytest

import pipeline.ingest.logs as logs
from pipeline.ingest import ingest_logs
from pipeline.warehouse import connect
from tests.conftest import request, snapshot, write_jsonl
from tests.test_ingest_logs import GOOD, bad_jsonl_corpus


def utf8_corpus() -> list:
    """Good records, blank lines and every bad record a UTF-8 file within the size limit can
    hold (the corpus without its undecodable and its oversized line), blank lines last."""
    bad = [record for record, reason in bad_jsonl_corpus()
           if reason not in ("not valid UTF-8", "record too large")]
    return GOOD[:2] + ["", "  \t"] + bad + [GOOD[2], " "] + GOOD[3:] + ["", "\t", ""]


@pytest.fixture
def staged_by(monkeypatch):
    """Each call of _stage_lines_as_view: what it returned (None: the table path followed)."""
    calls: list[int | None] = []
    real = logs._stage_lines_as_view

    def spy(con, path, max_record_bytes):
        calls.append(real(con, path, max_record_bytes))
        return calls[-1]

    monkeypatch.setattr(logs, "_stage_lines_as_view", spy)
    return calls


def ingest_both_ways(tmp_path, monkeypatch, staged_by, records, **options):
    """(outcome through the view, outcome through the table) of one file: a digest of every
    table, the file's counts and its quarantine rows."""
    path = write_jsonl(tmp_path / "logs" / "part.jsonl", records)
    outcomes = []
    for way in ("view", "table"):
        if way == "table":
            monkeypatch.setattr(logs, "_stage_lines_as_view", lambda *args: None)
        con = connect(tmp_path / f"{way}.duckdb")
        (result,) = ingest_logs(con, [str(path)], **options).files
        quarantine = con.sql("SELECT line, reason, raw FROM quarantine ORDER BY line").fetchall()
        outcomes.append((snapshot(con), (result.read, result.loaded, result.quarantined),
                         quarantine))
        con.close()
    return outcomes


def test_a_utf8_file_is_parsed_through_the_view_with_the_table_paths_outcome(
        tmp_path, monkeypatch, staged_by):
    records = utf8_corpus()
    by_view, by_table = ingest_both_ways(tmp_path, monkeypatch, staged_by, records)
    non_blank = sum(1 for r in records if not isinstance(r, str) or r.strip())
    assert staged_by == [non_blank]   # the view staged every non-blank line
    assert by_view == by_table
    _, (read, loaded, quarantined), rows = by_view
    assert (read, loaded) == (non_blank, len(GOOD))
    assert quarantined == len(rows) == non_blank - len(GOOD)
    # each quarantined record keeps its own line's text, looked up by its line number
    lines = {n: (r if isinstance(r, str) else json.dumps(r))
             for n, r in enumerate(records, start=1)}
    assert all(raw == lines[line] for line, _, raw in rows)
    assert {reason.split(" (")[0] for _, reason, _ in rows} >= {
        "invalid JSON", "record is not a JSON object", "bad timestamp: yesterday-ish",
        "conflicting duplicate request_id dup"}


def test_a_line_duckdb_rejects_sends_the_file_to_the_table(tmp_path, monkeypatch, staged_by):
    # over a lowered size limit but shorter than the line scan measures: only DuckDB finds it
    long = request("long", ["a"], query="x" * 3000)
    records = GOOD[:2] + [long] + GOOD[2:]
    by_view, by_table = ingest_both_ways(tmp_path, monkeypatch, staged_by, records,
                                         max_record_bytes=2000)
    assert staged_by == [None]
    assert by_view == by_table
    _, counts, rows = by_view
    assert counts == (len(records), len(GOOD), 1)
    assert [(line, reason.split(":")[0]) for line, reason, _ in rows] == [
        (3, "record too large")]


def test_a_file_that_is_not_utf8_is_never_read_through_the_view(
        tmp_path, monkeypatch, staged_by):
    records = GOOD[:2] + ['{"request_id": "x", "query": "caf\xe9"}'.encode("latin-1")] + GOOD[2:]
    by_view, by_table = ingest_both_ways(tmp_path, monkeypatch, staged_by, records)
    assert staged_by == [None]
    assert by_view == by_table
    assert [(line, "UTF-8" in reason) for line, reason, _ in by_view[2]] == [(3, True)]


def test_a_file_of_blank_lines_stages_nothing_through_the_view(tmp_path, monkeypatch, staged_by):
    by_view, by_table = ingest_both_ways(tmp_path, monkeypatch, staged_by, ["", " ", "\t"])
    assert staged_by == [0]
    assert by_view == by_table
    assert by_view[1] == (0, 0, 0)


def test_lines_numbered_otherwise_than_the_scan_found_send_the_file_to_the_table(
        tmp_path, monkeypatch, staged_by):
    # as if DuckDB had dropped a line without a word: its numbers would all be one off
    real = logs.line_scan
    monkeypatch.setattr(logs, "line_scan", lambda path: dataclasses.replace(
        real(path), last_text_line=real(path).last_text_line + 1))
    by_view, by_table = ingest_both_ways(tmp_path, monkeypatch, staged_by, utf8_corpus())
    assert staged_by == [None]
    assert by_view == by_table
