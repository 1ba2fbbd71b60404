"""Input files: paths, directories and globs expand to the files to read, and a path that
names no input is an error rather than an empty run."""

from __future__ import annotations

import pytest

from pipeline.errors import RecallwatchError
from pipeline.ingest import LOG_SUFFIXES, expand_paths, ingest_logs


def test_empty_directory_is_an_error_not_an_empty_run(con, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecallwatchError, match="no input files found"):
        ingest_logs(con, [str(tmp_path / "empty")])


def test_missing_path_is_an_error(tmp_path):
    with pytest.raises(RecallwatchError, match="no such file or directory"):
        expand_paths([str(tmp_path / "nowhere.jsonl")], LOG_SUFFIXES)


def test_unsupported_file_type_is_an_error(tmp_path):
    (tmp_path / "logs.txt").write_text("{}\n")
    with pytest.raises(RecallwatchError, match="unsupported file type"):
        expand_paths([str(tmp_path / "logs.txt")], LOG_SUFFIXES)


def test_directories_and_globs_expand_once_each_in_a_stable_order(tmp_path):
    for part in ("dt=2026-11-02", "dt=2026-11-01"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "a.jsonl").write_text("{}\n")
        (tmp_path / part / "notes.txt").write_text("not a log\n")
    found = expand_paths([str(tmp_path), str(tmp_path / "dt=*" / "*.jsonl")], LOG_SUFFIXES)
    assert [p.parent.name for p in found] == ["dt=2026-11-01", "dt=2026-11-02"]


def test_a_pipe_named_like_a_log_file_is_refused_not_read_forever(tmp_path):
    import os
    import subprocess
    import sys

    fifo = tmp_path / "logs.jsonl"
    os.mkfifo(fifo)
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "--warehouse", str(tmp_path / "w.duckdb"),
         "ingest", "logs", str(fifo)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    assert "not a regular file (a pipe, socket or device)" in result.stderr


def test_a_byte_order_mark_does_not_cost_the_first_record(con, tmp_path):
    import json

    from pipeline.ingest import ingest_gold
    from tests.conftest import golden, request

    logs = tmp_path / "logs.jsonl"
    logs.write_bytes(b"\xef\xbb\xbf" + json.dumps(request("r-1", ["a"])).encode() + b"\n"
                     + json.dumps(request("r-2", ["b"])).encode() + b"\n")
    gold = tmp_path / "gold.jsonl"
    gold.write_bytes(b"\xef\xbb\xbf" + json.dumps(golden("g-1", ["a"])).encode() + b"\n")
    summary = ingest_logs(con, [str(logs)])
    assert (summary.read, summary.loaded, summary.quarantined) == (2, 2, 0)
    result = ingest_gold(con, str(gold), "v1")
    assert (result.read, result.loaded, result.quarantined) == (1, 1, 0)


def test_a_huge_line_is_skipped_in_bounded_memory_and_quarantined(con, tmp_path):
    import json
    import tracemalloc

    from pipeline.ingest.files import read_json_lines
    from tests.conftest import request

    path = tmp_path / "logs.jsonl"
    huge = 200 * 1024 * 1024
    with open(path, "wb") as fh:
        fh.write(b'{"request_id": "' + b"x" * huge + b'"}\n')
        fh.write(json.dumps(request("r-2", ["a"])).encode() + b"\n")
    tracemalloc.start()
    lines = list(read_json_lines(path, 8 * 1024 * 1024))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 40 * 1024 * 1024, peak        # never the 200 MB line at once
    (number, text, reason, raw), second = lines
    assert (number, text) == (1, None) and reason.startswith(f"record too large: {huge + 19} bytes")
    assert len(raw) <= 65536 and second[0] == 2 and second[1] is not None
    summary = ingest_logs(con, [str(path)])
    assert (summary.read, summary.loaded, summary.quarantined) == (2, 1, 1)
