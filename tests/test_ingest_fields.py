"""The log fields are declared once, in pipeline.ingest.fields, and both formats are read from
that declaration: every field's reason is given to a bad JSONL record and to the same record in
Parquet, and a field added to the declaration is staged and checked in both formats with no
other change."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.ingest import fields, ingest_logs
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
        staged[name] = con.sql(
            "SELECT logged.channel, items[1].hint FROM stage_requests").fetchall()
    assert staged == {"good.jsonl": [("web", 2.5)], "good.parquet": [("web", 2.5)]}

    bad_channel = request("bad-channel", ["a"], channel=["web"])
    bad_hint = request("bad-hint", [{"chunk_id": "a", "hint": [1]}])
    reasons = ingest_both(con, tmp_path, [bad_channel, bad_hint])
    expected = ["channel is not a string", "retrieved item 1 has a hint that is not a number"]
    assert reasons == {"logs.jsonl": expected, "logs.parquet": expected}
