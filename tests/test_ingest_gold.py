"""Gold sets: bad goldens go to quarantine with their reason, the list fields read from JSON,
CSV cells and '|'-separated text alike, and a loaded version is immutable (the same content
again is a no-op, other content an error)."""

from __future__ import annotations

import pytest

from pipeline.errors import RecallwatchError
from pipeline.ingest import ingest_gold
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


def test_gold_set_from_csv(con, tmp_path):
    (tmp_path / "gold.csv").write_text(
        'gold_id,question,gold_chunk_ids,reference\n'
        'g-1,What?,"[""a"", ""b""]",ref\n'
        'g-2,Why?,c|d,\n')
    result = ingest_gold(con, str(tmp_path / "gold.csv"), "v1")
    assert result.loaded == 2
    assert dict(con.sql("SELECT gold_id, gold_chunk_ids FROM goldens").fetchall()) == {
        "g-1": ["a", "b"], "g-2": ["c", "d"]}


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
