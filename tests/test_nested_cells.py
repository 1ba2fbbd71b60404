"""A CSV cell (gold set, RAGAS log, gdi_text_v1 dataset) or a --config nested past what
Python's JSON reader can follow is a bad record or one sentence, never an internal error."""

from __future__ import annotations

from pipeline.contract import read_dataset

DEEP = "[" * 1000 + "]" * 1000


def test_gold_csv_cell_nested_too_deep_is_quarantined(tmp_path, run_cli):
    path = tmp_path / "gold.csv"
    path.write_text("gold_id,question,gold_chunk_ids\n"
                    f"g-1,Q one,{DEEP}\n"
                    "g-2,Q two,c1|c2\n", encoding="utf-8")
    code, out, err = run_cli("ingest", "gold", path, "--version", "v1")
    assert code == 0, err
    assert "loaded 1, quarantined 1" in out


def test_ragas_log_csv_cell_nested_too_deep_is_quarantined(tmp_path, run_cli):
    path = tmp_path / "ragas.csv"
    path.write_text(
        "user_input,retrieved_contexts,retrieved_context_ids,reference,timestamp,index_version\n"
        f"What?,\"['a']\",{DEEP},ref,2026-11-01T00:00:00Z,idx\n"
        "Who?,\"['a']\",\"['c1']\",ref,2026-11-01T00:00:00Z,idx\n", encoding="utf-8")
    code, out, err = run_cli("ingest", "logs", path)
    assert code == 0, err
    assert "loaded 1, quarantined 1" in out


def test_dataset_csv_cell_nested_too_deep_is_text(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("input_id,prompt,expected_output,sut_response,retrieved_context\n"
                    f"a,Q,ref,x,{DEEP}\n", encoding="utf-8")
    [row] = read_dataset(path)
    assert row["retrieved_context"] == DEEP


def test_score_dataset_config_nested_too_deep_is_one_sentence(tmp_path, run_cli):
    path = tmp_path / "data.jsonl"
    path.write_text("", encoding="utf-8")
    code, _, err = run_cli("score-dataset", path, "--out", tmp_path / "o.jsonl",
                           "--config", DEEP)
    assert code == 2 and "internal error" not in err and "--config" in err
