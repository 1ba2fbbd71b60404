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


# DuckDB reads JSON Lines (pipeline/ingest/logs.py stage_jsonl); read_json_lines is the
# reference for what every line is: staged text, or a reason with its raw bytes.

_PIECES = [b'{"a": 1}', b'{"a": "caf\xc3\xa9"}', b"\xe9", b"\x01", b"\xef\xbb\xbf", b" ", b"\t",
           b"\x0b", b"x" * 300, b"[1]", b"\x00", b'"', b"\xed\xa0\x80", b"\xc0\x80",
           b"\xf0\x9f\x98\x80", b'{"a": "\\u0001"}', b"\r", b"\r\n"]


def _staged(con, path, limit):
    """(line, text, reason, raw) of every line stage_jsonl staged or rejected, as
    read_json_lines yields them; and whether DuckDB read the lines."""
    from pipeline.ingest import logs

    con.execute("BEGIN")
    try:
        rejects = logs._read_lines_in_sql(con, path, limit, logs.line_scan(path))
        if rejects is None:
            return None, False
        rows = con.execute("SELECT line, text FROM stage_lines").fetchall()
        return sorted([(n, t, None, None) for n, t in rows]
                      + [(n, None, reason, raw) for n, reason, raw in rejects]), True
    finally:
        con.execute("ROLLBACK")


def test_duckdb_reads_every_line_as_the_python_reader_does(con, tmp_path):
    import gzip

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from pipeline.ingest.files import read_json_lines

    lines = st.lists(st.lists(st.sampled_from(_PIECES), max_size=4).map(b"".join), max_size=10)

    @settings(max_examples=150, deadline=None)
    @given(lines, st.sampled_from([b"\n", b"\r\n"]), st.booleans(), st.booleans(),
           st.booleans(), st.sampled_from([40, 200, 8 * 1024 * 1024]))
    def check(body, newline, last_newline, bom, gz, limit):
        data = (b"\xef\xbb\xbf" if bom else b"") + newline.join(body) + (
            newline if last_newline and body else b"")
        path = tmp_path / ("logs.jsonl.gz" if gz else "logs.jsonl")
        path.write_bytes(gzip.compress(data) if gz else data)
        staged, by_duckdb = _staged(con, path, limit)
        if by_duckdb:
            assert staged == list(read_json_lines(path, limit)), data

    check()


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
@pytest.mark.parametrize("name", ["logs.jsonl", "logs.jsonl.gz"])
def test_duckdb_reads_the_lines_and_the_python_reader_only_the_bad_ones(
        con, tmp_path, monkeypatch, newline, name):
    import gzip
    import json

    from pipeline.ingest import logs
    from tests.conftest import request

    good = [json.dumps(request(f"r-{i}", ["a"])).encode() for i in range(3)]
    data = b"\xef\xbb\xbf" + newline.join([
        good[0], b"", good[1], b'{"request_id": "caf\xe9"}', b"   ", b'{"a": 1}\x01',
        b'{"a": "x\x01y"}', good[2]]) + newline
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)

    def whole_file(*_):
        raise AssertionError("the Python reader read the whole file")

    monkeypatch.setattr(logs, "read_json_lines", whole_file)
    summary = ingest_logs(con, [str(path)])
    assert (summary.read, summary.loaded, summary.quarantined) == (6, 3, 3)
    quarantined = con.execute("SELECT line, reason, raw FROM quarantine ORDER BY line").fetchall()
    assert quarantined == [
        # the record as read, without its line ending (as every other quarantined line)
        (4, "not valid UTF-8 (byte 19)", '{"request_id": "caf\ufffd"}'),
        # a line ending in the delimiter byte is judged whole, not cut before it
        (6, "invalid JSON", '{"a": 1}\x01'),
        (7, "invalid JSON", '{"a": "x\x01y"}')]
    assert [r[0] for r in con.sql("SELECT line FROM requests ORDER BY line").fetchall()] == [
        1, 3, 8]


def test_mixed_line_endings_and_long_lines_are_read_by_the_python_reader(con, tmp_path):
    import json

    from pipeline.ingest.files import BARE_CR, SCAN_BLOCK, line_scan
    from tests.conftest import request

    good = json.dumps(request("r-1", ["a"])).encode()
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(good + b"\r\n" + b'{"a": "q\rz"}\n' + good.replace(b"r-1", b"r-2") + b"\n")
    summary = ingest_logs(con, [str(mixed)])
    assert (summary.read, summary.loaded, summary.quarantined) == (3, 2, 1)
    # a raw carriage return inside a string: the reason names it
    assert con.sql("SELECT line, reason FROM quarantine").fetchall() == [(2, BARE_CR)]

    long = tmp_path / "long.jsonl"
    long.write_bytes(b"\xef\xbb\xbf" + b"x" * (3 * SCAN_BLOCK) + b"\n\n" + good + b"\n" + b"y" * 5)
    scan = line_scan(long)
    assert (scan.lines, scan.long_lines) == (4, ((1, 3 * SCAN_BLOCK + 1),))
    summary = ingest_logs(con, [str(long)], max_record_bytes=SCAN_BLOCK)
    # r-1 again (an identical re-delivery) loads; the last line has no newline
    assert (summary.read, summary.loaded, summary.quarantined) == (3, 1, 2)
    reasons = dict(con.execute("SELECT line, reason FROM quarantine WHERE source = $s",
                               {"s": str(long)}).fetchall())
    assert reasons[1].startswith(f"record too large: {3 * SCAN_BLOCK + 1} bytes")
    assert reasons[4] == "invalid JSON"


def test_ingesting_a_200_mb_line_keeps_memory_bounded(tmp_path):
    """The line is over the limit: line_scan sees it while hashing the file and the Python
    reader skips it in bounded chunks; DuckDB never holds it."""
    import json
    import subprocess
    import sys

    from tests.conftest import request

    path = tmp_path / "logs.jsonl"
    with open(path, "wb") as fh:
        fh.write(b'{"request_id": "' + b"x" * (200 * 1024 * 1024) + b'"}\n')
        fh.write(json.dumps(request("r-2", ["a"])).encode() + b"\n")
    script = (
        "import resource, sys\n"
        "from pipeline.ingest import ingest_logs\n"
        "from pipeline.warehouse import connect\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "s = ingest_logs(connect(':memory:'), [sys.argv[1]])\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(s.read, s.loaded, s.quarantined, (after - before) // 1024)\n")
    result = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                            text=True, check=True, timeout=300)
    read, loaded, quarantined, grown_mb = map(int, result.stdout.split())
    assert (read, loaded, quarantined) == (2, 1, 1)
    assert grown_mb < 100, grown_mb   # never the 200 MB line at once


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".parquet", "-blank.jsonl"])
def test_folders_named_like_a_field_are_no_data(con, tmp_path, suffix):
    # DuckDB read index_version=.../k=.../gold_id=... folders as columns: the folder's value
    # replaced what a Parquet record logged (k 1 for 3: recall 0.333 for 1.0), and JSON Lines
    # ingest failed with an internal error
    import gzip
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.conftest import request

    record = request("r-1", ["c1", "c2", "c3"], index_version="idx-logged", k=3,
                     gold_id="g-logged")
    folder = tmp_path / "index_version=idx-folder" / "k=1" / "gold_id=g-folder" / "dt=2026-11-01"
    folder.mkdir(parents=True)
    path = folder / f"part-0{suffix.replace('-blank', '')}"
    text = json.dumps(record) + "\n" + ("\n" if "blank" in suffix else "")
    if suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist([record]), path)
    elif suffix.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    summary = ingest_logs(con, [str(tmp_path)])
    assert [(f.read, f.loaded) for f in summary.files] == [(1, 1)]
    assert con.sql("SELECT index_version, k, gold_id FROM requests").fetchall() == [
        ("idx-logged", 3, "g-logged")]
