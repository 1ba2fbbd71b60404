"""The platform contract rag.context_recall (pipeline/contract.py) against the real
OpenAI-compatible server on loopback (tests/judge_server.py): the worked example (3 of 4 claims
is 0.75), the configuration schema's one-sentence errors, inverted and rescaled scores, empty
context and empty reference without a call, a failing judge as judge_failed (never 0),
multi-turn rows, calls in flight bounded by concurrency_limit, and the CLI round trip."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_server import WORKED_CLAIMS, Fault, JudgeServer, words_judge  # noqa: E402

from pipeline.contract import (  # noqa: E402
    config_schema,
    read_dataset,
    score_rows,
    validate_config,
)
from pipeline.errors import RecallwatchError  # noqa: E402
from tests.conftest import write_jsonl  # noqa: E402

SECRET = "sk-test-RECALLWATCH-contract-9d1f"
REFERENCE = ("Urban branches need a minimum balance of 5000 rupees, and a fee of 50 rupees "
             "applies below it; rural branches need 1000 rupees and semi-urban ones 2500.")
CLAIMS = WORKED_CLAIMS
CONTEXT = [
    "Urban branches require a minimum balance of 5000 rupees.",
    "A fee of 50 rupees applies when the balance falls below the minimum.",
    "Opening an account needs KYC documents: an identity proof and an address proof.",
    "Semi-urban branches require a minimum balance of 2500 rupees.",
]


def splitting(request) -> dict:
    """The split prompt gets CLAIMS for REFERENCE (else one claim: the reference itself);
    the judge prompt gets words_judge."""
    if request.response_format["json_schema"]["name"] == "reference_claims":
        answer = request.messages[-1]["content"].split("\n", 1)[1]
        return {"claims": CLAIMS if answer == REFERENCE else [answer]}
    return words_judge(request)


def row(input_id="q-1", *, reference=REFERENCE, context=CONTEXT, prompt="Minimum balance?"):
    return {"input_id": input_id, "prompt": prompt, "expected_output": reference,
            "sut_response": "It depends on the branch.", "retrieved_context": context}


@pytest.fixture
def server(monkeypatch):
    with JudgeServer(reply=splitting, api_key=SECRET) as running:
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("OPENAI_BASE_URL", running.url)
        monkeypatch.setenv("RECALLWATCH_JUDGE_MODEL", "judge-model")
        yield running


def test_worked_example_three_of_four_claims_is_075(server):
    [result] = score_rows([row()])
    assert result["score"] == 0.75 and result["status"] == "ok"
    assert result["claims"] == CLAIMS and result["attributed"] == [1, 1, 0, 1]
    assert "rural" in result["reasons"][2]
    assert (result["input_id"], result["metric_name"], result["weight"]) == \
        ("q-1", "rag.context_recall", 1.0)
    assert result["tokens"] > 0
    assert server.calls == 2 and all(entry["authorized"] for entry in server.log)
    assert server.log[0]["response_format"]["json_schema"]["name"] == "reference_claims"
    assert server.log[1]["claims"] == CLAIMS and server.log[0]["model"] == "judge-model"


@pytest.mark.parametrize(("config", "named"), [
    ({"colour": "blue"}, "'colour'"),
    ({"lang": "es"}, "'lang'"),
    ({"concurrency_limit": 0}, "'concurrency_limit'"),
    ({"concurrency_limit": "4"}, "'concurrency_limit'"),
    ({"min": 1, "max": 1}, "'min'"),
    ({"min": 2}, "'max'"),
    ({"inverted": "yes"}, "'inverted'"),
])
def test_a_bad_config_is_one_sentence_naming_the_key_before_any_call(server, config, named):
    with pytest.raises(RecallwatchError) as raised:
        score_rows([row()], config)
    message = str(raised.value)
    assert named in message and "\n" not in message and message.endswith(".")
    assert message.count(". ") == 0
    assert server.calls == 0


def test_the_schema_defaults_are_the_ones_used():
    defaults = validate_config(None)
    assert defaults == {"lang": "en", "concurrency_limit": 10,
                        "metric_name": "rag.context_recall", "min": 0, "max": 1,
                        "inverted": False, "weight": 1.0}
    assert config_schema()["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize(("config", "expected"), [
    ({"inverted": True}, 0.25),
    ({"min": 0, "max": 10}, 7.5),
    ({"min": 0, "max": 10, "inverted": True}, 2.5),
    ({"min": -1, "max": 1}, 0.5),
])
def test_scores_map_recall_onto_min_max_and_invert(server, config, expected):
    [result] = score_rows([row()], {**config, "metric_name": "recall", "weight": 2})
    assert result["score"] == pytest.approx(expected)
    assert (result["metric_name"], result["weight"]) == ("recall", 2)


@pytest.mark.parametrize("context", [[], "", None, ["  "]])
def test_empty_context_is_a_real_zero_without_a_call(server, context):
    [result] = score_rows([row(context=context)])
    assert (result["score"], result["status"], result["tokens"]) == (0.0, "ok", 0)
    assert server.calls == 0


def test_empty_context_inverted_is_the_max(server):
    [result] = score_rows([row(context=[])], {"inverted": True, "max": 5})
    assert result["score"] == 5 and server.calls == 0


@pytest.mark.parametrize("reference", ["", "   ", None, []])
def test_empty_reference_is_no_evidence_without_a_call(server, reference):
    [result] = score_rows([row(reference=reference)])
    assert (result["score"], result["status"]) == (None, "no_evidence")
    assert server.calls == 0


def test_a_failing_judge_is_judge_failed_never_zero(server):
    def reply(request):
        if request.response_format["json_schema"]["name"] == "reference_claims":
            return splitting(request)
        return Fault("malformed")

    server.reply = reply
    ok_context = row("ok", context=[])
    [failed, empty] = score_rows([row("bad"), ok_context])
    assert (failed["score"], failed["status"]) == (None, "judge_failed")
    assert failed["claims"] == CLAIMS and failed["attributed"] == []
    assert "unusable twice" in failed["reasons"][0] and failed["tokens"] > 0
    assert server.calls == 3   # one split, the verdict asked twice
    assert (empty["score"], empty["status"]) == (0.0, "ok")


def test_a_reference_the_judge_cannot_split_is_judge_failed(server):
    server.reply = lambda request: {"claims": []}
    [result] = score_rows([row()])
    assert (result["score"], result["status"]) == (None, "judge_failed")
    assert "no claims" in result["reasons"][0] and server.calls == 1


def test_half_a_character_or_a_reply_nested_past_reading_is_no_crash(server):
    # a reason holding "\ud83d" alone reached DuckDB, which refused it: internal error, exit 1
    def half_a_character(request):
        if request.response_format["json_schema"]["name"] == "reference_claims":
            return splitting(request)
        return json.dumps(words_judge(request)).replace('"the context states this"',
                                                        '"the context states this \\ud83d"')

    server.reply = half_a_character
    [result] = score_rows([row()])
    assert (result["score"], result["status"]) == (0.75, "ok")
    assert "the context states this \ufffd" in result["reasons"]
    server.reply = lambda request: '{"claims": ' + "[" * 100_000
    [result] = score_rows([row("deep", reference="Another reference.")])
    assert (result["score"], result["status"]) == (None, "judge_failed")


def test_multi_turn_rows_use_the_last_turns_context(server):
    prompts = ["Which documents do I need?", "And the minimum balance?"]
    rows = [
        row("last-has-it", prompt=prompts, context=[[CONTEXT[2]], CONTEXT]),
        row("first-had-it", prompt=prompts, context=[CONTEXT, [CONTEXT[2]]]),
        row("strings-per-turn", prompt=prompts, context=[CONTEXT[2], " ".join(CONTEXT)]),
        row("reference-per-turn", prompt=prompts, context=[[], CONTEXT],
            reference=["You need KYC documents.", REFERENCE]),
        row("nothing-last", prompt=prompts, context=[CONTEXT, []]),
    ]
    scores = {r["input_id"]: r["score"] for r in score_rows(rows)}
    assert scores == {"last-has-it": 0.75, "first-had-it": 0.0, "strings-per-turn": 0.75,
                      "reference-per-turn": 0.75, "nothing-last": 0.0}


def test_calls_in_flight_stay_within_concurrency_limit_and_shared_work_is_done_once(server):
    server.latency = 0.05
    rows = [row(f"q-{i}", reference=f"Branch {i} opens at nine.",
                context=[f"Branch {i} opens at nine."]) for i in range(8)]
    rows += [row("again-1"), row("again-2")]
    results = score_rows(rows, {"concurrency_limit": 3})
    assert server.max_in_flight == 3
    assert server.calls == 2 * 8 + 2   # the repeated row is split and judged once
    assert [r["score"] for r in results] == [1.0] * 8 + [0.75, 0.75]
    assert results[-2]["tokens"] > 0 and results[-1]["tokens"] == 0


def test_a_row_without_a_column_names_it(server):
    bad = row()
    del bad["retrieved_context"]
    with pytest.raises(RecallwatchError, match="row 2 has no column 'retrieved_context'"):
        score_rows([row(), bad])
    assert server.calls == 0


@pytest.mark.parametrize("column", ["expected_output", "retrieved_context"])
def test_a_row_holding_half_a_character_is_one_sentence_before_any_call(
        server, run_cli, tmp_path, column):
    # "\ud83d" alone (an emoji cut in two) is valid JSON but no text: refused, never a crash
    # nor a failed judge call counted
    bad = row()
    bad[column] = "Urban branches \ud83d" if column == "expected_output" else ["a \ud83d"]
    (tmp_path / "data.jsonl").write_text(
        json.dumps(row()) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    code, _, err = run_cli("score-dataset", tmp_path / "data.jsonl", "--out",
                           tmp_path / "out.jsonl")
    assert code == 2 and err.count("\n") == 1
    assert f"row 2 (input_id 'q-1'): {column} holds an unpaired surrogate (\\ud83d" in err
    assert server.calls == 0 and not (tmp_path / "out.jsonl").exists()


def test_csv_cells_holding_json_arrays_are_lists(tmp_path):
    path = tmp_path / "data.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(row()))
        writer.writeheader()
        writer.writerow({**row(), "retrieved_context": json.dumps(CONTEXT)})
    assert read_dataset(path) == [row()]


def test_parquet_rows_keep_their_lists(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    turns = row(prompt=["a?", "b?"], context=[[CONTEXT[2]], CONTEXT])
    pq.write_table(pa.Table.from_pylist([turns]), tmp_path / "data.parquet")
    assert read_dataset(tmp_path / "data.parquet") == [turns]


def test_the_config_model_overrides_the_environment(server):
    score_rows([row()], {"model": "other-model"})
    assert {entry["model"] for entry in server.log} == {"other-model"}


def test_cli_round_trip_on_a_jsonl_file(server, run_cli, tmp_path):
    data = write_jsonl(tmp_path / "data.jsonl",
                       [row("q-1"), row("q-2", context=[]), row("q-3", reference="")])
    out = tmp_path / "scores.jsonl"
    code, stdout, err = run_cli("score-dataset", data, "--out", out,
                                "--config", '{"max": 10, "lang": "en"}')
    assert code == 0, err
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["input_id"], r["score"], r["status"]) for r in results] == [
        ("q-1", 7.5, "ok"), ("q-2", 0.0, "ok"), ("q-3", None, "no_evidence")]
    assert "3 row(s): ok 2, judge_failed 0, no_evidence 1" in stdout
    assert SECRET not in stdout + err + out.read_text()


def test_cli_errors_are_one_sentence(server, run_cli, tmp_path):
    data = write_jsonl(tmp_path / "data.jsonl", [{"input_id": "q-1", "prompt": "p"}])
    code, _, err = run_cli("score-dataset", data, "--out", tmp_path / "out.jsonl")
    assert code == 2 and "no column 'expected_output'" in err
    good = write_jsonl(tmp_path / "good.jsonl", [row()])
    code, _, err = run_cli("score-dataset", good, "--out", tmp_path / "out.jsonl",
                           "--config", '{"concurrency_limit": 0}')
    assert code == 2 and "'concurrency_limit'" in err and err.count("\n") == 1
    code, _, err = run_cli("score-dataset", good, "--out", tmp_path / "out.jsonl",
                           "--config", "{lang: de}")
    assert code == 2 and "--config is not valid JSON" in err
    assert server.calls == 0 and not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_config_with_a_number_json_has_not_is_refused(server, run_cli, tmp_path, constant):
    good = write_jsonl(tmp_path / "good.jsonl", [row()])
    code, _, err = run_cli("score-dataset", good, "--out", tmp_path / "out.jsonl",
                           "--config", f'{{"max": {constant}}}')
    assert code == 2 and f"{constant.lstrip('-')} is not a JSON number" in err
    assert err.count("\n") == 1
    assert server.calls == 0 and not (tmp_path / "out.jsonl").exists()


def test_an_out_path_that_cannot_be_written_is_refused_before_any_judge_call(
        server, run_cli, tmp_path):
    good = write_jsonl(tmp_path / "good.jsonl", [row()])
    taken = tmp_path / "a-directory"
    taken.mkdir()
    for out, problem in ((taken, "Is a directory"),
                         (tmp_path / "missing" / "out.jsonl", "No such directory")):
        code, _, err = run_cli("score-dataset", good, "--out", out)
        assert code == 2 and f"cannot write {out} ({problem})" in err, err
    assert server.calls == 0


@pytest.mark.parametrize(("config", "named"), [
    ({"max": 1e400}, "'max'"),                       # read as inf: scored NaN
    ({"weight": 1e999}, "'weight'"),                 # written as Infinity on every row
    ({"weight": float("nan")}, "'weight'"),
    ({"min": -1e308, "max": 1e308}, "'max'"),        # max - min overflows: 0 * inf is NaN
])
def test_a_config_number_that_is_not_finite_is_refused_before_any_call(server, config, named):
    with pytest.raises(RecallwatchError) as raised:
        score_rows([row()], config)
    assert named in str(raised.value) and "finite" in str(raised.value)
    assert server.calls == 0


def test_a_whole_number_written_with_a_point_is_an_integer_setting(server):
    # JSON Schema counts 2.0 as an integer; range() did not, after a paid call
    results = score_rows([row()], {"concurrency_limit": 2.0})
    assert results[0]["score"] == 0.75


@pytest.mark.parametrize("body, named", [
    ("r1,q,Paris is the capital,resp\n", "line 2 has 4 fields where the header names 5"),
    ("r1,q,Paris is the capital,resp,ctx,extra\n", "line 2 has 6 fields where the header names 5"),
])
def test_a_csv_row_with_more_or_fewer_fields_than_its_header_is_refused(tmp_path, body, named):
    # a short row was read with retrieved_context None and scored a real 0; a long one was
    # an internal error
    path = tmp_path / "data.csv"
    path.write_text("input_id,prompt,expected_output,sut_response,retrieved_context\n" + body,
                    encoding="utf-8")
    with pytest.raises(RecallwatchError, match=named):
        read_dataset(path)


@pytest.mark.parametrize("input_id, stored", [
    ("decimal", 7), ("nan", None), ("timestamp", None), ("float", None)])
def test_an_input_id_of_another_type_is_refused_or_read_as_its_integer_before_any_call(
        server, run_cli, tmp_path, input_id, stored):
    # a decimal(10, 0) ID (as Spark writes one) or a timestamp was an internal error after the
    # judge was paid, and left the --out file empty; a NaN ID was written as NaN
    import datetime
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    values = {"decimal": pa.array([decimal.Decimal(7)], pa.decimal128(10, 0)),
              "nan": pa.array([float("nan")]), "float": pa.array([7.5]),
              "timestamp": pa.array([datetime.datetime(2026, 11, 1)])}
    table = pa.Table.from_pylist([row()]).set_column(0, "input_id", values[input_id])
    pq.write_table(table, tmp_path / "data.parquet")
    out = tmp_path / "scores.jsonl"
    out.write_text('{"previous": "results"}\n')
    code, _, err = run_cli("score-dataset", tmp_path / "data.parquet", "--out", out)
    if stored is None:
        assert code == 2 and "input_id must be a string or an integer" in err, err
        assert server.calls == 0 and out.read_text() == '{"previous": "results"}\n'
    else:
        assert code == 0, err
        assert json.loads(out.read_text())["input_id"] == stored


def test_scores_go_to_a_pipe_or_a_link_in_place(server, run_cli, tmp_path):
    # moving a file written beside them onto /dev/stdout, a FIFO or a link fails or replaces
    # the link: they are written in place
    import os
    import threading

    good = write_jsonl(tmp_path / "good.jsonl", [row(context=[])])
    real = tmp_path / "real.jsonl"
    real.write_text("")
    (tmp_path / "link.jsonl").symlink_to(real)
    assert run_cli("score-dataset", good, "--out", tmp_path / "link.jsonl")[0] == 0
    assert (tmp_path / "link.jsonl").is_symlink() and json.loads(real.read_text())["score"] == 0
    fifo = tmp_path / "scores.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    assert run_cli("score-dataset", good, "--out", fifo)[0] == 0
    reader.join(10)
    assert json.loads(got[0])["input_id"] == "q-1"


def test_a_dataset_line_nested_past_reading_is_one_sentence(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"input_id": "a", "prompt": "q", "expected_output": "r", '
                    '"sut_response": "s", "retrieved_context": ' + "[" * 200_000
                    + "]" * 200_000 + "}\n", encoding="utf-8")
    with pytest.raises(RecallwatchError, match="line 1 is not a JSON object"):
        read_dataset(path)


# score-dataset never writes its scores over the dataset it scores
def _dataset(path):
    path.write_text(json.dumps({"input_id": "a", "prompt": "Q", "expected_output": "",
                                "sut_response": "x", "retrieved_context": []}) + "\n",
                    encoding="utf-8")
    return path


def test_out_same_as_dataset_is_refused(tmp_path, run_cli):
    data = _dataset(tmp_path / "data.jsonl")
    before = data.read_bytes()
    code, _, err = run_cli("score-dataset", data, "--out", data)
    assert code == 2 and "--out" in err and "internal error" not in err
    assert data.read_bytes() == before


def test_out_link_to_dataset_is_refused(tmp_path, run_cli):
    data = _dataset(tmp_path / "data.jsonl")
    before = data.read_bytes()
    (tmp_path / "scores.jsonl").symlink_to(data)
    code, _, err = run_cli("score-dataset", data, "--out", tmp_path / "scores.jsonl")
    assert code == 2 and data.read_bytes() == before


def test_out_elsewhere_still_written(tmp_path, run_cli):
    data = _dataset(tmp_path / "data.jsonl")
    code, _, err = run_cli("score-dataset", data, "--out", tmp_path / "scores.jsonl")
    assert code == 0, err
    assert json.loads((tmp_path / "scores.jsonl").read_text())["status"] == "no_evidence"


@pytest.mark.parametrize("config, named", [
    ('{"max": 1' + "0" * 400 + "}", "'max'"),       # an int: OverflowError after the calls
    ('{"weight": 1' + "0" * 400 + "}", "'weight'"),  # written as a number no reader holds
    ('{"max": 1' + "0" * 5000 + "}", "--config"),    # past Python's int digits: ValueError
])
def test_a_config_integer_too_large_to_be_finite_is_one_sentence_before_any_call(
        server, run_cli, tmp_path, config, named):
    good = write_jsonl(tmp_path / "good.jsonl", [row()])
    code, _, err = run_cli("score-dataset", good, "--out", tmp_path / "out.jsonl",
                           "--config", config)
    assert code == 2 and named in err and "internal error" not in err, err
    assert err.count("\n") == 1
    assert server.calls == 0 and not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("field", ["input_id", "metric_name"])
def test_half_a_character_in_the_input_id_or_metric_name_is_one_sentence_before_any_call(
        server, run_cli, tmp_path, field):
    # both are written to the scores: a lone "\ud83d" was an internal error once the judge
    # had been paid, and nothing was written
    data = tmp_path / "data.jsonl"
    bad = row("q-\ud83d") if field == "input_id" else row()
    data.write_text(json.dumps(bad) + "\n", encoding="utf-8")
    config = '{"metric_name": "recall \\ud83d"}' if field == "metric_name" else None
    code, _, err = run_cli("score-dataset", data, "--out", tmp_path / "out.jsonl",
                           *(["--config", config] if config else []))
    assert code == 2 and "internal error" not in err, err
    assert f"{field}" in err and "unpaired surrogate (\\ud83d" in err and err.count("\n") == 1
    assert server.calls == 0 and not (tmp_path / "out.jsonl").exists()


def test_a_dataset_line_over_the_record_limit_is_read_with_max_record_bytes(
        server, run_cli, tmp_path):
    # the error said "raise it with --max-record-bytes", an option score-dataset did not have
    data = write_jsonl(tmp_path / "data.jsonl", [row(context=CONTEXT + ["x" * 2000])])
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli("score-dataset", data, "--out", out, "--max-record-bytes", "1000")
    assert code == 2 and "record too large" in err and "--max-record-bytes" in err, err
    code, _, err = run_cli("score-dataset", data, "--out", out, "--max-record-bytes", "10000")
    assert code == 0, err
    assert json.loads(out.read_text())["score"] == 0.75
