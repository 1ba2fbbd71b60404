"""Index manifests: content_hash defaults to the hash of the text, bad rows go to quarantine,
an unreadable manifest is one clear error, and a version holds one snapshot whichever file it
came from."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.errors import RecallwatchError
from pipeline.ingest import ingest_gold, ingest_index, ingest_logs
from pipeline.score import score
from tests.conftest import golden, request, write_jsonl


def test_index_manifest_hashes_text_and_quarantines_bad_rows(con, tmp_path):
    pq.write_table(pa.table({"chunk_id": ["a", "b", None, "b"],
                             "text": ["A", "B", "C", "other"]}), tmp_path / "m.parquet")
    result = ingest_index(con, str(tmp_path / "m.parquet"), "idx-1")
    assert (result.read, result.loaded, result.quarantined) == (4, 2, 2)
    import hashlib
    # the first copy of b stands; the later one with other content is quarantined, as a gold
    # set's conflicting duplicate is
    assert con.sql("SELECT chunk_id, content_hash, text FROM index_chunks ORDER BY 1"
                   ).fetchall() == [("a", hashlib.sha256(b"A").hexdigest(), "A"),
                                    ("b", hashlib.sha256(b"B").hexdigest(), "B")]
    assert con.sql("SELECT line, reason FROM quarantine ORDER BY line").fetchall() == [
        (3, "missing or null required field: chunk_id"),
        (4, "conflicting duplicate chunk_id b (first at line 2)")]


def test_a_row_refused_for_another_reason_conflicts_with_no_copy(con, tmp_path):
    # one export of two index versions whose chunk c1 changed between them: the row of the
    # other version took the valid row of c1 with it, and c1 was reported not in the index
    write_jsonl(tmp_path / "m.jsonl", [
        {"index_version": "idx-1", "chunk_id": "c1", "text": "old text"},
        {"index_version": "idx-1", "chunk_id": "x", "text": "other"},
        {"index_version": "idx-2", "chunk_id": "c1", "text": "new text"},
        {"index_version": "idx-1", "chunk_id": "x", "content_hash": "f" * 64, "text": ""}])
    result = ingest_index(con, str(tmp_path / "m.jsonl"), "idx-1")
    assert (result.loaded, result.quarantined) == (2, 2)
    assert con.sql("SELECT chunk_id, text FROM index_chunks ORDER BY 1").fetchall() == [
        ("c1", "old text"), ("x", "other")]
    assert con.sql("SELECT line, reason FROM quarantine ORDER BY line").fetchall() == [
        (3, "index_version idx-2 differs from --version idx-1"),
        (4, "conflicting duplicate chunk_id x (first at line 2)")]


def test_unreadable_index_manifest_is_one_clear_error(con, tmp_path):
    (tmp_path / "m.parquet").write_bytes(b"PAR1 not parquet PAR1")
    with pytest.raises(RecallwatchError, match="cannot read the index manifest"):
        ingest_index(con, str(tmp_path / "m.parquet"), "idx-1")
    (tmp_path / "m.jsonl").write_text('{"id": "a", "text": "A"}\n')
    with pytest.raises(RecallwatchError, match="needs a chunk_id column"):
        ingest_index(con, str(tmp_path / "m.jsonl"), "idx-1")
    assert con.sql("SELECT count(*) FROM index_chunks").fetchall()[0][0] == 0


def test_bad_lines_of_a_json_lines_manifest_are_quarantined_and_the_rest_loads(con, tmp_path):
    (tmp_path / "m.jsonl").write_bytes(
        b'{"chunk_id": "a", "text": "A"}\n{broken\n["a", "b"]\n\n'
        b'{"chunk_id": "caf\xe9", "text": "C"}\n{"chunk_id": "b", "text": "B"}\n'
        b'{"chunk_id": "d", "text": "D"}\r{"chunk_id": "e", "text": "E"}\r\n')
    result = ingest_index(con, str(tmp_path / "m.jsonl"), "idx-1")
    assert (result.read, result.loaded, result.quarantined) == (6, 2, 4)
    assert con.sql("SELECT chunk_id FROM index_chunks ORDER BY 1").fetchall() == [("a",), ("b",)]
    rows = con.sql("SELECT line, reason, raw FROM quarantine ORDER BY line").fetchall()
    assert [(line, reason.split(" (")[0]) for line, reason, _ in rows] == [
        (2, "invalid JSON"), (3, "record is not a JSON object"), (5, "not valid UTF-8"),
        (7, "invalid JSON: the line holds a carriage return")]
    assert [raw for _, _, raw in rows[:2]] == ["{broken", '["a", "b"]']


def test_a_key_first_given_after_many_rows_is_read(con, tmp_path):
    # DuckDB's JSON reader takes its columns from a sample of the first 20,480 rows
    lines = [f'{{"chunk_id": "c{i}", "text": "t{i}"}}' for i in range(20_480)]
    lines.append('{"chunk_id": "late", "content_hash": "abc123"}')
    (tmp_path / "m.jsonl").write_text("\n".join(lines) + "\n")
    result = ingest_index(con, str(tmp_path / "m.jsonl"), "idx-1")
    assert (result.loaded, result.quarantined) == (20_481, 0)
    assert con.sql("SELECT content_hash FROM index_chunks WHERE chunk_id = 'late'"
                   ).fetchall() == [("abc123",)]


def test_one_manifest_file_loads_under_two_index_versions(con, tmp_path):
    pq.write_table(pa.table({"chunk_id": ["a", "b"], "text": ["A", "B"]}), tmp_path / "m.parquet")
    ingest_index(con, str(tmp_path / "m.parquet"), "idx-v1")
    assert not ingest_index(con, str(tmp_path / "m.parquet"), "idx-v2").skipped
    assert ingest_index(con, str(tmp_path / "m.parquet"), "idx-v2").skipped
    assert con.sql("SELECT index_version, count(*) FROM index_chunks GROUP BY 1 ORDER BY 1"
                   ).fetchall() == [("idx-v1", 2), ("idx-v2", 2)]


def test_reloading_an_earlier_manifest_for_a_version_replaces_it(con, tmp_path):
    pq.write_table(pa.table({"chunk_id": ["a", "b"], "text": ["A", "B"]}), tmp_path / "m1.parquet")
    pq.write_table(pa.table({"chunk_id": ["a"], "text": ["A"]}), tmp_path / "m2.parquet")
    ingest_index(con, str(tmp_path / "m1.parquet"), "idx-1")
    ingest_index(con, str(tmp_path / "m2.parquet"), "idx-1")
    assert not ingest_index(con, str(tmp_path / "m1.parquet"), "idx-1").skipped
    assert con.sql("SELECT count(*) FROM index_chunks").fetchall()[0][0] == 2
    assert con.sql("SELECT source FROM ingest_files WHERE kind = 'index'").fetchall() == [
        (str(tmp_path / "m1.parquet"),)]


def test_manifest_ids_are_text_and_rows_are_numbered_by_file_line(con, tmp_path):
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text('{"chunk_id": [1], "text": "a"}\n{"chunk_id": "b", "text": "b"}\n'
                     '{"chunk_id": 7, "text": "c"}\n{"chunk_id": true, "text": "d"}\n')
    result = ingest_index(con, str(jsonl), "idx-j")
    assert (result.loaded, result.quarantined) == (2, 2)
    assert con.sql("SELECT chunk_id FROM index_chunks ORDER BY 1").fetchall() == [("7",), ("b",)]
    assert con.sql("SELECT line, reason FROM quarantine ORDER BY line").fetchall() == [
        (1, "chunk_id is not a string"), (4, "chunk_id is not a string")]
    csv_file = tmp_path / "m.csv"
    csv_file.write_text("chunk_id,text\nc-1,one\n,missing\n")
    ingest_index(con, str(csv_file), "idx-c")
    assert con.sql("SELECT line, reason FROM quarantine WHERE version = 'idx-c'").fetchall() == [
        (3, "missing or null required field: chunk_id")]   # the file's own line, header is 1


def test_uuid_or_date_looking_ids_stay_text(con, tmp_path):
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text('{"chunk_id": "5d3c6d3e-0b5b-4c2e-9a4e-1c2d3e4f5a6b", "text": "a"}\n'
                     '{"chunk_id": "6e4d7e4f-1c6c-4d3f-8b5f-2d3e4f5a6b7c", "text": "b"}\n')
    assert ingest_index(con, str(jsonl), "idx-u").loaded == 2
    dates = tmp_path / "d.jsonl"
    dates.write_text('{"chunk_id": "2026-11-01", "text": "a"}\n')
    assert ingest_index(con, str(dates), "idx-d").loaded == 1
    assert con.sql("SELECT chunk_id FROM index_chunks ORDER BY 1").fetchall() == [
        ("2026-11-01",), ("5d3c6d3e-0b5b-4c2e-9a4e-1c2d3e4f5a6b",),
        ("6e4d7e4f-1c6c-4d3f-8b5f-2d3e4f5a6b7c",)]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv"])
def test_an_index_version_given_as_a_whole_number_is_its_digits_as_in_a_log(con, tmp_path, fmt):
    # a log's `"index_version": 2` is the version "2"; the same manifest as JSON Lines or
    # Parquet was refused whole ("index_version is not a string")
    path = tmp_path / f"m.{fmt}"
    if fmt == "jsonl":
        write_jsonl(path, [{"index_version": 2, "chunk_id": "a", "text": "A"},
                           {"index_version": 2.5, "chunk_id": "b", "text": "B"}])
    elif fmt == "parquet":
        pq.write_table(pa.table({"index_version": pa.array([2, 3], pa.int64()),
                                 "chunk_id": ["a", "b"], "text": ["A", "B"]}), path)
    else:
        path.write_text("index_version,chunk_id,text\n2,a,A\n3,b,B\n")
    result = ingest_index(con, str(path), "2")
    assert (result.loaded, result.quarantined) == (1, 1)
    assert con.sql("SELECT index_version, chunk_id FROM index_chunks").fetchall() == [("2", "a")]
    [(reason,)] = con.sql("SELECT reason FROM quarantine").fetchall()
    assert reason == ("index_version is not a string" if fmt == "jsonl"
                      else "index_version 3 differs from --version 2")


def test_whole_decimal_chunk_ids_load_as_their_integer(con, tmp_path):
    # as a log's decimal(p, 0) IDs do (Spark and database exports write integers so)
    from decimal import Decimal

    pq.write_table(pa.table({
        "chunk_id": pa.array([Decimal(7), Decimal(12)], pa.decimal128(38, 0)),
        "text": ["seven", "twelve"]}), tmp_path / "m.parquet")
    result = ingest_index(con, str(tmp_path / "m.parquet"), "idx-1")
    assert (result.loaded, result.quarantined) == (2, 0)
    assert con.sql("SELECT chunk_id FROM index_chunks ORDER BY 1").fetchall() == [
        ("12",), ("7",)]


def test_an_integer_chunk_id_beyond_64_bits_is_its_digits(con, tmp_path):
    # as in a log and a gold set; a float is still no ID
    (tmp_path / "m.jsonl").write_text('{"chunk_id": 123456789012345678901234, "text": "a"}\n'
                                      '{"chunk_id": -9223372036854775809, "text": "b"}\n'
                                      '{"chunk_id": 1e30, "text": "c"}\n')
    result = ingest_index(con, str(tmp_path / "m.jsonl"), "idx-1")
    assert (result.loaded, result.quarantined) == (2, 1)
    assert con.sql("SELECT chunk_id FROM index_chunks ORDER BY 1").fetchall() == [
        ("-9223372036854775809",), ("123456789012345678901234",)]


def test_csv_manifest_rows_are_numbered_by_the_line_they_start_on(con, tmp_path):
    # a quoted text spanning two lines and blank lines (which DuckDB skips) move the rows after
    # them: the quarantined row is named by the line it is on, as in the file
    csv_file = tmp_path / "m.csv"
    csv_file.write_text('chunk_id,text\nc1,one\n\nc2,"multi\nline"\n\nc3,\n;x,"a;b"\n')
    result = ingest_index(con, str(csv_file), "idx-c")
    assert (result.read, result.loaded, result.quarantined) == (4, 3, 1)
    assert con.sql("SELECT line, reason FROM quarantine").fetchall() == [
        (7, "neither content_hash nor text given")]
    semi = tmp_path / "semi.csv"   # another delimiter, as DuckDB detects it
    semi.write_text('chunk_id;text\n"s1";"one\ntwo"\ns2;\n')
    ingest_index(con, str(semi), "idx-s")
    assert con.sql("SELECT line FROM quarantine WHERE version = 'idx-s'").fetchall() == [(4,)]


@pytest.mark.parametrize("name, bad", [
    ("m.jsonl", b'{"chunk_id": "", "text": "a"}\n{"chunk_id": [1], "text": "b"}\nnot json\n'),
    ("m.csv", b"chunk_id,text\n,no id\n"),
])
def test_a_manifest_of_which_nothing_loads_is_refused_and_the_loaded_one_stays(
        con, tmp_path, name, bad):
    (tmp_path / "good.csv").write_text("chunk_id,content_hash\nc1,h1\nc2,h2\n")
    ingest_index(con, str(tmp_path / "good.csv"), "idx-1")
    (tmp_path / name).write_bytes(bad)

    with pytest.raises(RecallwatchError, match=r"no chunk could be loaded from \d+ records.*"
                                               r"nothing was loaded as index version 'idx-1'"):
        ingest_index(con, str(tmp_path / name), "idx-1")

    assert con.sql("SELECT chunk_id FROM index_chunks ORDER BY 1").fetchall() == [
        ("c1",), ("c2",)]
    assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(0,)]


def test_a_csv_written_with_a_space_after_each_comma_gives_its_values_without_it(con, tmp_path):
    # " h1" was another content than "h1": a rebuild carried nothing by it
    (tmp_path / "m.csv").write_text('chunk_id, content_hash, text\n'
                                    'c1, h1, the fee\n'
                                    '"c2", "h2", "fees, and limits"\n')
    assert ingest_index(con, str(tmp_path / "m.csv"), "idx-1").loaded == 2
    assert con.sql("SELECT chunk_id, content_hash, text FROM index_chunks ORDER BY 1").fetchall(
    ) == [("c1", "h1", "the fee"), ("c2", "h2", "fees, and limits")]


def test_a_manifest_csv_whose_rows_differ_from_its_header_says_so(con, tmp_path):
    # an unquoted comma in one text: the file was refused for lacking a chunk_id column,
    # which its header has
    (tmp_path / "idx.csv").write_text("chunk_id,text\nc1,alpha\nc2,beta, gamma\n")
    with pytest.raises(RecallwatchError,
                       match="line 3 has 3 fields where the header names 2; quote a value"):
        ingest_index(con, str(tmp_path / "idx.csv"), "i1")


def test_a_csv_manifest_naming_a_column_twice_is_one_clear_error(con, tmp_path):
    # DuckDB read the second `text` as text_1 and hashed the first alone, without a word
    path = tmp_path / "index.csv"
    path.write_text("chunk_id,text,text\nc-1,alpha,beta\n", encoding="utf-8")
    with pytest.raises(RecallwatchError, match="names the column 'text' twice"):
        ingest_index(con, str(path), "idx-1")
    assert con.sql("SELECT count(*) FROM index_chunks").fetchall() == [(0,)]


def test_a_manifest_loaded_under_earlier_reading_rules_is_read_again_once(con, tmp_path):
    # an earlier release set a valid c1 aside as a "conflicting duplicate" of a row it refused
    # for another reason, so the day was scored with c1 `not_in_index`; the unchanged file was
    # then skipped by its digest for ever
    write_jsonl(tmp_path / "m.jsonl", [
        {"index_version": "idx-1", "chunk_id": "c1", "text": "old text"},
        {"index_version": "idx-2", "chunk_id": "c1", "text": "new text"},
        {"index_version": "idx-1", "chunk_id": "x", "text": "another"}])
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c1"])])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["other"])])
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])
    ingest_index(con, str(tmp_path / "m.jsonl"), "idx-1")
    con.execute("DELETE FROM index_chunks WHERE chunk_id = 'c1'")
    con.execute("UPDATE ingest_files SET options = '' WHERE kind = 'index'")
    score(con)
    assert con.sql("SELECT cause FROM miss_causes").fetchall() == [("not_in_index",)]

    again = ingest_index(con, str(tmp_path / "m.jsonl"), "idx-1")
    assert not again.skipped
    assert con.sql("SELECT chunk_id, text FROM index_chunks ORDER BY 1").fetchall() == [
        ("c1", "old text"), ("x", "another")]
    assert ingest_index(con, str(tmp_path / "m.jsonl"), "idx-1").skipped
    # the day scored with the manifest as the earlier rules read it is scored again
    assert len(score(con).windows) == 1
    assert con.sql("SELECT cause FROM miss_causes").fetchall() == [("not_retrieved",)]


@pytest.mark.parametrize("blank", ["   ", "\t", "\n", "\r\n", "\u00a0"])
def test_a_text_or_hash_of_tabs_or_line_breaks_is_not_given_as_one_of_spaces_is(
        con, tmp_path, blank):
    # only spaces were blank: a text "\n" was content, and a rebuild carried a gold chunk onto
    # any other chunk whose text was "\n"
    write_jsonl(tmp_path / "m.jsonl", [
        {"chunk_id": "a1", "text": blank},
        {"chunk_id": "a2", "content_hash": blank, "text": "real text"},
        {"chunk_id": blank, "text": "no ID"}])
    result = ingest_index(con, str(tmp_path / "m.jsonl"), "idx-1")
    assert (result.loaded, result.quarantined) == (1, 2)
    import hashlib
    assert con.sql("SELECT chunk_id, content_hash FROM index_chunks").fetchall() == [
        ("a2", hashlib.sha256(b"real text").hexdigest())]
    assert con.sql("SELECT line, reason FROM quarantine ORDER BY line").fetchall() == [
        (1, "neither content_hash nor text given"),
        (3, "missing or null required field: chunk_id")]


def test_a_csv_manifest_quoting_a_value_only_past_its_first_rows_reads_it_unquoted(
        con, tmp_path):
    # csv and pandas quote a value only when it holds a comma, a quote or a line break, and
    # DuckDB's sniffer looks at the first 20,480 rows: past them a quoted text kept its
    # quotes (another content, so a rebuild found the gold chunk `gone`), and one holding a
    # comma refused the whole file
    import csv

    with open(tmp_path / "m.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["chunk_id", "text"])
        writer.writerows([f"c{i}", f"text {i}"] for i in range(25_000))
        writer.writerow(["q1", 'the "basic" account'])
        writer.writerow(["q2", "fees, and limits"])
        writer.writerow(["q3", ""])
    result = ingest_index(con, str(tmp_path / "m.csv"), "idx-1")
    assert (result.read, result.loaded, result.quarantined) == (25_003, 25_002, 1)
    assert con.sql("SELECT chunk_id, text FROM index_chunks WHERE chunk_id LIKE 'q%' "
                   "ORDER BY 1").fetchall() == [
        ("q1", 'the "basic" account'), ("q2", "fees, and limits")]
    assert con.sql("SELECT line, reason FROM quarantine").fetchall() == [
        (25_004, "neither content_hash nor text given")]


@pytest.mark.parametrize("last, said", [
    (b"c-x,a,b\n", "line 25002 has 3 fields where the header names 2; quote a value"),
    (b"c-x\n", "line 25002 has 1 field where the header names 2; quote a value"),
    (b"c-x,caf\xe9\n", r"not valid UTF-8 \(line 25002\); save the index manifest as UTF-8\."),
])
def test_a_csv_manifest_row_duckdb_cannot_read_is_one_sentence_naming_its_line(
        con, tmp_path, last, said):
    # past the rows DuckDB's sniffer reads, its own error came out: twenty lines of the row,
    # fixes for its options and every option, where a gold set's CSV says one sentence
    path = tmp_path / "m.csv"
    path.write_bytes(b"chunk_id,text\n"
                     + b"".join(f"c{i},text {i}\n".encode() for i in range(25_000)) + last)
    with pytest.raises(RecallwatchError, match=said) as error:
        ingest_index(con, str(path), "idx-1")
    assert "\n" not in str(error.value)
    assert con.sql("SELECT count(*) FROM index_chunks").fetchall() == [(0,)]


@pytest.mark.parametrize("rows, said", [
    (b"c1,alpha\nc2,beta, gamma\n", "line 3 has 3 fields where the header names 2; quote a value"),
    (b"c1,alpha\nc2\nc3,x\n", "line 3 has 1 field where the header names 2; quote a value"),
    (b'c1,alpha\nc2,"beta\nc3,gamma\n', "line 3 opens a quoted value that is never closed"),
])
def test_a_csv_manifest_row_within_the_sniffed_rows_is_one_sentence_naming_its_line(
        con, tmp_path, rows, said):
    # within the rows DuckDB's sniffer reads, the refusal said "not every row has the 2
    # fields the header names" and left the user to find the row among thousands
    path = tmp_path / "m.csv"
    path.write_bytes(b"chunk_id,text\n" + rows)
    with pytest.raises(RecallwatchError, match=said) as error:
        ingest_index(con, str(path), "idx-1")
    assert "\n" not in str(error.value)


def test_a_csv_manifest_quote_never_closed_past_the_sniffed_rows_is_one_sentence(
        con, tmp_path):
    # past the rows the sniffer reads, DuckDB's own twenty-line error came out
    path = tmp_path / "m.csv"
    path.write_bytes(b"chunk_id,text\n"
                     + b"".join(f"c{i},text {i}\n".encode() for i in range(25_000))
                     + b'c-x,"a, b\n')
    with pytest.raises(RecallwatchError, match="line 25002 opens a quoted value that is "
                                               "never closed") as error:
        ingest_index(con, str(path), "idx-1")
    assert "\n" not in str(error.value)
    assert con.sql("SELECT count(*) FROM index_chunks").fetchall() == [(0,)]
