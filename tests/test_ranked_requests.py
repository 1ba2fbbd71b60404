"""Each logged chunk ID is stored once: a request logged as one list in ranking order, no chunk
twice, keeps its IDs only in `retrieved` (requests.chunk_ids and chunk_ranks NULL), and the
view ranked_requests gives every request its ranking either way. A warehouse written before,
with both lists on every request, is brought up to date by the next writer and scores the same."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.errors import RecallwatchError
from pipeline.ingest import ingest_gold, ingest_logs
from pipeline.score import score
from pipeline.warehouse import connect
from tests.conftest import golden, request, write_jsonl

RECORDS = [
    request("in-order", ["a", "b", "c"]),
    request("tied-ranks", [{"chunk_id": "a", "rank": 1}, {"chunk_id": "b", "rank": 1},
                           {"chunk_id": "c", "rank": 2}]),
    request("out-of-order", [{"chunk_id": "a", "rank": 3}, {"chunk_id": "b", "rank": 1},
                             {"chunk_id": "c", "rank": 2}]),
    request("repeated", ["a", "b", "a", "c"]),
    request("empty", []),
    {**request("steps", []), "retrieved": None,
     "retrieval_steps": [[{"chunk_id": "x"}, {"chunk_id": "a"}], [{"chunk_id": "a"}]]},
]


def expected_ranking(record: dict) -> tuple[list[str], list[int]]:
    """Distinct chunk IDs, best place first (equal places by ID), and that place: per step,
    chunks sorted by logged rank (ties by list order) are placed 1, 2, 3, ...; a chunk keeps
    its best place over all steps."""
    steps = record.get("retrieval_steps") or [record["retrieved"]]
    best: dict[str, int] = {}
    for items in steps:
        order = sorted(range(len(items)), key=lambda i: (items[i].get("rank", i + 1), i))
        for place, i in enumerate(order, start=1):
            chunk = items[i]["chunk_id"]
            best[chunk] = min(place, best.get(chunk, place))
    ranked = sorted(best, key=lambda c: (best[c], c))
    return ranked, [best[c] for c in ranked]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_request_logged_in_ranking_order_stores_its_ids_once(con, tmp_path, fmt):
    path = tmp_path / f"logs.{fmt}"
    if fmt == "jsonl":
        write_jsonl(path, RECORDS)
    else:
        keys = {key for record in RECORDS for key in record}   # every column, null where absent
        pq.write_table(pa.Table.from_pylist([{key: r.get(key) for key in sorted(keys)}
                                             for r in RECORDS]), path)
    (result,) = ingest_logs(con, [str(path)]).files
    assert (result.loaded, result.quarantined) == (len(RECORDS), 0)
    stored = dict(con.sql("SELECT request_id, chunk_ids IS NULL AND chunk_ranks IS NULL "
                          "FROM requests").fetchall())
    assert stored == {"in-order": True, "tied-ranks": True, "empty": True,
                      "out-of-order": False, "repeated": False, "steps": False}
    ranked = {rid: (ids, ranks) for rid, ids, ranks in con.sql(
        "SELECT request_id, chunk_ids, chunk_ranks FROM ranked_requests").fetchall()}
    assert ranked == {r["request_id"]: expected_ranking(r) for r in RECORDS}


def _old_layout(con) -> None:
    """The warehouse as written before: both lists on every request, NOT NULL, no view."""
    con.execute("UPDATE requests SET chunk_ids = list_transform(retrieved, lambda x: x.chunk_id), "
                "chunk_ranks = range(1, len(retrieved) + 1)::INTEGER[] WHERE chunk_ids IS NULL")
    con.execute("DROP VIEW ranked_requests")
    con.execute("ALTER TABLE requests ALTER COLUMN chunk_ids SET NOT NULL")
    con.execute("ALTER TABLE requests ALTER COLUMN chunk_ranks SET NOT NULL")


def test_a_warehouse_of_the_old_layout_is_upgraded_and_scores_the_same(tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "c", "z"])])
    write_jsonl(tmp_path / "logs.jsonl", RECORDS)
    scores = {}
    for name in ("new", "old"):
        warehouse = tmp_path / f"{name}.duckdb"
        with connect(warehouse) as con:
            ingest_logs(con, [str(tmp_path / "logs.jsonl")])
            ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
            if name == "old":
                _old_layout(con)
        if name == "old":
            with pytest.raises(RecallwatchError, match="run `recallwatch run` on it once"):
                connect(warehouse, read_only=True)
        with connect(warehouse) as con:
            score(con, gold_version="v1")
            scores[name] = con.sql(
                "SELECT s.request_id, s.recall, s.precision, c.covered, c.served "
                "FROM request_scores s LEFT JOIN request_cutoffs c USING (request_id, route) "
                "ORDER BY ALL").fetchall()
            # new requests into the upgraded warehouse store their IDs once
            write_jsonl(tmp_path / f"more-{name}.jsonl", [request("later", ["a", "z"])])
            ingest_logs(con, [str(tmp_path / f"more-{name}.jsonl")])
            assert con.sql("SELECT chunk_ids FROM requests "
                           "WHERE request_id = 'later'").fetchall() == [(None,)]
    assert scores["old"] == scores["new"]
    recall = {row[0]: row[1] for row in scores["new"]}
    # a, c, z needed: in-order serves a, c -> 2/3; steps logs only a -> 1/3; empty -> 0
    assert recall["in-order"] == pytest.approx(2 / 3)
    assert recall["steps"] == pytest.approx(1 / 3)
    assert recall["empty"] == 0
