"""Ingest of request logs: nothing lost, nothing loaded twice. A bad-input corpus ends with
every bad record in quarantine with its reason, every good record scored, and read = loaded +
quarantined per file; loading the same files again changes no table; JSONL and Parquet copies
of a record are one record."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import api
from pipeline.errors import RecallwatchError
from pipeline.ingest import ingest_gold, ingest_logs
from pipeline.ingest.files import BARE_CR, RAW_LIMIT
from pipeline.score import score
from pipeline.warehouse import connect
from tests.conftest import golden, request, snapshot, write_jsonl

GOOD = [request(f"good-{i}", ["a", "b"], ts=f"2026-11-01T0{i}:00:00Z") for i in range(5)]


def bad_jsonl_corpus() -> list:
    """(record, expected reason fragment) pairs; records are dicts or raw lines."""
    huge = json.dumps(request("huge", ["a"], query="x" * (10 * 1024 * 1024)))
    no_ts = request("no-ts", ["a"])
    del no_ts["timestamp"]
    no_retrieved = request("no-retrieved", ["a"])
    del no_retrieved["retrieved"]
    return [
        ('{"request_id": "broken", "timestamp": ', "invalid JSON"),
        ("[1, 2, 3]", "record is not a JSON object"),
        (no_ts, "missing or null required field: timestamp"),
        (request(None, ["a"]), "missing or null required field: request_id"),
        (request("null-query", ["a"], query=None), "missing or null required field: query"),
        (request("null-index", ["a"], index_version=None),
         "missing or null required field: index_version"),
        (no_retrieved, "missing or null required field: retrieved"),
        (request("bad-ts", ["a"], ts="yesterday-ish"), "bad timestamp: yesterday-ish"),
        (request("bad-ts-type", ["a"], ts=1730000000), "bad timestamp"),
        ({**request("not-list", []), "retrieved": "c-1,c-2"}, "retrieved is not a list"),
        (request("null-chunk", ["a", {"chunk_id": None}]), "item 2 has a null or missing chunk_id"),
        (request("no-chunk", [{"rank": 1}]), "item 1 has a null or missing chunk_id"),
        (request("neg-rank", [{"chunk_id": "a", "rank": -3}]), "has rank -3"),
        (request("float-rank", [{"chunk_id": "a", "rank": 1.5}]),
         "item 1 has a rank that is not an integer"),
        (request("item-str", ["a", 5, "b"], ) | {"retrieved": ["a"]},
         "retrieved item 1 is not an object"),
        (request("bad-k", ["a"], k=-1), "k must be an integer of at least 1"),
        (request("bad-size", ["a"], index_size="big"), "index_size must be a non-negative"),
        (request("bad-tags", ["a"], tags=["acme"]), "tags is not an object"),
        (request("dup", ["a"]), "conflicting duplicate request_id dup"),
        (request("dup", ["b"]), "conflicting duplicate request_id dup"),
        ('{"request_id": "latin1", "query": "caf\xe9"}'.encode("latin-1"), "not valid UTF-8"),
        (huge, "record too large"),
        # the quality gate's k >= 1: a logged k of 0 serves nothing, never a scored 0
        (request("zero-k", ["a"], k=0), "k must be an integer of at least 1, got 0"),
        (request("whole-k", ["a"], k=4.5), "k must be an integer of at least 1, got 4.5"),
        # an integer of any size is an ID (its digits); a number written as a float is not
        (request("float-id", [1e30]), "retrieved item 1 has a chunk_id that is not a string"),
    ]


def write_corpus(tmp_path):
    corpus = bad_jsonl_corpus()
    records = GOOD[:3] + [r for r, _ in corpus] + GOOD[3:]
    return write_jsonl(tmp_path / "logs" / "dt=2026-11-01" / "part.jsonl", records), corpus


def quarantine_by_line(con, source) -> dict[int, str]:
    return dict(con.execute("SELECT line, reason FROM quarantine WHERE source = $s",
                            {"s": str(source)}).fetchall())


def test_bad_jsonl_corpus_lands_in_quarantine_with_reasons(con, tmp_path):
    path, corpus = write_corpus(tmp_path)
    summary = ingest_logs(con, [str(tmp_path / "logs")])
    reasons = quarantine_by_line(con, path)
    for offset, (_, expected) in enumerate(corpus):
        line = 4 + offset  # three good records come first
        assert line in reasons, f"line {line} ({expected}) was not quarantined"
        assert expected in reasons[line], (line, reasons[line])
    (result,) = summary.files
    assert result.read == len(GOOD) + len(corpus)
    assert result.quarantined == len(corpus)
    assert result.loaded == len(GOOD)
    assert result.read == result.loaded + result.quarantined
    loaded = {r[0] for r in con.sql("SELECT request_id FROM requests").fetchall()}
    assert loaded == {r["request_id"] for r in GOOD}


def test_every_good_record_of_a_bad_corpus_is_scored(con, tmp_path):
    write_corpus(tmp_path)
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "c"])])
    ingest_logs(con, [str(tmp_path / "logs")])
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    score(con)
    rows = con.sql("SELECT request_id, status, recall FROM request_scores ORDER BY 1").fetchall()
    assert rows == [(r["request_id"], "scored", 0.5) for r in GOOD]


def test_quarantine_keeps_the_raw_record(con, tmp_path):
    path, _ = write_corpus(tmp_path)
    ingest_logs(con, [str(tmp_path / "logs")])
    raw = dict(con.execute("SELECT line, raw FROM quarantine WHERE source = $s",
                           {"s": str(path)}).fetchall())
    assert raw[4] == '{"request_id": "broken", "timestamp": '
    assert "caf\ufffd" in raw[24]  # undecodable byte shown as a replacement character
    assert len(raw[25]) == RAW_LIMIT == 65536  # a huge record is kept truncated


def test_larger_record_limit_loads_the_huge_line(con, tmp_path):
    huge = request("huge", ["a"], query="x" * (10 * 1024 * 1024))
    write_jsonl(tmp_path / "big.jsonl", [huge])
    ingest_logs(con, [str(tmp_path / "big.jsonl")], max_record_bytes=16 * 1024 * 1024)
    assert con.sql("SELECT length(query) FROM requests").fetchall() == [(10 * 1024 * 1024,)]


def test_ingesting_the_same_files_twice_changes_no_table(con, tmp_path):
    write_corpus(tmp_path)
    ingest_logs(con, [str(tmp_path / "logs")])
    before = snapshot(con)
    again = ingest_logs(con, [str(tmp_path / "logs")])
    assert all(f.skipped for f in again.files)
    assert snapshot(con) == before


def test_same_records_in_another_file_load_once(con, tmp_path):
    write_jsonl(tmp_path / "a.jsonl", GOOD)
    write_jsonl(tmp_path / "b.jsonl", GOOD[:2] + [request("extra", ["a"])])
    summary = ingest_logs(con, [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")])
    assert [f.loaded for f in summary.files] == [5, 3]
    assert con.sql("SELECT count(*) FROM requests").fetchall()[0][0] == 6
    assert con.sql("SELECT count(*) FROM quarantine").fetchall()[0][0] == 0


def test_redelivered_request_with_other_content_is_quarantined(con, tmp_path):
    write_jsonl(tmp_path / "a.jsonl", GOOD[:1])
    changed = dict(GOOD[0], query="something else")
    write_jsonl(tmp_path / "b.jsonl", [changed])
    ingest_logs(con, [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")])
    (reason,) = con.sql("SELECT reason FROM quarantine").fetchall()[0]
    assert reason.startswith("conflicts with request_id good-0 already loaded from")
    assert con.sql("SELECT query FROM requests").fetchall() == [(GOOD[0]["query"],)]


def test_changed_file_replaces_what_it_loaded(con, tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", GOOD)
    ingest_logs(con, [str(path)])
    write_jsonl(path, GOOD[:2] + ["{not json"])
    (result,) = ingest_logs(con, [str(path)]).files
    assert (result.read, result.loaded, result.quarantined) == (3, 2, 1)
    assert con.sql("SELECT count(*) FROM requests").fetchall()[0][0] == 2
    assert con.sql("SELECT sum(len(retrieved)) FROM requests").fetchall()[0][0] == 4


def test_gzip_and_parquet_logs_load_like_jsonl(con, tmp_path):
    with gzip.open(tmp_path / "a.jsonl.gz", "wt") as fh:
        for record in GOOD[:2]:
            fh.write(json.dumps(record) + "\n")
    table = pa.table({
        "request_id": ["p-1", "p-2", None],
        "timestamp": ["2026-11-01T10:00:00Z", "not a time", "2026-11-01T10:00:00Z"],
        "query": ["q", "q", "q"],
        "index_version": ["idx-1"] * 3,
        "retrieved": [[{"chunk_id": "a", "rank": 1}], [], [{"chunk_id": None, "rank": 1}]],
        "tags": [{"tenant": "acme"}] * 3,
    })
    pq.write_table(table, tmp_path / "b.parquet")
    summary = ingest_logs(con, [str(tmp_path / "a.jsonl.gz"), str(tmp_path / "b.parquet")])
    assert [(f.read, f.loaded, f.quarantined) for f in summary.files] == [(2, 2, 0), (3, 1, 2)]
    reasons = sorted(r[0] for r in con.sql("SELECT reason FROM quarantine").fetchall())
    assert reasons == ["bad timestamp: not a time",
                       "missing or null required field: request_id"]
    raw = con.sql("SELECT raw FROM quarantine WHERE line = 2").fetchall()[0][0]
    assert json.loads(raw)["timestamp"] == "not a time"
    assert con.sql("SELECT tags FROM requests WHERE request_id = 'p-1'").fetchall() == [
        ({"tenant": "acme"},)]


def test_parquet_and_jsonl_copies_of_a_record_are_the_same_record(con, tmp_path):
    record = request("same", [{"chunk_id": "a", "rank": 1, "score": 0.5, "text": "t"}],
                     tags={"tenant": "acme"}, k=1)
    write_jsonl(tmp_path / "a.jsonl", [record])
    pq.write_table(pa.Table.from_pylist([record]), tmp_path / "b.parquet")
    summary = ingest_logs(con, [str(tmp_path / "a.jsonl"), str(tmp_path / "b.parquet")])
    assert [f.quarantined for f in summary.files] == [0, 0]
    assert con.sql("SELECT count(*) FROM requests").fetchall()[0][0] == 1


def test_parquet_struct_tags_are_the_tags_each_record_logged(con, tmp_path):
    # pyarrow and pandas write a column of dicts as one struct of every key: a key a record
    # lacks reads as null there, which is no tag, so the Parquet copy is the JSONL record
    records = [request("t1", ["a"], tags={"tenant": "acme"}),
               request("t2", ["b"], ts="2026-11-01T11:00:00Z", tags={"retriever": "bm25"}),
               request("t3", ["c"], ts="2026-11-01T12:00:00Z",
                       tags={"tenant": "acme", "retriever": None})]
    write_jsonl(tmp_path / "a.jsonl", records)
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "b.parquet")
    assert pa.types.is_struct(pq.read_schema(tmp_path / "b.parquet").field("tags").type)
    summary = ingest_logs(con, [str(tmp_path / "a.jsonl"), str(tmp_path / "b.parquet")])
    assert [(f.loaded, f.quarantined) for f in summary.files] == [(3, 0), (3, 0)]
    assert con.sql("SELECT request_id, tags FROM requests ORDER BY 1").fetchall() == [
        ("t1", {"tenant": "acme"}), ("t2", {"retriever": "bm25"}), ("t3", {"tenant": "acme"})]


def test_parquet_tags_differing_only_in_case_are_both_kept_as_logged(con, tmp_path):
    # DuckDB reads a struct's fields without case: tags Tenant and tenant came out as Tenant
    # and tenant_1, a tag renamed in silence (and then not the JSONL copy of the record)
    record = request("t1", ["a"], tags={"Tenant": "Acme", "tenant": "globex"})
    write_jsonl(tmp_path / "a.jsonl", [record])
    pq.write_table(pa.Table.from_pylist([record]), tmp_path / "b.parquet")
    assert pq.read_schema(tmp_path / "b.parquet").field("tags").type.names == ["Tenant", "tenant"]
    summary = ingest_logs(con, [str(tmp_path / "b.parquet"), str(tmp_path / "a.jsonl")])
    assert [(f.loaded, f.quarantined) for f in summary.files] == [(1, 0), (1, 0)]
    assert con.sql("SELECT request_id, tags FROM requests").fetchall() == [
        ("t1", {"Tenant": "Acme", "tenant": "globex"})]


def _struct_tags_file(path: Path, names: list[str], rows: list[list]) -> Path:
    """A Parquet log of one record per row of `rows`, its tags a struct of fields `names`
    (pyarrow writes fields of the same name, or names that differ only in case, as given)."""
    columns = zip(*rows, strict=True)
    tags = pa.StructArray.from_arrays([pa.array(c, pa.string()) for c in columns], names=names)
    records = [request(f"p-{i}", ["a"]) for i in range(len(rows))]
    pq.write_table(pa.table({
        "request_id": [r["request_id"] for r in records],
        "timestamp": [r["timestamp"] for r in records],
        "query": [r["query"] for r in records],
        "index_version": [r["index_version"] for r in records],
        "retrieved": [r["retrieved"] for r in records], "tags": tags}), path)
    return path


def test_parquet_struct_tags_differing_only_in_case_keep_their_names(con, tmp_path):
    # DuckDB reads a struct field whose name differs from an earlier one's only in case as
    # name_1: the tag "tenant" was stored as "tenant_1", a slice no log had, apart from the
    # same request logged as JSON Lines
    path = _struct_tags_file(tmp_path / "b.parquet", ["Tenant", "tenant"],
                             [["A", "b"], [None, "b"]])
    summary = ingest_logs(con, [str(path)])
    assert (summary.loaded, summary.quarantined) == (2, 0)
    assert con.sql("SELECT request_id, tags FROM requests ORDER BY 1").fetchall() == [
        ("p-0", {"Tenant": "A", "tenant": "b"}), ("p-1", {"tenant": "b"})]


def test_a_parquet_struct_of_tags_with_a_repeated_key_is_quarantined(con, tmp_path):
    # as a repeated key in JSON Lines tags is, not loaded with the second one as "tenant_1"
    path = _struct_tags_file(tmp_path / "b.parquet", ["tenant", "tenant"],
                             [["a", "b"], ["a", None]])
    summary = ingest_logs(con, [str(path)])
    assert (summary.loaded, summary.quarantined) == (0, 2)
    assert {r[0] for r in con.sql("SELECT reason FROM quarantine").fetchall()} == {
        "tags has a duplicate key: tenant"}


def test_a_request_stored_with_a_null_tag_is_the_same_record_as_one_without_it(con, tmp_path):
    # an earlier release stored a null tag value; the same record delivered again is a copy
    record = request("t1", ["a"], tags={"tenant": "acme"})
    write_jsonl(tmp_path / "a.jsonl", [record])
    ingest_logs(con, [str(tmp_path / "a.jsonl")])
    con.execute("UPDATE requests SET tags = MAP {'tenant': 'acme', 'retriever': NULL}")
    write_jsonl(tmp_path / "b.jsonl", [record])
    summary = ingest_logs(con, [str(tmp_path / "b.jsonl")])
    assert (summary.loaded, summary.quarantined) == (1, 0)


def test_cli_ingest_of_bad_corpus_prints_counts_and_no_traceback(tmp_path):
    write_corpus(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "--warehouse", str(tmp_path / "w.duckdb"),
         "ingest", "logs", str(tmp_path / "logs")], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    total = len(GOOD) + len(bad_jsonl_corpus())
    assert f"read {total}, loaded {len(GOOD)}, quarantined {total - len(GOOD)}" in result.stdout


def test_read_equals_loaded_plus_quarantined_in_the_warehouse(con, tmp_path):
    write_corpus(tmp_path)
    write_jsonl(tmp_path / "logs" / "dt=2026-11-02" / "part.jsonl", GOOD[:2] + ["{"])
    ingest_logs(con, [str(tmp_path / "logs")])
    rows = con.sql("""
        SELECT f.source, f.n_read, f.n_loaded, f.n_quarantined,
               (SELECT count(*) FROM quarantine q WHERE q.source = f.source) AS in_quarantine
        FROM ingest_files f""").fetchall()
    assert len(rows) == 2
    for _, read, loaded, quarantined, in_quarantine in rows:
        assert read == loaded + quarantined
        assert quarantined == in_quarantine


def test_timestamps_with_offsets_are_stored_in_utc(con, tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [request("r-1", ["a"], ts="2026-11-01T02:30:00+03:00")])
    ingest_logs(con, [str(tmp_path / "a.jsonl")])
    (ts,), = con.sql("SELECT timestamp FROM requests").fetchall()
    assert ts.isoformat() == "2026-10-31T23:30:00"


def test_warehouse_file_persists_between_connections(tmp_path):
    path = tmp_path / "w.duckdb"
    write_jsonl(tmp_path / "a.jsonl", GOOD)
    con = connect(path)
    ingest_logs(con, [str(tmp_path / "a.jsonl")])
    con.close()
    con = connect(path, read_only=True)
    assert con.sql("SELECT count(*) FROM requests").fetchall()[0][0] == len(GOOD)


@pytest.mark.parametrize("ts", ["infinity", "-infinity", "epoch", "0001-01-01T00:00:00Z",
                                "2026-13-01T00:00:00Z", "tomorrow"])
def test_timestamps_other_than_iso_8601_are_quarantined(con, tmp_path, ts):
    write_jsonl(tmp_path / "a.jsonl", [request("ok", ["a"]), request("odd", ["a"], ts=ts)])
    (result,) = ingest_logs(con, [str(tmp_path / "a.jsonl")]).files
    assert (result.loaded, result.quarantined) == (1, 1)
    assert con.sql("SELECT reason FROM quarantine").fetchall() == [(f"bad timestamp: {ts}",)]


@pytest.mark.parametrize("field,value", [
    ("k", 10_000_000_000), ("index_size", 18446744073709551615), ("turn", 1e10),
    ("k", 2.5), ("index_size", -1),
])
def test_out_of_range_numbers_quarantine_their_record_not_the_file(con, tmp_path, field, value):
    write_jsonl(tmp_path / "a.jsonl", [request("ok", ["a"]),
                                       request("odd", ["a"], **{field: value})])
    (result,) = ingest_logs(con, [str(tmp_path / "a.jsonl")]).files
    assert (result.read, result.loaded, result.quarantined) == (2, 1, 1)
    (reason,) = con.sql("SELECT reason FROM quarantine").fetchall()[0]
    assert reason.startswith(f"{field} must be")


@pytest.mark.parametrize("rank", [1e10, -1e30, 0])
def test_out_of_range_ranks_quarantine_their_record(con, tmp_path, rank):
    write_jsonl(tmp_path / "a.jsonl", [request("ok", ["a"]),
                                       request("odd", [{"chunk_id": "a", "rank": rank}])])
    (result,) = ingest_logs(con, [str(tmp_path / "a.jsonl")]).files
    assert (result.loaded, result.quarantined) == (1, 1)
    (reason,) = con.sql("SELECT reason FROM quarantine").fetchall()[0]
    assert reason.startswith("retrieved item 1 has")


def test_records_differing_only_in_which_fields_are_null_are_a_conflict(con, tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [request("r1", ["a"], k=7, session_id="1", turn=2)])
    write_jsonl(tmp_path / "b.jsonl", [request("r1", ["a"], index_size=7, k=1, turn=2)])
    summary = ingest_logs(con, [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")])
    assert [f.quarantined for f in summary.files] == [0, 1]


def test_request_survives_when_its_first_file_changes_and_a_copy_remains(con, tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [request("r1", ["a"]), request("r2", ["b"])])
    b = write_jsonl(tmp_path / "b.jsonl", [request("r1", ["a"])])
    ingest_logs(con, [str(a), str(b)])
    write_jsonl(a, [request("r2", ["b"])])
    ingest_logs(con, [str(a), str(b)])
    rows = con.sql("SELECT request_id, source, line FROM requests ORDER BY 1").fetchall()
    assert rows == [("r1", str(b), 1), ("r2", str(a), 1)]
    assert con.sql("SELECT count(*) FROM request_copies").fetchall()[0][0] == 0
    write_jsonl(b, [request("r3", ["c"])])  # the last copy goes: so does r1
    ingest_logs(con, [str(a), str(b)])
    assert [r[0] for r in con.sql("SELECT request_id FROM requests ORDER BY 1").fetchall()] == [
        "r2", "r3"]


def test_a_new_record_size_limit_rereads_the_file(con, tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [request("small", ["a"]),
                                              request("big", ["a"], query="x" * 2000)])
    (first,) = ingest_logs(con, [str(path)], max_record_bytes=1000).files
    assert (first.loaded, first.quarantined) == (1, 1)
    (second,) = ingest_logs(con, [str(path)], max_record_bytes=100_000).files
    assert (second.skipped, second.loaded, second.quarantined) == (False, 2, 0)
    assert con.sql("SELECT count(*) FROM quarantine").fetchall()[0][0] == 0


def test_a_raised_record_size_limit_sticks_to_the_file_until_another_is_given(
        warehouse, run_cli, tmp_path):
    # `run --logs` (which had no --max-record-bytes) read the file again under the default
    # limit and quarantined the record the user had let in, and took it out of requests
    path = write_jsonl(tmp_path / "a.jsonl", [request("small", ["a"]),
                                              request("big", ["a"], query="x" * 2000)])
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    assert run_cli("ingest", "logs", path, "--max-record-bytes", 100_000)[0] == 0
    code, out, _ = run_cli("run", "--logs", path, "--gold", tmp_path / "gold.jsonl",
                           "--gold-version", "v1", "--out", tmp_path / "report")
    assert code == 0 and "unchanged, skipped" in out
    assert "0 file(s) ingested, 1 unchanged" in run_cli("ingest", "logs", path)[1]
    with connect(warehouse, read_only=True) as con:
        assert con.sql("SELECT count(*) FROM request_scores").fetchall() == [(2,)]
    # a limit given is the file's from then on; `run` and `check` take one too
    code, out, _ = run_cli("run", "--logs", path, "--max-record-bytes", 1000,
                           "--out", tmp_path / "report")
    assert code == 0 and "loaded 1, quarantined 1" in out
    assert "0 file(s) ingested, 1 unchanged" in run_cli("ingest", "logs", path)[1]
    interval = ("--start", "2026-11-01", "--end", "2026-11-02")
    assert run_cli("check", "--logs", path, *interval, "--max-record-bytes", 100_000)[0] == 0
    code, out, err = run_cli("check", "--logs", path, *interval, "--max-record-bytes", 1000)
    assert code == 2 and "records parse (1 unreadable" in err
    # the gate reads a file read before with the limit it keeps, as ingest does (a DAG run of
    # the interval again checks before it ingests): 1000 bytes since the run above
    code, out, err = run_cli("check", "--logs", path, *interval)
    assert code == 2 and "records parse (1 unreadable" in err
    assert run_cli("ingest", "logs", path, "--max-record-bytes", 100_000)[0] == 0
    assert run_cli("check", "--logs", path, *interval)[0] == 0


def test_a_deployment_sets_the_record_size_limit_in_the_environment(warehouse, tmp_path,
                                                                     monkeypatch):
    # how the DAGs, which call the api without a limit, get one
    path = write_jsonl(tmp_path / "a.jsonl", [request("small", ["a"]),
                                              request("big", ["a"], query="x" * 2000)])
    monkeypatch.setenv("RECALLWATCH_MAX_RECORD_BYTES", "1000")
    interval = ("2026-11-01", "2026-11-02")
    with pytest.raises(RecallwatchError, match="records parse"):
        api.check_logs(warehouse, [str(path)], *interval)
    assert (api.ingest_logs(warehouse, [str(path)]).quarantined) == 1
    monkeypatch.setenv("RECALLWATCH_MAX_RECORD_BYTES", "100000")
    assert api.check_logs(warehouse, [str(path)], *interval)["passed"]
    assert (api.ingest_logs(warehouse, [str(path)]).loaded) == 2
    for bad in ("8 MiB", "0", "\u00b2"):   # "²" is a digit to str.isdigit, not to int
        monkeypatch.setenv("RECALLWATCH_MAX_RECORD_BYTES", bad)
        with pytest.raises(RecallwatchError, match="RECALLWATCH_MAX_RECORD_BYTES must be a"):
            api.ingest_logs(warehouse, [str(path)])


def test_corrupt_gzip_and_parquet_are_one_clear_error(con, tmp_path):
    good = json.dumps(request("r", ["a"])).encode() * 200
    data = bytearray(gzip.compress(good))
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "bad.jsonl.gz").write_bytes(bytes(data))
    with pytest.raises(RecallwatchError, match="bad.jsonl.gz: cannot read this file"):
        ingest_logs(con, [str(tmp_path / "bad.jsonl.gz")])
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is not parquet PAR1")
    with pytest.raises(RecallwatchError, match="bad.parquet: not a readable Parquet file"):
        ingest_logs(con, [str(tmp_path / "bad.parquet")])
    assert con.sql("SELECT count(*) FROM ingest_files").fetchall()[0][0] == 0


def test_float32_scores_re_deliver_the_same_record(con, tmp_path):
    record = request("r", [{"chunk_id": "a", "rank": 1, "score": 0.83}])
    write_jsonl(tmp_path / "a.jsonl", [record])
    table = pa.Table.from_pylist([record])
    item = pa.struct([("chunk_id", pa.string()), ("rank", pa.int64()), ("score", pa.float32())])
    table = table.set_column(table.schema.get_field_index("retrieved"), "retrieved",
                             table.column("retrieved").cast(pa.list_(item)))
    pq.write_table(table, tmp_path / "b.parquet")
    summary = ingest_logs(con, [str(tmp_path / "a.jsonl"), str(tmp_path / "b.parquet")])
    assert [(f.loaded, f.quarantined) for f in summary.files] == [(1, 0), (1, 0)]


def test_scores_beyond_float_range_re_deliver_without_error(con, tmp_path):
    record = request("r", [{"chunk_id": "a", "score": 1e39}])
    write_jsonl(tmp_path / "a.jsonl", [record, record])
    write_jsonl(tmp_path / "b.jsonl", [record])
    summary = ingest_logs(con, [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")])
    assert [(f.loaded, f.quarantined) for f in summary.files] == [(2, 0), (1, 0)]


@pytest.mark.parametrize("column,values,reason", [
    ("chunk_id", pa.array([7.0]), "retrieved item 1 has a chunk_id that is not a string"),
    ("chunk_id", pa.array([True]), "retrieved item 1 has a chunk_id that is not a string"),
    ("chunk_id", pa.array([b"\xff"], pa.binary()),
     "retrieved item 1 has a chunk_id that is not a string"),
    ("query", pa.array([b"what is it?"], pa.binary()), "query is not a string"),
    ("query", pa.array([42]), "query is not a string"),
    ("k", pa.array([5.5]), "k must be an integer of at least 1, got 5.5"),
])
def test_parquet_values_of_the_wrong_type_are_quarantined_not_stringified(
        con, tmp_path, column, values, reason):
    item = {"chunk_id": values if column == "chunk_id" else pa.array(["7"]),
            "rank": pa.array([1], pa.int32())}
    table = {
        "request_id": pa.array(["r-1"]), "timestamp": pa.array(["2026-11-01T10:00:00Z"]),
        "query": values if column == "query" else pa.array(["q"]),
        "index_version": pa.array(["idx"]),
        "retrieved": pa.ListArray.from_arrays(pa.array([0, 1], pa.int32()),
                                              pa.StructArray.from_arrays(
                                                  list(item.values()), list(item))),
    }
    if column == "k":
        table["k"] = values
    pq.write_table(pa.table(table), tmp_path / "logs.parquet")
    summary = ingest_logs(con, [str(tmp_path / "logs.parquet")])
    assert (summary.loaded, summary.quarantined) == (0, 1)
    assert con.sql("SELECT reason FROM quarantine").fetchall()[0][0].startswith(reason)


def test_parquet_decimal_columns_load_as_the_numbers_they_hold(con, tmp_path):
    # Spark and database exports write NUMBER columns as decimals: decimal(38,0) is a whole
    # number, an ID and a k like any integer; a fractional decimal is no ID and no k
    from decimal import Decimal

    item = pa.struct([("chunk_id", pa.decimal128(38, 0)), ("rank", pa.decimal128(10, 0)),
                      ("score", pa.decimal128(6, 3))])
    pq.write_table(pa.table({
        "request_id": pa.array([Decimal(1001), Decimal(1002), Decimal(1003)],
                               pa.decimal128(38, 0)),
        "timestamp": ["2026-11-01T10:00:00Z"] * 3,
        "query": ["q"] * 3, "index_version": ["i"] * 3,
        "k": pa.array([Decimal("2"), Decimal("2.00"), Decimal("2.50")], pa.decimal128(10, 2)),
        "index_size": pa.array([Decimal(5000)] * 3, pa.decimal128(38, 0)),
        "retrieved": pa.array([[{"chunk_id": Decimal(7), "rank": Decimal(1),
                                 "score": Decimal("0.875")},
                                {"chunk_id": Decimal(8), "rank": Decimal(2),
                                 "score": Decimal("0.5")}]] * 3, pa.list_(item)),
    }), tmp_path / "logs.parquet")
    summary = ingest_logs(con, [str(tmp_path / "logs.parquet")])
    assert (summary.loaded, summary.quarantined) == (2, 1)
    assert con.sql("SELECT request_id, k, index_size, [(x.chunk_id, x.rank, x.score) FOR x IN "
                   "retrieved] FROM requests ORDER BY 1").fetchall() == [
        ("1001", 2, 5000, [("7", 1, 0.875), ("8", 2, 0.5)]),
        ("1002", 2, 5000, [("7", 1, 0.875), ("8", 2, 0.5)])]
    assert con.sql("SELECT reason FROM quarantine").fetchall()[0][0].startswith(
        "k must be an integer of at least 1, got 2.5")
    pq.write_table(pa.table({
        "request_id": ["r-1"], "timestamp": ["2026-11-01T10:00:00Z"], "query": ["q"],
        "index_version": ["i"],
        "retrieved": pa.array([[{"chunk_id": Decimal("7.5")}]],
                              pa.list_(pa.struct([("chunk_id", pa.decimal128(4, 1))])))}),
        tmp_path / "fraction.parquet")
    summary = ingest_logs(con, [str(tmp_path / "fraction.parquet")])
    assert (summary.loaded, summary.quarantined) == (0, 1)


@pytest.mark.parametrize("extra", [None, "file_row_number"])
def test_a_quarantined_parquet_row_shows_the_files_own_columns(con, tmp_path, extra):
    # file_row_number is the name DuckDB gives a Parquet row's number: it is never shown as
    # data, and a file exported with a column of that name (one recallwatch does not read)
    # loads all the same
    item = pa.struct([("chunk_id", pa.string())])
    columns = {"request_id": ["r-1", "r-2"],
               "timestamp": ["2026-11-01T10:00:00Z", "not a time"],
               "query": ["q", "q"], "index_version": ["i", "i"],
               "retrieved": pa.array([[{"chunk_id": "a"}]] * 2, pa.list_(item))}
    if extra:
        columns[extra] = [41, 42]
    pq.write_table(pa.table(columns), tmp_path / "logs.parquet")
    summary = ingest_logs(con, [str(tmp_path / "logs.parquet")])
    assert (summary.loaded, summary.quarantined) == (1, 1)
    ((line, raw, reason),) = con.sql("SELECT line, raw, reason FROM quarantine").fetchall()
    assert (line, reason) == (2, "bad timestamp: not a time")
    record = json.loads(raw)
    assert record["request_id"] == "r-2" and "file_row_number" not in record


def test_a_quarantined_parquet_row_shows_names_differing_only_in_case_as_the_file_has_them(
        con, tmp_path):
    # DuckDB reads a column, a struct field or an item's field whose name differs from an
    # earlier one's only in case as name_1: the record shown was one the file never held
    item = pa.struct([("chunk_id", pa.string()), ("Rank", pa.int64()), ("rank", pa.int64())])
    tags = pa.StructArray.from_arrays([pa.array(["A"]), pa.array(["b"])],
                                      names=["Tenant", "tenant"])
    pq.write_table(pa.table({
        "request_id": ["r-1"], "timestamp": ["not a time"], "query": ["q"],
        "index_version": ["i"], "K": [3], "k": [2], "tags": tags,
        "retrieved": pa.array([[{"chunk_id": "a", "Rank": 9, "rank": 1}]], pa.list_(item))}),
        tmp_path / "logs.parquet")
    summary = ingest_logs(con, [str(tmp_path / "logs.parquet")])
    assert (summary.loaded, summary.quarantined) == (0, 1)
    ((raw, reason),) = con.sql("SELECT raw, reason FROM quarantine").fetchall()
    assert reason == "bad timestamp: not a time"
    assert json.loads(raw) == {
        "request_id": "r-1", "timestamp": "not a time", "query": "q", "index_version": "i",
        "K": 3, "k": 2, "tags": {"Tenant": "A", "tenant": "b"},
        "retrieved": [{"chunk_id": "a", "Rank": 9, "rank": 1}]}
    assert list(json.loads(raw)) == ["request_id", "timestamp", "query", "index_version", "K",
                                     "k", "tags", "retrieved"]


@pytest.mark.parametrize("extra", ["r", "R", "src", "c1", "line", "raw", "p", "e0"])
def test_a_parquet_column_named_as_the_reader_names_its_parts_is_loaded_and_shown(
        con, tmp_path, extra):
    # a column `r` hid the row of the reader aliased r: every Parquet file holding one failed
    # with an internal error, clean or not
    columns = {"request_id": ["r-1", "r-2"],
               "timestamp": ["2026-11-01T10:00:00Z", "not a time"],
               "query": ["q", "q"], "index_version": ["i", "i"],
               "retrieved": [[{"chunk_id": "a"}]] * 2, extra: [41, 42]}
    pq.write_table(pa.table(columns), tmp_path / "logs.parquet")
    summary = ingest_logs(con, [str(tmp_path / "logs.parquet")])
    assert (summary.loaded, summary.quarantined) == (1, 1)
    ((line, raw),) = con.sql("SELECT line, raw FROM quarantine").fetchall()
    assert line == 2
    assert json.loads(raw) == {**{k: v[1] for k, v in columns.items() if k != "retrieved"},
                               "retrieved": [{"chunk_id": "a"}]}


def test_whole_floats_load_as_integers_in_json_lines_as_in_parquet(con, tmp_path):
    # pandas writes an integer column with a missing value as 4.0, in to_json as in to_parquet
    record = request("r-1", ["a", "b", "c", "d", "e"], k=4.0, index_size=182340.0, turn=2.0)
    write_jsonl(tmp_path / "logs.jsonl", [record])
    pq.write_table(pa.Table.from_pylist([record]), tmp_path / "logs.parquet")
    summary = ingest_logs(con, [str(tmp_path / "logs.jsonl"), str(tmp_path / "logs.parquet")])
    assert [(f.loaded, f.quarantined) for f in summary.files] == [(1, 0), (1, 0)]
    assert con.sql("SELECT k, index_size, turn FROM requests").fetchall() == [(4, 182340, 2)]


BIG = 123456789012345678901234   # an integer beyond 64 bits


@pytest.mark.parametrize("way", ["json reader", "line by line"])
def test_an_integer_id_beyond_64_bits_is_its_digits_as_in_the_gold_set(con, tmp_path, way):
    # the gold set read it as its digits while a log quarantined it as "not a string": the
    # request of such a chunk could never be scored
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", [BIG, 7])])
    steps = request("r-2", [], retrieval_steps=[[{"chunk_id": BIG}], [{"chunk_id": 7}]])
    del steps["retrieved"]
    records = [request(BIG, [BIG, 7, "x"], session_id=-BIG), steps]
    if way == "line by line":
        records.insert(1, "")   # a blank line: the reader cannot number the lines
    write_jsonl(tmp_path / "logs.jsonl", records)
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    summary = ingest_logs(con, [str(tmp_path / "logs.jsonl")])
    assert (summary.loaded, summary.quarantined) == (2, 0)
    assert con.sql("SELECT request_id, session_id FROM requests ORDER BY 1").fetchall() == [
        (str(BIG), str(-BIG)), ("r-2", None)]
    score(con)
    assert con.sql("SELECT request_id, recall FROM request_scores ORDER BY 1").fetchall() == [
        (str(BIG), 1.0), ("r-2", 1.0)]


def test_records_ended_by_a_carriage_return_alone_are_one_line_that_says_so(con, tmp_path):
    # read as one line of invalid JSON, with nothing to tell why
    lines = [json.dumps(request(f"r-{i}", ["a"])) for i in range(3)]
    (tmp_path / "logs.jsonl").write_text(f"{lines[0]}\r{lines[1]}\r\n{lines[2]}\n",
                                         newline="")
    summary = ingest_logs(con, [str(tmp_path / "logs.jsonl")])
    assert (summary.read, summary.loaded, summary.quarantined) == (2, 1, 1)
    assert con.sql("SELECT line, reason FROM quarantine").fetchall() == [(1, BARE_CR)]


def test_a_duplicate_tag_key_is_quarantined_not_a_silent_loss_of_every_tag(con, tmp_path):
    write_jsonl(tmp_path / "logs.jsonl", [
        '{"request_id": "r-1", "timestamp": "2026-11-01T10:00:00Z", "query": "q", '
        '"index_version": "i", "retrieved": [], "tags": {"tenant": "a", "tenant": "b"}}',
        request("r-2", [], tags={"tenant": "a", "n": 5, "nested": {"x": 1}})])
    summary = ingest_logs(con, [str(tmp_path / "logs.jsonl")])
    assert (summary.loaded, summary.quarantined) == (1, 1)
    assert con.sql("SELECT line, reason FROM quarantine").fetchall() == [
        (1, "tags has a duplicate key: tenant")]
    tags = con.sql("SELECT tags FROM requests").fetchall()[0][0]
    assert tags == {"tenant": "a", "n": "5", "nested": '{"x":1}'}


@pytest.mark.parametrize("order", ["f1 first", "f2 first"])
def test_a_quarantined_conflicting_copy_loads_once_the_copy_it_conflicted_with_is_gone(
        con, tmp_path, order):
    f1, f2 = tmp_path / "f1.jsonl", tmp_path / "f2.jsonl"
    write_jsonl(f1, [request("r1", ["a"]), request("r3", ["a"])])
    write_jsonl(f2, [request("r3", ["b"])])
    ingest_logs(con, [str(f1)])
    ingest_logs(con, [str(f2)])
    assert con.sql("SELECT reason FROM quarantine").fetchall()[0][0].startswith(
        "conflicts with request_id r3 already loaded from")
    write_jsonl(f1, [request("r1", ["a"])])   # f1 no longer delivers r3
    files = [str(f1), str(f2)] if order == "f1 first" else [str(f2), str(f1)]
    # expand_paths keeps the given order of explicit files
    summary = ingest_logs(con, files)
    assert con.sql("SELECT request_id, source FROM requests ORDER BY 1").fetchall() == [
        ("r1", str(f1.resolve())), ("r3", str(f2.resolve()))]
    assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(0,)]
    assert summary.quarantined == 0
    before = snapshot(con)
    ingest_logs(con, files)
    assert snapshot(con) == before


def test_a_quarantined_copy_in_a_file_outside_the_call_is_judged_again_in_that_call(
        con, tmp_path):
    # a scheduled run gives one day's file: the corrected f1 alone. f2, which holds the copy
    # of r3 quarantined against f1's, is read again in the same call, so r3 is never lost
    f1, f2 = tmp_path / "f1.jsonl", tmp_path / "f2.jsonl"
    write_jsonl(f1, [request("r1", ["a"]), request("r3", ["a"])])
    write_jsonl(f2, [request("r2", ["b"]), request("r3", ["b"], ts="2026-11-02T12:00:00Z")])
    ingest_logs(con, [str(f1)])
    ingest_logs(con, [str(f2)])
    assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(1,)]
    write_jsonl(f1, [request("r1", ["a"])])   # f1 no longer delivers r3

    summary = ingest_logs(con, [str(f1)])

    assert [(Path(f.source).name, f.read, f.loaded, f.quarantined) for f in summary.files] == [
        ("f1.jsonl", 1, 1, 0), ("f2.jsonl", 2, 2, 0)]
    assert con.sql("SELECT request_id, parse_filename(source) FROM requests ORDER BY 1"
                   ).fetchall() == [("r1", "f1.jsonl"), ("r2", "f2.jsonl"), ("r3", "f2.jsonl")]
    assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(0,)]
    before = snapshot(con)
    again = ingest_logs(con, [str(f1)])
    assert snapshot(con) == before and all(f.skipped for f in again.files)


def test_a_file_outside_the_call_read_with_other_options_waits_for_its_next_ingest(
        con, tmp_path):
    # f2 was read with another size limit than this call gives: reading it with this call's
    # would change which of its records load, so it is only marked, and its next ingest (with
    # its own options) reads it
    f1, f2 = tmp_path / "f1.jsonl", tmp_path / "f2.jsonl"
    write_jsonl(f1, [request("r3", ["a"])])
    write_jsonl(f2, [request("r3", ["b"])])
    ingest_logs(con, [str(f1)], max_record_bytes=1 << 20)
    ingest_logs(con, [str(f2)], max_record_bytes=2 << 20)
    write_jsonl(f1, [request("r1", ["a"])])
    assert [Path(f.source).name for f in ingest_logs(con, [str(f1)], max_record_bytes=1 << 20)
            .files] == ["f1.jsonl"]
    assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(1,)]
    ingest_logs(con, [str(f2)], max_record_bytes=2 << 20)
    assert con.sql("SELECT request_id, parse_filename(source) FROM requests ORDER BY 1"
                   ).fetchall() == [("r1", "f1.jsonl"), ("r3", "f2.jsonl")]
    assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(0,)]


def test_a_conflicting_copy_loads_once_the_loaded_request_became_identical_to_it(
        con, tmp_path):
    f1, f2 = tmp_path / "f1.jsonl", tmp_path / "f2.jsonl"
    write_jsonl(f1, [request("r1", ["a"])])
    write_jsonl(f2, [request("r2", ["c"]), request("r1", ["b"])])
    ingest_logs(con, [str(f1), str(f2)])
    assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(1,)]
    write_jsonl(f1, [request("r1", ["b"])])   # same line, now what f2 holds
    ingest_logs(con, [str(f1), str(f2)])
    assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(0,)]
    assert con.sql("SELECT request_id, list_sort(chunk_ids) FROM ranked_requests ORDER BY 1"
                   ).fetchall() == [("r1", ["b"]), ("r2", ["c"])]
    again = ingest_logs(con, [str(f1), str(f2)])
    assert all(f.skipped for f in again.files)


def test_files_that_conflict_with_each_other_are_judged_again_at_most_once(con, tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_jsonl(a, [request("r", ["a"]), request("x", ["a"])])
    write_jsonl(b, [request("s", ["b"]), request("r", ["b"])])
    ingest_logs(con, [str(a)])
    ingest_logs(con, [str(b)])
    write_jsonl(a, [request("r", ["a"]), request("s", ["a"])])   # now a conflicts with b too
    summary = ingest_logs(con, [str(a), str(b)])
    for f in summary.files:
        assert f.read == f.loaded + f.quarantined
    # each request stays with the file that delivered it first; each other copy is held back
    loaded = con.sql("SELECT request_id, parse_filename(source) FROM requests ORDER BY 1")
    assert loaded.fetchall() == [("r", "a.jsonl"), ("s", "b.jsonl")]
    held = con.sql("SELECT parse_filename(source), line FROM quarantine ORDER BY 1")
    assert held.fetchall() == [("a.jsonl", 2), ("b.jsonl", 2)]
    # and it settles: the next call finds both files unchanged
    again = ingest_logs(con, [str(a), str(b)])
    assert all(f.skipped for f in again.files)


def test_null_steps_far_offsets_and_blank_gold_ids_are_decided_not_passed_through(con,
                                                                                   tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"], question="Which fee?")])
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    write_jsonl(tmp_path / "logs.jsonl", [
        # a null step is not a retrieval step
        request("r-1", [], retrieved=None, retrieval_steps=[[{"chunk_id": "a"}], None]),
        # no time zone is 25 hours from UTC
        request("r-2", ["a"], ts="2026-11-01T10:00:00+25:00"),
        # a blank gold_id names no golden: the request joins by its query
        request("r-3", ["a"], gold_id="", query="which  FEE?"),
        request("r-4", ["a"], ts="2026-11-01T10:00:00+14:00"),
    ])
    item = pa.struct([("chunk_id", pa.string())])
    pq.write_table(pa.table({
        "request_id": ["p-1"], "timestamp": ["2026-11-01T10:00:00Z"], "query": ["q"],
        "index_version": ["i"],
        "retrieval_steps": pa.array([[[{"chunk_id": "a"}], None]], pa.list_(pa.list_(item)))}),
        tmp_path / "logs.parquet")
    ingest_logs(con, [str(tmp_path / "logs.jsonl"), str(tmp_path / "logs.parquet")])
    reasons = con.sql("SELECT line, reason FROM quarantine ORDER BY source, line").fetchall()
    assert reasons == [(1, "retrieval_steps is not a list of lists"),
                       (2, "bad timestamp: 2026-11-01T10:00:00+25:00"),
                       (1, "retrieval_steps is not a list of lists")]
    score(con)
    assert con.sql("SELECT request_id, gold_id, status FROM request_scores ORDER BY 1"
                   ).fetchall() == [("r-3", "g-1", "scored"), ("r-4", "g-1", "scored")]


def test_parquet_from_pandas_loads_real_timestamps_and_whole_float_numbers(con, tmp_path):
    import datetime as dt

    item = pa.struct([("chunk_id", pa.string())])
    pq.write_table(pa.table({
        "request_id": ["r-1", "r-2", "r-3"],
        # pandas datetime64 columns: with a zone, without one (UTC), and a date
        "timestamp": pa.array([dt.datetime(2026, 11, 1, 10, tzinfo=dt.UTC),
                               dt.datetime(2026, 11, 1, 11), dt.datetime(2026, 11, 2)],
                              pa.timestamp("ns", tz="UTC")),
        "query": ["q", "q", "q"], "index_version": ["i", "i", "i"],
        # an integer column with a missing value, as pandas writes it
        "k": pa.array([5.0, None, 3.0]),
        "retrieved": pa.array([[{"chunk_id": "a"}]] * 3, pa.list_(item)),
    }), tmp_path / "logs.parquet")
    summary = ingest_logs(con, [str(tmp_path / "logs.parquet")])
    assert (summary.loaded, summary.quarantined) == (3, 0)
    assert con.sql("SELECT request_id, timestamp::VARCHAR, k FROM requests ORDER BY 1"
                   ).fetchall() == [("r-1", "2026-11-01 10:00:00", 5),
                                    ("r-2", "2026-11-01 11:00:00", 1),
                                    ("r-3", "2026-11-02 00:00:00", 3)]
    pq.write_table(pa.table({
        "request_id": ["d-1"], "timestamp": pa.array([dt.date(2026, 11, 3)]),
        "query": ["q"], "index_version": ["i"],
        "retrieved": pa.array([[{"chunk_id": "a"}]], pa.list_(item))}), tmp_path / "d.parquet")
    assert ingest_logs(con, [str(tmp_path / "d.parquet")]).loaded == 1


@pytest.mark.parametrize("ts", ["2026-11-01t10:00:00z", "2026-11-01T10:00:00z",
                                "2026-11-01t10:00:00+01:00", "2026-11-01 09:00:00z"])
def test_lower_case_t_and_z_are_read_as_rfc_3339_allows(con, tmp_path, ts):
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"], ts=ts)])
    assert ingest_logs(con, [str(tmp_path / "logs.jsonl")]).loaded == 1
    expected = "2026-11-01 09:00:00" if ts.endswith(("+01:00", " 09:00:00z")) \
        else "2026-11-01 10:00:00"
    assert con.sql("SELECT timestamp::VARCHAR FROM requests").fetchall() == [(expected,)]


@pytest.mark.parametrize("offset,loads", [("+18:00", True), ("-17:59", True),
                                          ("+18:30", False), ("+25:00", False)])
def test_offsets_reach_at_most_18_hours(con, tmp_path, offset, loads):
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"], ts=f"2026-11-01T10:00:00{offset}")])
    assert ingest_logs(con, [str(tmp_path / "logs.jsonl")]).loaded == int(loads)


def test_a_byte_order_mark_on_an_oversized_first_line_keeps_lines_and_counts(con, tmp_path):
    from pipeline.ingest.files import read_json_lines

    path = tmp_path / "logs.jsonl"
    long_line = json.dumps(request("r-1", ["a" * 200])).encode()
    fits = json.dumps(request("r-2", ["b"])).encode()
    path.write_bytes(b"\xef\xbb\xbf" + long_line + b"\n" + fits + b"\n")
    lines = list(read_json_lines(path, len(long_line) - 10))
    assert [(n, text is None) for n, text, _, _ in lines] == [(1, True), (2, False)]
    assert lines[0][2].startswith(f"record too large: {len(long_line) + 1} bytes")
    # a first line that just fits is not cut by the mark's three bytes
    lines = list(read_json_lines(path, len(long_line) + 1))
    assert [(n, text is not None) for n, text, _, _ in lines] == [(1, True), (2, True)]


# Most JSON Lines files are parsed once by DuckDB's JSON reader (logs._stage_records); the
# line way (every line's text parsed by sql/stage_logs_jsonl.sql) is the reference for what
# each record becomes.

def _ingest_jsonl(path, *, line_way: bool) -> tuple:
    """Every table an ingest of one JSONL file writes, read back in order, and its counts;
    staged through DuckDB's JSON reader (which must take the file) or the line way."""
    from unittest import mock

    from pipeline.ingest import logs
    from pipeline.sources import ReadOptions

    took = []

    def records_way(*args):
        staged = None if line_way else stage_records(*args)
        took.append(staged is not None)
        return staged

    stage_records = logs._stage_records
    con = connect(":memory:")
    with mock.patch.object(logs, "_stage_records", records_way):
        # named native: a file of odd records may show none of the keys detection looks for
        (result,) = ingest_logs(con, [str(path)], options=ReadOptions(fmt="native")).files
    assert took == [not line_way], "the file did not take the way asked for"
    tables = {name: con.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall()
              for name in ("requests", "quarantine", "request_copies")}
    return (result.read, result.loaded, result.quarantined), tables


def test_the_json_reader_stages_the_bad_corpus_as_the_line_way_does(tmp_path):
    # the corpus less its line over the size limit (which sends a file the line way)
    records = GOOD[:3] + [r for r, why in bad_jsonl_corpus() if why != "record too large"]
    path = write_jsonl(tmp_path / "part.jsonl", records + GOOD[3:])
    by_reader = _ingest_jsonl(path, line_way=False)
    assert by_reader == _ingest_jsonl(path, line_way=True)
    counts, tables = by_reader
    assert counts == (len(records) + 2, len(GOOD), len(records) - 3)
    assert all(raw for _, _, _, raw, _, _ in tables["quarantine"])


def test_the_json_reader_stages_any_record_as_the_line_way_does(tmp_path):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    def field(*values):   # absent, null or one of these
        return st.sampled_from([None, *values])

    item = st.one_of(
        st.fixed_dictionaries({}, optional={
            "chunk_id": field("a", "b", 7, 7.0, "", True, {"x": 1}, "caf\u00e9"),
            "rank": field(1, 2, 1.5, -1, 0, "1", 2**40, 1e300),
            "score": field(0.5, 1, "x", [0.1]),
            "text": field("t", 5, "q\"\\z"),
            "other": field(1)}),
        st.sampled_from([5, None, "a", [1], []]))
    record = st.fixed_dictionaries({}, optional={
        "request_id": field("r-1", "r-2", 7, 7.5, True, "", " ", {"a": 1}, 2**64, "caf\u00e9"),
        "timestamp": field("2026-11-01T10:00:00Z", "2026-11-01 11:00:00+25:00", "yesterday",
                           1730000000, "2026-11-02T23:59:60Z", "2026-11-01T10:00:00.5+05:30"),
        "query": field("q", "", 5, "caf\u00e9 \"x\""),
        "gold_id": field("g-1", "", 3, 3.0),
        "index_version": field("idx-1", "", 2),
        "k": field(0, 3, -1, 2.0, 2.5, "3", 2**63),
        "index_size": field(10, -5, 1e30, "big"),
        "turn": field(1, -2, 0.5),
        "session_id": field("s", 4, False),
        "tags": field({"a": "1"}, {"a": 1}, ["x"], "t", {"a": {"b": 1}}),
        "retrieved": st.one_of(field("x", {"chunk_id": "a"}),
                               st.lists(item, max_size=4)),
        "retrieval_steps": st.one_of(field("x", [None]), st.lists(st.lists(item, max_size=2),
                                                                  max_size=2)),
        "response": field("an answer"),
    })
    raw_lines = st.sampled_from([
        b'{"request_id": "twice", "request_id": "again", "timestamp": "2026-11-01T10:00:00Z",'
        b' "query": "q", "index_version": "i", "retrieved": [{"chunk_id": "a"}]}',
        b'{"request_id": "tags", "timestamp": "2026-11-01T10:00:00Z", "query": "q", '
        b'"index_version": "i", "retrieved": [], "tags": {"a": "1", "a": "2"}}',
        b'{"request_id": "comma", "timestamp": "2026-11-01T10:00:00Z", "query": "q", '
        b'"index_version": "i", "retrieved": [{"chunk_id": "a",}],}',
        b"not json", b"[1]", b'"s"', b"null", b"{}", b'{"request_id": "x"} {}',
        b'{"request_id": "caf\xe9"}', b'{"request_id": "a\x01b"}',
        b'{"request_id": "big", "timestamp": "2026-11-01T10:00:00Z", "query": "q", '
        b'"index_version": "i", "retrieved": [{"chunk_id": 123456789012345678901234567890}]}'])
    line = st.one_of(record.map(lambda r: json.dumps(r).encode()), raw_lines)

    @settings(max_examples=120, deadline=None)
    @given(st.lists(line, min_size=1, max_size=6), st.booleans(), st.booleans())
    def check(lines, bom, gz):
        data = (b"\xef\xbb\xbf" if bom else b"") + b"\n".join(lines) + b"\n"
        path = tmp_path / ("logs.jsonl.gz" if gz else "logs.jsonl")
        path.write_bytes(gzip.compress(data) if gz else data)
        assert _ingest_jsonl(path, line_way=False) == _ingest_jsonl(path, line_way=True)

    check()


def test_the_json_reader_numbers_the_lines_of_a_large_file_as_they_are(con, tmp_path):
    # large enough for DuckDB to read it in many parts on every core
    n, bad = 200_000, {1, 77_777, 150_001, 200_000}
    with open(tmp_path / "big.jsonl", "w", encoding="utf-8") as fh:
        for number in range(1, n + 1):
            fh.write("{not json\n" if number in bad else json.dumps(
                request(f"r-{number}", [f"c-{number % 50}", "a"])) + "\n")
    (result,) = ingest_logs(con, [str(tmp_path / "big.jsonl")]).files
    assert (result.read, result.loaded, result.quarantined) == (n, n - len(bad), len(bad))
    assert {r[0] for r in con.sql("SELECT line FROM quarantine").fetchall()} == bad
    wrong = con.sql("SELECT count(*) FROM requests WHERE request_id <> 'r-' || line").fetchall()
    assert wrong == [(0,)]


def test_a_file_of_mostly_agentic_records_goes_the_line_way_before_a_whole_read(
        con, tmp_path, monkeypatch):
    from pipeline.ingest import logs
    from pipeline.warehouse import run_script

    scripts = []

    def recording(con, name, params=None, **kw):
        scripts.append(name)
        return run_script(con, name, params, **kw)

    monkeypatch.setattr(logs, "run_script", recording)
    monkeypatch.setattr(logs, "MAX_EXACT", 10)
    steps = [{**request(f"s-{i}", []), "retrieved": None,
              "retrieval_steps": [[{"chunk_id": "a"}], [{"chunk_id": "b"}]]} for i in range(40)]
    path = write_jsonl(tmp_path / "agentic.jsonl", steps + [request("plain", ["a"])])
    (result,) = ingest_logs(con, [str(path)]).files
    assert (result.read, result.loaded, result.quarantined) == (41, 41, 0)
    assert "sample_jsonl_records" in scripts and "read_jsonl_records" not in scripts
    assert "read_jsonl_lines" in scripts
    assert con.sql("SELECT n_steps, chunk_ids FROM ranked_requests WHERE request_id = 's-7'"
                   ).fetchall() == [(2, ["a", "b"])]


def test_a_fixed_size_list_of_chunks_is_a_list_as_in_json_lines(con, tmp_path):
    # polars writes a column of pl.Array (and pyarrow of fixed_size_list) as a Parquet list
    # whose Arrow schema says fixed_size_list: its chunks are the record's chunks
    records = [request("r-1", [{"chunk_id": "a", "rank": 1}, {"chunk_id": "b", "rank": 2}]),
               {**request("r-2", []), "retrieved": None,
                "retrieval_steps": [[{"chunk_id": "c", "rank": 1}, {"chunk_id": "d", "rank": 2}]]}]
    item = pa.struct([("chunk_id", pa.string()), ("rank", pa.int64())])
    pq.write_table(pa.table({
        **{key: [r[key] for r in records]
           for key in ("request_id", "timestamp", "query", "index_version")},
        "retrieved": pa.array([r["retrieved"] for r in records], pa.list_(item, 2)),
        "retrieval_steps": pa.array([r.get("retrieval_steps") for r in records],
                                    pa.list_(pa.list_(item, 2))),
    }), tmp_path / "logs.parquet")
    write_jsonl(tmp_path / "logs.jsonl", records)
    summary = ingest_logs(con, [str(tmp_path / "logs.parquet")])
    assert (summary.loaded, summary.quarantined) == (2, 0)
    stored = "SELECT request_id, k, n_steps, retrieved FROM requests ORDER BY 1"
    from_parquet = con.sql(stored).fetchall()
    con.execute("DELETE FROM requests")
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])
    assert from_parquet == con.sql(stored).fetchall()


def test_a_uuid_id_is_its_text_as_in_json_lines(con, tmp_path):
    # DuckDB's COPY ... TO (and pyarrow's pa.uuid()) write a UUID column with Parquet's UUID
    # type: the ID is its canonical text, as a JSON Lines log writes it
    import uuid

    ids = [uuid.UUID(int=i * 0x1234567890ABCDEF) for i in (1, 2)]
    pq.write_table(pa.table({
        "request_id": pa.array([u.bytes for u in ids], pa.uuid()),
        "timestamp": ["2026-11-01T10:00:00Z"] * 2, "query": ["q"] * 2,
        "index_version": ["i"] * 2,
        "session_id": pa.array([ids[0].bytes, None], pa.uuid()),
        "retrieved": [[{"chunk_id": "a"}]] * 2,
    }), tmp_path / "logs.parquet")
    summary = ingest_logs(con, [str(tmp_path / "logs.parquet")])
    assert (summary.loaded, summary.quarantined) == (2, 0)
    assert con.sql("SELECT request_id, session_id FROM requests ORDER BY 1").fetchall() == [
        (str(ids[0]), str(ids[0])), (str(ids[1]), None)]


@pytest.mark.parametrize("damage", ["not utf-8", "corrupt page"])
def test_a_parquet_file_whose_rows_cannot_be_read_is_one_clear_error(con, tmp_path, damage):
    # its footer reads, so staging succeeds; its data does not: the file is named, its
    # transaction rolled back, and the files before it stay loaded
    write_jsonl(tmp_path / "a.jsonl", [request("before", ["a"])])
    rows = 2_000
    queries = (pa.array([b"ok"] * (rows - 1) + [b"caf\xe9"], pa.binary()).view(pa.string())
               if damage == "not utf-8" else [f"query {i:05d} " * 8 for i in range(rows)])
    pq.write_table(pa.table({
        "request_id": [f"r-{i}" for i in range(rows)],
        "timestamp": ["2026-11-01T10:00:00Z"] * rows, "query": queries,
        "index_version": ["i"] * rows, "retrieved": [[{"chunk_id": "a"}]] * rows,
    }), tmp_path / "b.parquet", compression="none", use_dictionary=False)
    if damage == "corrupt page":
        data = bytearray((tmp_path / "b.parquet").read_bytes())
        for at in range(len(data) // 4, len(data) // 4 + 64):
            data[at] ^= 0x5A
        (tmp_path / "b.parquet").write_bytes(bytes(data))
    with pytest.raises(RecallwatchError, match="b.parquet: cannot read this file"):
        ingest_logs(con, [str(tmp_path / "a.jsonl"), str(tmp_path / "b.parquet")])
    assert con.sql("SELECT source LIKE '%a.jsonl' FROM ingest_files").fetchall() == [(True,)]
    assert con.sql("SELECT request_id FROM requests").fetchall() == [("before",)]
    assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(0,)]


def test_columns_whose_names_differ_only_in_case_are_read_by_their_own_names(con, tmp_path):
    # DuckDB matches names without case and renames a later clash (k_1): a field is read from
    # the column of its own name, as JSON Lines reads its key, never from another's
    records = [request("r-1", [{"RANK": "first", "rank": 2, "chunk_id": "b"},
                               {"RANK": "second", "rank": 1, "chunk_id": "a"}],
                       Query="What Is It?", K="five", k=1)]
    records = [{"Query": r.pop("Query"), "K": r.pop("K"), **r} for r in records]
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "logs.parquet")
    write_jsonl(tmp_path / "logs.jsonl", records)
    summary = ingest_logs(con, [str(tmp_path / "logs.parquet")])
    assert (summary.loaded, summary.quarantined) == (1, 0)
    stored = "SELECT * EXCLUDE (source, line) FROM requests"
    from_parquet = con.sql(stored).fetchall()
    assert con.sql("SELECT query, k, chunk_ids FROM ranked_requests").fetchall() == [
        ("what is the minimum balance?", 1, ["a", "b"])]
    con.execute("DELETE FROM requests")
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])
    assert from_parquet == con.sql(stored).fetchall()
