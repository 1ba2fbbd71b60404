"""The log fields are declared once, in pipeline.ingest.fields, and both formats are read from
that declaration: every field's reason is given to a bad JSONL record and to the same record in
Parquet, and a field added to the declaration is staged and checked in both formats with no
other change."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.ingest import fields, ingest_logs
from pipeline.ingest.files import DEFAULT_MAX_RECORD_BYTES
from pipeline.ingest.logs import stage_log_file
from tests.conftest import request, write_jsonl

FIELDS = [(f, "request") for f in fields.REQUEST_FIELDS] + [
    (f, "item") for f in fields.ITEM_FIELDS]


def with_value(field: fields.Field, where: str, value) -> dict:
    """A good record but for `value` in `field` (of its first retrieved item, for an item
    field)."""
    if where == "item":
        return request("r", [{"chunk_id": "a", field.name: value}])
    return request("r", ["a"]) | {field.name: value}


def ingest_both(con, tmp_path, records: list[dict]):
    """Ingest `records` as a JSONL file and as a Parquet file (pyarrow infers its types);
    returns {format: [reasons by line]}."""
    write_jsonl(tmp_path / "logs.jsonl", records)
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "logs.parquet")
    reasons = {}
    for name in ("logs.jsonl", "logs.parquet"):
        ingest_logs(con, [str(tmp_path / name)])
        reasons[name] = [r for (r,) in con.execute(
            "SELECT reason FROM quarantine WHERE source = $s ORDER BY line",
            {"s": str(tmp_path / name)}).fetchall()]
    return reasons


@pytest.mark.parametrize("field,where", FIELDS, ids=[f.name for f, _ in FIELDS])
def test_every_field_reason_comes_from_a_bad_jsonl_and_a_bad_parquet_record(
        con, tmp_path, field, where):
    reasons = ingest_both(con, tmp_path, [with_value(field, where, [1, 2])])
    expected = field.reason if where == "request" else f"retrieved item 1 {field.reason}"
    assert reasons == {"logs.jsonl": [expected], "logs.parquet": [expected]}


@pytest.mark.parametrize("name", ["rank", "score"])
def test_a_number_logged_as_text_is_quarantined_in_parquet_as_in_jsonl(con, tmp_path, name):
    field = next(f for f in fields.ITEM_FIELDS if f.name == name)
    reasons = ingest_both(con, tmp_path, [with_value(field, "item", "2")])
    expected = f"retrieved item 1 {field.reason}"
    assert reasons == {"logs.jsonl": [expected], "logs.parquet": [expected]}


@pytest.mark.parametrize("shape,expected", [
    ({"retrieved": ["a", "b"]}, "retrieved item 1 is not an object"),
    ({"retrieved": {"chunk_id": "a"}}, "retrieved is not a list"),
    ({"retrieved": "a,b"}, "retrieved is not a list"),
    ({"retrieval_steps": [[], ["a"]]}, "retrieval step 2 item 1 is not an object"),
    ({"retrieval_steps": [{"chunk_id": "a"}]}, "retrieval_steps is not a list of lists"),
    ({"retrieval_steps": "a"}, "retrieval_steps is not a list"),
], ids=["items-not-objects", "struct", "text", "step-items-not-objects", "steps-not-lists",
        "steps-text"])
def test_a_badly_shaped_ranking_gets_the_same_reason_in_parquet_as_in_jsonl(
        con, tmp_path, shape, expected):
    record = {k: v for k, v in request("r", []).items() if k != "retrieved"} | shape
    assert ingest_both(con, tmp_path, [record]) == {"logs.jsonl": [expected],
                                                    "logs.parquet": [expected]}


@pytest.mark.parametrize("shape", [{"retrieved": []}, {"retrieval_steps": [[], []]}],
                         ids=["list", "steps"])
def test_a_parquet_file_of_requests_served_nothing_loads_as_jsonl_does(con, tmp_path, shape):
    # every list empty: pyarrow types the column list<null>, of no objects at all
    records = [{k: v for k, v in request(f"r{i}", []).items() if k != "retrieved"} | shape
               for i in range(2)]
    assert ingest_both(con, tmp_path, records) == {"logs.jsonl": [], "logs.parquet": []}
    assert con.sql("SELECT DISTINCT len(retrieved), k FROM requests").fetchall() == [(0, 0)]


def test_an_index_size_beyond_the_exact_doubles_is_stored_as_logged(con, tmp_path):
    size = 2**53 + 1   # a double holds 2**53 + 2 or 2**53, never this
    assert ingest_both(con, tmp_path, [request("r", ["a"], index_size=size)]) == {
        "logs.jsonl": [], "logs.parquet": []}
    assert con.sql("SELECT DISTINCT index_size FROM requests").fetchall() == [(size,)]


def test_a_field_added_to_the_declaration_is_staged_and_checked_in_both_formats(
        con, tmp_path, monkeypatch):
    channel = fields.Field("channel", fields.TEXT, "channel is not a string")
    hint = fields.Field("hint", fields.NUMBER, "has a hint that is not a number")
    monkeypatch.setattr(fields, "REQUEST_FIELDS", (*fields.REQUEST_FIELDS, channel))
    monkeypatch.setattr(fields, "ITEM_FIELDS", (*fields.ITEM_FIELDS, hint))

    good = request("good", [{"chunk_id": "a", "hint": 2.5}], channel="web")
    staged = {}
    for name in ("good.jsonl", "good.parquet"):
        if name.endswith(".jsonl"):
            write_jsonl(tmp_path / name, [good])
        else:
            pq.write_table(pa.Table.from_pylist([good]), tmp_path / name)
        (result,) = ingest_logs(con, [str(tmp_path / name)]).files
        assert (result.loaded, result.quarantined) == (1, 0)
        # the load drops what it staged: stage the file again to look
        stage_log_file(con, tmp_path / name, DEFAULT_MAX_RECORD_BYTES)
        staged[name] = con.sql(
            "SELECT logged.channel, items[1].hint FROM stage_requests").fetchall()
    assert staged == {"good.jsonl": [("web", 2.5)], "good.parquet": [("web", 2.5)]}

    bad_channel = request("bad-channel", ["a"], channel=["web"])
    bad_hint = request("bad-hint", [{"chunk_id": "a", "hint": [1]}])
    reasons = ingest_both(con, tmp_path, [bad_channel, bad_hint])
    expected = ["channel is not a string", "retrieved item 1 has a hint that is not a number"]
    assert reasons == {"logs.jsonl": expected, "logs.parquet": expected}


_VALUES = ['"a"', '"a\\"b"', '"caf\\u00e9"', '"x\\ty"', '"7"', '""', "7", "-7", "0", "-0", "7.0",
           "7.5", "1e5", "-1.5e-7", "1.5e400", "18446744073709551615", "18446744073709551616",
           "-9223372036854775808", "-9223372036854775809", "123456789012345678901", "true",
           "false", "null", '{"a": 1}', "[1, 2]", "{}", "[]", "NaN", "-Infinity"]


def test_a_chunk_read_from_the_line_parse_is_staged_as_when_parsed_on_its_own(con):
    """sql/stage_logs_jsonl.sql reads most chunks' fields from one parse of the line (leaf_item)
    and the rest chunk by chunk (json_item): both give every value the same staged value and
    the same type reason."""
    import json
    import random

    from pipeline.warehouse import run_script

    params = fields.jsonl_parameters()
    assert params["leaf_items"]
    con.execute("CREATE TEMP TABLE stage_lines (line BIGINT, text VARCHAR)")
    run_script(con, "stage_logs_jsonl", params)   # defines the macros
    names = [f.name for f in fields.ITEM_FIELDS]
    rng = random.Random(7)
    items = [{name: value for name in names} for value in _VALUES]
    items += [{name: rng.choice(_VALUES) for name in names if rng.random() < 0.8}
              for _ in range(300)]
    for item in items:
        text = "{" + ", ".join(f'"{k}": {v}' for k, v in item.items()) + "}"
        leaf, whole = con.execute(
            "SELECT leaf_item(from_json($line, $leaves).retrieved[1], 1, 1, $rules, $allowed), "
            "json_item(json_extract($line, '$.retrieved[0]'), 1, 1, $structure, $paths, $rules)",
            {"line": '{"retrieved": [' + text + "]}", "leaves": params["item_leaves"],
             "rules": params["item_rules"], "allowed": params["item_allowed"],
             "structure": params["item_structure"], "paths": params["item_paths"]}
        ).fetchall()[0]
        assert json.dumps(leaf, default=str) == json.dumps(whole, default=str), text


def test_a_line_is_invalid_json_exactly_when_json_valid_says_so(con, tmp_path):
    """The staging parses each line once for its field types (try(json_type(...)), NULL when
    it does not parse) instead of asking json_valid first: both must draw the same line."""
    import json

    lines = [json.dumps(request("r-1", ["a"])), '{"a":1,}', '{"a":1} // c', '{"a": NaN}',
             '{"a": Infinity}', "{'a': 1}",
             '{"a":1} x', '{"a":1}{"b":2}', "[" * 200 + "]" * 200, '{"a": "\\ud800"}',
             '{"a": 1e999}', '{"a":1, "a":2}', "null", '"s"', '{"a": 01}', '{"a": .5}',
             '{"a": 1.}', '{"retrieved": [1,]}', '{"a": "\\u0000"}', '{"a": [1 2]}',
             '{"a": "x\\ty"}', '{"a":' * 300 + "1" + "}" * 300]
    path = tmp_path / "odd.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ingest_logs(con, [str(path)])
    invalid = {line for (line,) in con.execute(
        "SELECT line FROM quarantine WHERE reason = 'invalid JSON'").fetchall()}
    expected = {n for n, text in enumerate(lines, 1)
                if not con.execute("SELECT json_valid($t)", {"t": text}).fetchall()[0][0]}
    assert invalid == expected and expected
