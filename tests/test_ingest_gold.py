"""Gold sets: bad goldens go to quarantine with their reason, the list fields read from JSON,
CSV cells and '|'-separated text alike, and a loaded version is immutable (the same content
again is a no-op, other content an error)."""

from __future__ import annotations

import pytest

from pipeline.errors import RecallwatchError
from pipeline.ingest import ingest_gold
from pipeline.ingest.files import BARE_CR
from tests.conftest import golden, write_jsonl


def test_gold_set_bad_rows_are_quarantined_and_versions_are_immutable(con, tmp_path):
    path = write_jsonl(tmp_path / "gold.jsonl", [
        golden("g-1", ["a"]), golden("g-2", ["b"], question="q2"), "{oops",
        {"question": "no id"}, golden("g-1", ["z"]), golden("g-3", "a|b", question="q3"),
    ])
    result = ingest_gold(con, str(path), "v1")
    assert (result.read, result.loaded, result.quarantined) == (6, 3, 3)
    assert con.sql("SELECT gold_chunk_ids FROM goldens WHERE gold_id = 'g-3'"
                   ).fetchall() == [(["a", "b"],)]
    assert ingest_gold(con, str(path), "v1").skipped
    write_jsonl(path, [golden("g-1", ["other"])])
    with pytest.raises(RecallwatchError, match="already loaded"):
        ingest_gold(con, str(path), "v1")


def test_the_same_goldens_re_exported_are_the_loaded_version_and_other_goldens_are_not(
        con, tmp_path):
    # a scheduled `run --gold` given a re-export of the same gold set (keys and rows in another
    # order, or as CSV) failed every run with "already loaded ... with different content"
    goldens = [golden("g-1", ["a", "b"]), golden("g-2", ["c"], question="q2", reference="r")]
    ingest_gold(con, str(write_jsonl(tmp_path / "gold.jsonl", goldens)), "v1")
    reordered = [dict(reversed(list(g.items()))) for g in reversed(goldens)]
    again = ingest_gold(con, str(write_jsonl(tmp_path / "export.jsonl", reordered)), "v1")
    assert again.skipped and (again.read, again.loaded, again.quarantined) == (2, 2, 0)
    (tmp_path / "export.csv").write_text(
        "question,gold_id,gold_chunk_ids,reference\n"
        "What is the minimum balance?,g-1,a|b,\nq2,g-2,c,r\n")
    assert ingest_gold(con, str(tmp_path / "export.csv"), "v1").skipped
    assert con.sql("SELECT count(*) FROM goldens").fetchall() == [(2,)]
    # another golden, one golden more, or the same goldens with a record more to quarantine
    for name, records, said in (
            ("other", [goldens[0], golden("g-2", ["d"], question="q2", reference="r")],
             "1 differ, e.g. 'g-2'"),
            ("more", [*goldens, golden("g-3", ["e"], question="q3")], "1 differ, e.g. 'g-3'"),
            ("bad", [*goldens, "{oops"], "1 records quarantined where it had 0")):
        path = write_jsonl(tmp_path / f"{name}.jsonl", records)
        with pytest.raises(RecallwatchError, match="already loaded") as error:
            ingest_gold(con, str(path), "v1")
        assert said in str(error.value)
    assert con.sql("SELECT count(*) FROM goldens").fetchall() == [(2,)]


def test_gold_set_from_csv(con, tmp_path):
    (tmp_path / "gold.csv").write_text(
        'gold_id,question,gold_chunk_ids,reference\n'
        'g-1,What?,"[""a"", ""b""]",ref\n'
        'g-2,Why?,c|d,\n')
    result = ingest_gold(con, str(tmp_path / "gold.csv"), "v1")
    assert result.loaded == 2
    assert dict(con.sql("SELECT gold_id, gold_chunk_ids FROM goldens").fetchall()) == {
        "g-1": ["a", "b"], "g-2": ["c", "d"]}


def test_a_gold_csv_written_by_pandas_reads_its_list_cells_and_bracketed_text(con, tmp_path):
    # DataFrame.to_csv writes a list as its repr (['c1', 'c2']): every golden was quarantined
    # as "not valid JSON" and the file refused; a passage starting "[1] " was refused too
    import pandas as pd

    pd.DataFrame({"gold_id": ["g-1", "g-2", "g-3"], "question": ["q1", "q2", "q3"],
                  "gold_chunk_ids": [["c1", "c2"], [7, "c3"], ["x"]],
                  "gold_passages": [["[1] The fee is ten.", "it's \"quoted\""], [], ["a"]]}
                 ).to_csv(tmp_path / "gold.csv", index=False)
    with open(tmp_path / "gold.csv", "a", encoding="utf-8") as fh:
        fh.write('g-4,q4,"[\'c1\', \'c2\'",\ng-5,q5,c9,[1] The fee is ten.\n')
    result = ingest_gold(con, str(tmp_path / "gold.csv"), "v1")
    assert (result.loaded, result.quarantined) == (4, 1)
    assert con.sql("SELECT gold_id, gold_chunk_ids, gold_passages FROM goldens ORDER BY 1"
                   ).fetchall() == [
        ("g-1", ["c1", "c2"], ["[1] The fee is ten.", 'it\'s "quoted"']),
        ("g-2", ["7", "c3"], []), ("g-3", ["x"], ["a"]),
        ("g-5", ["c9"], ["[1] The fee is ten."])]
    # a list cell cut short is refused, not read as text
    assert con.sql("SELECT line, reason FROM quarantine").fetchall() == [
        (5, "gold_chunk_ids is not valid JSON")]


def test_gold_csv_that_is_not_utf8_is_one_clear_error(con, tmp_path):
    (tmp_path / "gold.csv").write_bytes(b"gold_id,question,gold_chunk_ids\ng-1,caf\xe9?,a|b\n")
    with pytest.raises(RecallwatchError, match="not valid UTF-8"):
        ingest_gold(con, str(tmp_path / "gold.csv"), "v1")


def test_gold_csv_with_byte_order_mark_reads_its_header(con, tmp_path):
    (tmp_path / "gold.csv").write_bytes(
        "\ufeffgold_id,question,gold_chunk_ids\ng-1,What?,a|b\n".encode())
    assert ingest_gold(con, str(tmp_path / "gold.csv"), "v1").loaded == 1


def test_a_copy_of_a_loaded_gold_file_is_the_same_gold_set(con, tmp_path):
    import shutil

    path = write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    ingest_gold(con, str(path), "v1")
    shutil.copy(path, tmp_path / "copy.jsonl")
    result = ingest_gold(con, str(tmp_path / "copy.jsonl"), "v1")
    assert result.skipped and result.loaded == 1


def test_a_lone_surrogate_quarantines_its_golden_and_the_others_load(con, tmp_path):
    (tmp_path / "gold.jsonl").write_text(
        '{"gold_id": "g-1", "question": "lone \\ud800 q", "gold_chunk_ids": ["a"]}\n'
        '{"gold_id": "g-2", "question": "ok", "gold_chunk_ids": ["b"]}\n')
    result = ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    assert (result.loaded, result.quarantined) == (1, 1)
    assert con.sql("SELECT line, reason FROM quarantine").fetchall() == [(1, "invalid JSON")]
    assert con.sql("SELECT gold_id FROM goldens").fetchall() == [("g-2",)]


def test_goldens_ended_by_a_carriage_return_alone_are_one_line_that_says_so(con, tmp_path):
    (tmp_path / "gold.jsonl").write_bytes(
        b'{"gold_id": "g-1", "question": "q1", "gold_chunk_ids": ["a"]}\r'
        b'{"gold_id": "g-2", "question": "q2", "gold_chunk_ids": ["b"]}\r\n'
        b'{"gold_id": "g-3", "question": "q3", "gold_chunk_ids": ["c"]}\r\n{broken\r\n')
    result = ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    assert (result.loaded, result.quarantined) == (1, 2)
    assert con.sql("SELECT line, reason FROM quarantine ORDER BY line").fetchall() == [
        (1, BARE_CR), (3, "invalid JSON")]


def test_a_gold_id_of_another_type_is_named_not_called_missing(con, tmp_path):
    path = write_jsonl(tmp_path / "gold.jsonl", [
        golden(42.0, ["x"]), golden(True, ["y"]), golden(None, ["z"]), golden("", ["z"]),
        golden("g-1", ["a"]), golden("g-2", ["b"], question=7)])
    ingest_gold(con, str(path), "v1")
    assert con.sql("SELECT line, reason FROM quarantine ORDER BY line").fetchall() == [
        (1, "gold_id is not a string"), (2, "gold_id is not a string"),
        (3, "missing or null required field: gold_id"),
        (4, "missing or null required field: gold_id"), (6, "question is not a string")]


@pytest.mark.parametrize("lines", [[], ['{"gold_id": 1.0, "question": "q"}', "{oops"]])
def test_a_gold_set_with_no_golden_is_refused_not_made_the_newest(con, tmp_path, lines):
    write_jsonl(tmp_path / "good.jsonl", [golden("g-1", ["a"])])
    ingest_gold(con, str(tmp_path / "good.jsonl"), "v1")
    (tmp_path / "gold.jsonl").write_text("".join(f"{line}\n" for line in lines))
    with pytest.raises(RecallwatchError, match=r"no golden could be loaded from \d records"
                                               r".*nothing was loaded as gold version 'v2'"):
        ingest_gold(con, str(tmp_path / "gold.jsonl"), "v2")
    assert con.sql("SELECT gold_version FROM gold_versions").fetchall() == [("v1",)]
    assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(0,)]


def test_a_blank_gold_passage_is_quarantined_not_counted_as_needed(con, tmp_path):
    path = write_jsonl(tmp_path / "gold.jsonl", [
        {"gold_id": "g-1", "question": "q1", "gold_passages": ["hello world", ""]},
        {"gold_id": "g-2", "question": "q2", "gold_passages": ["  "]},
        {"gold_id": "g-3", "question": "q3", "gold_passages": ["hello world"]}])
    ingest_gold(con, str(path), "v1")
    assert con.sql("SELECT line, reason FROM quarantine ORDER BY line").fetchall() == [
        (1, "gold_passages has an empty or non-string item"),
        (2, "gold_passages has an empty or non-string item")]
    assert con.sql("SELECT gold_id FROM goldens").fetchall() == [("g-3",)]


def test_a_csv_header_with_spaces_after_its_commas_names_its_columns(con, tmp_path):
    # "gold_id, question, gold_chunk_ids" as people type it: no column is lost to the spaces
    (tmp_path / "gold.csv").write_text("gold_id, question , gold_chunk_ids\n"
                                       "g-1,What is the fee?,c1|c2\n")
    assert ingest_gold(con, str(tmp_path / "gold.csv"), "v1").loaded == 1
    assert con.sql("SELECT gold_id, question, gold_chunk_ids FROM goldens").fetchall() == [
        ("g-1", "What is the fee?", ["c1", "c2"])]


def test_a_csv_written_with_a_space_after_each_comma_gives_its_values_without_it(con, tmp_path):
    # "question, gold_id": the gold_id " g-1" joined no request logging "g-1"
    (tmp_path / "gold.csv").write_bytes(
        '\ufeffquestion, gold_id, gold_chunk_ids\n'
        'What is the fee?, g-1, c1|c2\n'
        '"Fees, and limits?", g-2, "c3"\n'.encode())
    assert ingest_gold(con, str(tmp_path / "gold.csv"), "v1").loaded == 2
    assert con.sql("SELECT gold_id, question, gold_chunk_ids FROM goldens ORDER BY 1").fetchall(
    ) == [("g-1", "What is the fee?", ["c1", "c2"]), ("g-2", "Fees, and limits?", ["c3"])]


def test_whole_decimal_ids_of_a_parquet_gold_set_load_as_in_a_log(con, tmp_path):
    # Spark and database exports write integer IDs as decimal(p, 0); a fractional one is no ID
    from decimal import Decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    def gold_file(name: str, scale: int) -> str:
        pq.write_table(pa.table({
            "gold_id": pa.array([Decimal(7), Decimal(8)], pa.decimal128(38, scale)),
            "question": ["q7", "q8"],
            "gold_chunk_ids": pa.array([[Decimal(70)], [Decimal(80)]],
                                       pa.list_(pa.decimal128(38, 0))),
        }), tmp_path / name)
        return str(tmp_path / name)

    result = ingest_gold(con, gold_file("whole.parquet", 0), "v1")
    assert (result.loaded, result.quarantined) == (2, 0)
    assert con.sql("SELECT gold_id, gold_chunk_ids FROM goldens ORDER BY 1").fetchall() == [
        ("7", ["70"]), ("8", ["80"])]
    with pytest.raises(RecallwatchError, match="gold_id is not a string"):
        ingest_gold(con, gold_file("scaled.parquet", 1), "v2")   # 7.0, as a float is no ID


def test_a_key_repeated_in_a_gold_record_keeps_its_first_value_as_in_a_log(con, tmp_path):
    (tmp_path / "gold.jsonl").write_text(
        '{"gold_id": "a2", "question": "Q b", "gold_chunk_ids": ["c1"], "gold_id": "a3"}\n')
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    assert con.sql("SELECT gold_id FROM goldens").fetchall() == [("a2",)]


def test_gold_csv_rows_are_numbered_by_the_line_they_start_on(con, tmp_path):
    (tmp_path / "gold.csv").write_text(
        'gold_id,question,reference\ng-1,"What is\nthe fee?",five\n\ng-2,,"none\r\nat all"\n'
        'g-3,Why?,x\n')
    result = ingest_gold(con, str(tmp_path / "gold.csv"), "v1")
    assert (result.loaded, result.quarantined) == (2, 1)
    assert con.sql("SELECT line, reason FROM quarantine").fetchall() == [
        (5, "missing or null required field: question")]


def test_a_csv_row_with_more_or_fewer_fields_than_the_header_is_quarantined(con, tmp_path):
    # an unquoted comma in a question gave line 3 four fields under three names: it loaded
    # as question "What is the fee" with gold chunk " in euros?", its real chunks dropped,
    # and every request of it scored 0; line 4 lacks its gold chunks and scored no_evidence
    (tmp_path / "gold.csv").write_text(
        "gold_id,question,gold_chunk_ids\n"
        "g-1,What is the minimum balance?,c1|c2\n"
        "g-2,What is the fee, in euros?,c3|c4\n"
        "g-3,Who signs?\n")
    result = ingest_gold(con, str(tmp_path / "gold.csv"), "v1")
    assert (result.read, result.loaded, result.quarantined) == (3, 1, 2)
    assert con.sql("SELECT gold_id FROM goldens").fetchall() == [("g-1",)]
    assert con.sql("SELECT line, reason FROM quarantine ORDER BY line").fetchall() == [
        (3, "4 fields where the header names 3: quote a value that holds a comma"),
        (4, "2 fields where the header names 3")]


def test_gold_passages_given_twice_in_unicode_nfc_are_needed_once(con, tmp_path):
    # passages compare in NFC: composed and decomposed accents are one passage
    composed, decomposed = "caf\u00e9 cr\u00e8me", "cafe\u0301 cre\u0300me"
    write_jsonl(tmp_path / "gold.jsonl", [{"gold_id": "g-1", "question": "q?",
                                           "gold_passages": [composed, decomposed, "tea"],
                                           "gold_chunk_ids": [composed, decomposed]}])
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    # chunk IDs compare exactly, as logged: two IDs
    assert con.sql("SELECT gold_passages, gold_chunk_ids FROM goldens").fetchall() == [
        ([composed, "tea"], [composed, decomposed])]



@pytest.mark.parametrize("header", ["gold_id,question,gold_chunk_ids,gold_chunk_ids",
                                    "gold_id, question ,gold_chunk_ids,question"])
def test_a_csv_header_naming_a_column_twice_is_one_clear_error(con, tmp_path, header):
    # csv's DictReader kept the last of the two values silently: c-1 was never needed
    path = tmp_path / "gold.csv"
    path.write_text(f'{header}\ng-1,What is it?,c-1,"c-2"\n', encoding="utf-8")
    with pytest.raises(RecallwatchError, match="names the column .* twice"):
        ingest_gold(con, str(path), "v1")
    assert con.sql("SELECT count(*) FROM goldens").fetchall() == [(0,)]


@pytest.mark.parametrize("row", ['g-1,"What is the ""basic fee?,c1\n',   # the question's
                                 'g-1,What is the fee?,"c1|c2\n'])       # the chunk IDs'
def test_a_gold_csv_quote_never_closed_is_one_clear_error_not_the_rest_of_the_file(
        con, tmp_path, row):
    # csv read every line after the open quote as part of its value: g-2 and g-3 vanished
    # without a quarantine row (read 1, loaded 1), and g-1 loaded with the rest of the file
    # as its question or as one gold chunk ID
    path = tmp_path / "gold.csv"
    path.write_text("gold_id,question,gold_chunk_ids\n" + row
                    + "g-2,Who signs?,c3\ng-3,When?,c4\n", encoding="utf-8")
    with pytest.raises(RecallwatchError, match=r"line 2 opens a quoted value that is never "
                                               r"closed") as error:
        ingest_gold(con, str(path), "v1")
    assert "\n" not in str(error.value)
    assert con.sql("SELECT count(*) FROM goldens").fetchall() == [(0,)]


@pytest.mark.parametrize("text, line", [
    # the open quote "closed" at the next quote of the file: g-2 vanished into g-1's question
    ('g-1,"What is the fee?,c1\ng-2,"Who signs?",c3\ng-3,"When?",c4\n', 2),
    # a record before it holds a quoted line break, so it begins a line later than it ends
    ('g-0,"Two\nlines",c0\ng-1,"What is the fee?,c1\ng-2,Who signs?,c3\n', 4),
])
def test_a_gold_csv_quote_never_closed_is_found_whatever_follows_it(con, tmp_path, text, line):
    path = tmp_path / "gold.csv"
    path.write_text("gold_id,question,gold_chunk_ids\n" + text, encoding="utf-8")
    with pytest.raises(RecallwatchError, match=rf"line {line} opens a quoted value that is "
                                               r"never closed"):
        ingest_gold(con, str(path), "v1")
    assert con.sql("SELECT count(*) FROM goldens").fetchall() == [(0,)]


def test_a_gold_csv_whose_quoted_values_close_still_loads(con, tmp_path):
    # a quoted value spanning lines up to the file's last line, and a quote inside an
    # unquoted value, are read as before
    path = tmp_path / "gold.csv"
    path.write_text('gold_id,question,gold_chunk_ids\ng-1,The 5" screen?,c1\n'
                    'g-2,"Who\nsigns?",c3\n', encoding="utf-8")
    result = ingest_gold(con, str(path), "v1")
    assert (result.read, result.loaded, result.quarantined) == (2, 2, 0)
    assert con.sql("SELECT gold_id, question FROM goldens ORDER BY 1").fetchall() == [
        ("g-1", 'The 5" screen?'), ("g-2", "Who\nsigns?")]
