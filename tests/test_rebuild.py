"""rebuild(): gold chunk IDs are carried to a rebuilt index by content, requests it served are
re-scored with them from the day it went live (and only those days), what could not be carried
is listed and stays a miss, a second rebuild changes nothing, and the report compares the days
before and after with numbers a hand computation gives."""

from __future__ import annotations

import hashlib
import html
from datetime import datetime

import pytest
from scipy import stats as sp

from pipeline import cli
from pipeline.errors import RecallwatchError
from pipeline.ingest import ingest_gold, ingest_index, ingest_logs
from pipeline.rebuild import rebuild
from pipeline.report import write_report
from pipeline.report.reads import prepare
from pipeline.report.rebuild import live_window, rebuild_section
from pipeline.report.scope import Scope
from pipeline.run import run
from pipeline.warehouse import connect
from tests.conftest import golden, request, snapshot, write_jsonl

LIVE = datetime(2026, 11, 8)
OLD_INDEX = [  # idx-1: what the gold set was written against
    {"chunk_id": "c-1", "text": "alpha"},
    {"chunk_id": "c-2", "text": "beta"},
    {"chunk_id": "c-3", "text": "gamma"},
]
NEW_INDEX = [  # idx-2: c-1 re-IDed, c-2 kept, c-3's content changed (so its content is gone)
    {"chunk_id": "n-1", "content_hash": hashlib.sha256(b"alpha").hexdigest()},
    {"chunk_id": "c-2", "text": "beta"},
    {"chunk_id": "c-3", "text": "gamma, rewritten"},
    {"chunk_id": "c-4", "text": "delta"},
]
GOLD = [
    golden("g-1", ["c-1", "c-2"]),
    golden("g-2", ["c-3"], question="What is the fee?"),
    golden("g-3", ["c-4"], question="What is the rural balance?"),   # c-4: in no old manifest
]


def day(n: int, hour: int = 10) -> str:
    return f"2026-11-{n:02d}T{hour:02d}:00:00Z"


# before: idx-1, recall@5 1, 0.5, 0 each day, 7 days; after: idx-2, 1, 0.5, 1, 0 each day, 3 days
BEFORE = [(d, chunks) for d in range(1, 8) for chunks in (["c-1", "c-2"], ["c-1"], ["x"])]
AFTER = [(d, gold, chunks) for d in range(8, 11) for gold, chunks in (
    ("g-1", ["n-1", "c-2"]), ("g-1", ["c-2"]), ("g-1", ["n-1", "x", "c-2"]), ("g-2", ["c-3"]))]
BEFORE_RECALLS = [1.0, 0.5, 0.0] * 7


def adjusted(recalls: list[float]) -> tuple[float, float]:
    """A side's interval as window_metrics has it for requests without sessions: the t-interval
    of the recalls with a 0 and a 1 added, on n - 1 degrees of freedom (unclipped)."""
    augmented = [*recalls, 0.0, 1.0]
    half = sp.t.isf(0.025, len(recalls) - 1) * sp.tstd(augmented) / len(augmented) ** 0.5
    mean = sum(augmented) / len(augmented)
    return mean - half, mean + half
AFTER_RECALLS = [1.0, 0.5, 1.0, 0.0] * 3


@pytest.fixture
def world(con, tmp_path):
    """Both indexes' requests loaded and scored before the rebuild is known (the new index's
    requests then miss the re-IDed chunk); returns the new manifest's path."""
    logs = [request(f"b-{d}-{i}", chunks, ts=day(d, 10 + i % 3))
            for i, (d, chunks) in enumerate(BEFORE)]
    logs += [request(f"a-{d}-{i}", chunks, ts=day(d, 10 + i % 4), gold_id=gold,
                     index_version="idx-2")
             for i, (d, gold, chunks) in enumerate(AFTER)]
    write_jsonl(tmp_path / "logs.jsonl", logs)
    write_jsonl(tmp_path / "gold.jsonl", GOLD)
    write_jsonl(tmp_path / "idx-1.jsonl", OLD_INDEX)
    write_jsonl(tmp_path / "idx-2.jsonl", NEW_INDEX)
    ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    return str(tmp_path / "idx-2.jsonl")


def carried(con) -> list[tuple]:
    return con.sql("SELECT gold_version, index_version, gold_chunk_id, carried_chunk_id, how, "
                   "from_version FROM carried_gold_ids ORDER BY ALL").fetchall()


def recall_of(con, request_id: str) -> float:
    return con.execute("SELECT recall FROM request_scores WHERE request_id = $r",
                       {"r": request_id}).fetchall()[0][0]


def test_gold_chunks_are_carried_by_content_hash_same_id_gone_or_unknown(con, world):
    result = rebuild(con, "idx-2", world, LIVE)
    assert carried(con) == [
        ("v1", "idx-2", "c-1", "n-1", "content_hash", "idx-1"),
        ("v1", "idx-2", "c-2", "c-2", "same_id", "idx-1"),
        ("v1", "idx-2", "c-3", None, "gone", "idx-1"),
        ("v1", "idx-2", "c-4", "c-4", "unknown", None),
    ]
    assert result.carried == {"same_id": 1, "content_hash": 1, "gone": 1, "unknown": 1}
    assert [(c.gold_id, c.chunk_id, c.how) for c in result.not_carried] == [
        ("g-2", "c-3", "gone"), ("g-3", "c-4", "unknown")]
    assert result.as_dict()["not_carried"][0] == {
        "gold_version": "v1", "gold_id": "g-2", "chunk_id": "c-3", "how": "gone",
        "from_version": "idx-1"}


def test_new_index_requests_retrieving_the_new_id_score_it_as_found(con, world):
    assert recall_of(con, "a-8-0") == 0.5   # before the rebuild: n-1 is not c-1
    rebuild(con, "idx-2", world, LIVE)
    assert recall_of(con, "a-8-0") == 1.0
    assert recall_of(con, "a-8-2") == 1.0   # n-1 at rank 1, c-2 at rank 3, both within k
    assert con.sql("SELECT count(*) FROM miss_causes WHERE request_id IN ('a-8-0', 'a-8-2')"
                   ).fetchall() == [(0,)]
    # the missing c-1 of a request without n-1 is named by its gold ID, found not retrieved
    assert con.sql("SELECT chunk_id, cause FROM miss_causes WHERE request_id = 'a-8-1'"
                   ).fetchall() == [("c-1", "not_retrieved")]


def test_gone_chunk_stays_a_miss_not_in_index_even_when_its_id_is_retrieved(con, world):
    rebuild(con, "idx-2", world, LIVE)
    assert recall_of(con, "a-8-3") == 0.0   # retrieved c-3, but its content is not c-3's any more
    assert con.sql("SELECT gold_id, chunk_id, cause, index_version FROM miss_causes "
                   "WHERE request_id = 'a-8-3'").fetchall() == [
        ("g-2", "c-3", "not_in_index", "idx-2")]


def test_old_index_requests_keep_comparing_the_gold_ids(con, world, tmp_path):
    extra = write_jsonl(tmp_path / "extra.jsonl", [
        request("old-after", ["n-1", "c-2"], ts=day(9)),            # idx-1 after live_from
        request("old-before", ["c-1", "c-2"], ts=day(7, 23))])
    ingest_logs(con, [str(extra)])
    rebuild(con, "idx-2", world, LIVE)
    assert recall_of(con, "old-after") == 0.5    # n-1 means nothing to idx-1
    run(con)
    assert recall_of(con, "old-before") == 1.0


def test_days_before_live_from_are_not_rescored(con, world):
    rows = ("SELECT * FROM {} WHERE {} < TIMESTAMP '2026-11-08' ORDER BY ALL")
    scores = con.sql(rows.format("request_scores", "timestamp")).fetchall()
    windows = con.sql(rows.format("score_windows", "day")).fetchall()
    metrics = con.sql(rows.format("window_metrics", "window_start")).fetchall()
    result = rebuild(con, "idx-2", world, LIVE)
    assert result.as_dict()["days_rescored"] == ["2026-11-08", "2026-11-09", "2026-11-10"]
    assert con.sql(rows.format("request_scores", "timestamp")).fetchall() == scores
    assert con.sql(rows.format("score_windows", "day")).fetchall() == windows
    assert con.sql(rows.format("window_metrics", "window_start")).fetchall() == metrics


def test_rebuild_twice_changes_nothing(con, world):
    rebuild(con, "idx-2", world, LIVE)
    before = snapshot(con), carried(con)
    again = rebuild(con, "idx-2", world, LIVE)
    assert again.manifest.skipped
    assert again.days_rescored == ()
    assert (snapshot(con), carried(con)) == before


def test_a_gold_set_loaded_apart_is_carried_by_the_next_run(con, world, tmp_path):
    rebuild(con, "idx-2", world, LIVE)
    write_jsonl(tmp_path / "gold2.jsonl", [golden("g-1", ["c-1"])])
    ingest_gold(con, str(tmp_path / "gold2.jsonl"), "v2")   # the step alone carries nothing
    assert not [row for row in carried(con) if row[0] == "v2"]
    run(con)   # carries v2's chunks, then scores with v2
    assert ("v2", "idx-2", "c-1", "n-1", "content_hash", "idx-1") in carried(con)
    assert recall_of(con, "a-8-0") == 1.0
    result = rebuild(con, "idx-2", world, LIVE)   # the same rebuild again: nothing to redo
    assert result.days_rescored == ()


def test_a_manifest_loaded_again_after_the_rebuild_is_carried_anew(con, world, tmp_path):
    rebuild(con, "idx-2", world, LIVE)
    assert recall_of(con, "a-8-3") == 0.0   # c-3's content is gone from the first manifest
    corrected = tmp_path / "idx-2-corrected.jsonl"
    write_jsonl(corrected, [*NEW_INDEX[:2], {"chunk_id": "c-3", "text": "gamma"}, NEW_INDEX[3]])
    run(con, index=[(str(corrected), "idx-2")])
    assert ("v1", "idx-2", "c-3", "c-3", "same_id", "idx-1") in carried(con)
    assert recall_of(con, "a-8-3") == 1.0


def test_a_gold_set_loaded_by_run_after_a_rebuild_is_carried_to_it(con, world, tmp_path):
    rebuild(con, "idx-2", world, LIVE)
    write_jsonl(tmp_path / "gold2.jsonl", [golden("g-1", ["c-1"])])
    run(con, gold=str(tmp_path / "gold2.jsonl"), gold_version="v2")
    assert recall_of(con, "a-8-0") == 1.0   # n-1 holds c-1's content: found


# a gold set written after the rebuild, against idx-2: its c-3 is idx-2's "gamma, rewritten",
# its n-1 idx-2's "alpha"
GOLD_OF_IDX_2 = [golden("g-1", ["n-1", "c-2"]),
                 golden("g-2", ["c-3"], question="What is the fee?")]


def named(con) -> list[tuple]:
    return con.sql("SELECT gold_version, index_version, gold_chunk_id, carried_chunk_id, how, "
                   "from_version FROM named_gold_ids ORDER BY ALL").fetchall()


def test_a_gold_set_written_against_the_new_index_names_its_chunks_there(con, world, tmp_path):
    rebuild(con, "idx-2", world, LIVE)
    write_jsonl(tmp_path / "gold2.jsonl", GOLD_OF_IDX_2)
    ingest_gold(con, str(tmp_path / "gold2.jsonl"), "v2", index_version="idx-2")
    run(con)
    # idx-2 served a-8-3 its own c-3, the chunk the gold set names: found (carried from idx-1
    # as if it named idx-1's c-3, it was gone and a miss)
    assert recall_of(con, "a-8-3") == 1.0
    assert recall_of(con, "a-8-0") == 1.0   # n-1 and c-2, as named
    # idx-1 served b-1-0 c-1 and c-2: c-1 holds what idx-2's n-1 holds, so both are found
    assert recall_of(con, "b-1-0") == 1.0
    assert recall_of(con, "b-1-1") == 0.5   # c-1 alone
    # the gold set's chunks are compared by content on every other index, never carried by
    # the rebuild as if they named idx-1's chunks
    assert named(con) == [
        ("v2", "idx-1", "c-2", "c-2", "same_id", "idx-2"),
        ("v2", "idx-1", "c-3", None, "gone", "idx-2"),
        ("v2", "idx-1", "n-1", "c-1", "content_hash", "idx-2"),
    ]
    assert not [row for row in carried(con) if row[0] == "v2"]


def test_a_gold_set_named_for_an_index_is_the_same_set_only_for_that_index(con, world,
                                                                           tmp_path):
    write_jsonl(tmp_path / "gold2.jsonl", GOLD_OF_IDX_2)
    path = str(tmp_path / "gold2.jsonl")
    first = ingest_gold(con, path, "v2", index_version="idx-2")
    assert ingest_gold(con, path, "v2", index_version="idx-2").skipped
    # without a name, as loaded (a scheduled `run --gold` gives the same file every time)
    assert ingest_gold(con, path, "v2").skipped
    with pytest.raises(RecallwatchError, match="names the chunks of index 'idx-2'"):
        ingest_gold(con, path, "v2", index_version="idx-1")
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    with pytest.raises(RecallwatchError, match="names the chunks of the indexes that served "
                                               "before each rebuild"):
        ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1", index_version="idx-2")
    assert not first.skipped
    with pytest.raises(RecallwatchError, match="--index-version must name the index version"):
        ingest_gold(con, path, "v3", index_version=" ")


def test_a_gold_set_named_for_an_index_without_a_manifest_is_compared_as_it_is(con, world,
                                                                              tmp_path):
    write_jsonl(tmp_path / "gold2.jsonl", [golden("g-1", ["c-1", "c-2"])])
    ingest_gold(con, str(tmp_path / "gold2.jsonl"), "v2", index_version="idx-9")
    run(con)
    assert named(con) == []   # nothing to compare by: every ID as it is, as without the name
    assert recall_of(con, "b-1-0") == 1.0


def test_report_says_a_named_gold_set_is_compared_by_content_not_carried(con, world,
                                                                          tmp_path):
    rebuild(con, "idx-2", world, LIVE)
    write_jsonl(tmp_path / "gold2.jsonl", GOLD_OF_IDX_2)
    ingest_gold(con, str(tmp_path / "gold2.jsonl"), "v2", index_version="idx-2")
    run(con)
    prepare(con)
    [r] = rebuild_section(con, Scope("ids", 5, "v2"), "5 (served)")["rebuilds"]
    # it names the rebuilt index: how its chunks compare on the index that served before
    assert r["named"] == "idx-2" and r["recorded"]
    assert [(o["index_version"], {c["how"]: c["chunks"] for c in o["carried"]})
            for o in r["compared"]] == [
        ("idx-1", {"same_id": 1, "content_hash": 1, "gone": 1, "unknown": 0})]
    assert r["not_carried"] == []
    page = write_report(con, tmp_path / "report", k=5, gold_version="v2").read_text()
    section = page[page.index('<section id="rebuild">'):]
    section = section[:section.index("</section>")]
    assert "names the chunks of index <code>idx-2</code>: no rebuild carries it" in section
    assert "On <code>idx-1</code>: <code>same_id</code> 1" in section
    assert "gold chunks carried from" not in section   # v1's carry is not v2's
    assert "<code>gone</code> 1" in section and "was carried" not in section


def test_a_rebuild_with_only_a_named_gold_set_is_reported_as_recorded(con, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", GOLD_OF_IDX_2)
    write_jsonl(tmp_path / "idx-1.jsonl", OLD_INDEX)
    write_jsonl(tmp_path / "logs.jsonl", [
        request("old", ["c-1", "c-2"], ts=day(7)),
        request("new", ["n-1", "c-2"], ts=day(8), index_version="idx-2")])
    ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v2", index_version="idx-2")
    run(con, logs=[str(tmp_path / "logs.jsonl")])
    # the new manifest changes how the day before it went live compares: re-scored too
    result = rebuild(con, "idx-2", world_manifest(tmp_path), LIVE)
    assert [d.day for d in result.days_rescored] == [7, 8]
    assert carried(con) == []   # nothing a rebuild carries
    assert (recall_of(con, "old"), recall_of(con, "new")) == (1.0, 1.0)
    prepare(con)
    [r] = rebuild_section(con, Scope("ids", 5, "v2"), "5 (served)")["rebuilds"]
    assert (r["recorded"], r["live_from"], r["named"]) == (True, LIVE, "idx-2")
    assert [o["index_version"] for o in r["compared"]] == ["idx-1"]


def test_the_index_a_rebuild_replaced_is_no_takeover_with_only_a_named_gold_set(con, tmp_path):
    # the logs begin after idx-2 went live; idx-1, which it replaced, is first logged a day
    # later and stops while idx-2 goes on: one rebuild, as with a gold set the rebuild carries
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["n-1"])])
    write_jsonl(tmp_path / "idx-1.jsonl", OLD_INDEX)
    write_jsonl(tmp_path / "logs.jsonl", [
        request("new-9", ["n-1"], ts=day(9), index_version="idx-2"),
        request("old", ["c-1"], ts=day(10)),
        request("new-11", ["n-1"], ts=day(11), index_version="idx-2")])
    ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v2", index_version="idx-2")
    run(con, logs=[str(tmp_path / "logs.jsonl")])
    rebuild(con, "idx-2", world_manifest(tmp_path), LIVE)
    prepare(con)
    section = rebuild_section(con, Scope("ids", 5, "v2"), "5 (served)")
    assert [(r["index_version"], r["recorded"]) for r in section["rebuilds"]] == [
        ("idx-2", True)]
    assert recall_of(con, "old") == 1.0   # c-1 holds what idx-2's n-1 holds


def world_manifest(tmp_path) -> str:
    write_jsonl(tmp_path / "idx-2.jsonl", NEW_INDEX)
    return str(tmp_path / "idx-2.jsonl")


def test_ingest_gold_index_version_on_the_command_line(run_cli, warehouse, tmp_path):
    write_jsonl(tmp_path / "idx-1.jsonl", OLD_INDEX)
    write_jsonl(tmp_path / "idx-2.jsonl", NEW_INDEX)
    write_jsonl(tmp_path / "gold2.jsonl", GOLD_OF_IDX_2)
    for version in ("idx-1", "idx-2"):
        assert run_cli("ingest", "index", tmp_path / f"{version}.jsonl", "--version",
                       version)[0] == 0
    code, out, _ = run_cli("ingest", "gold", tmp_path / "gold2.jsonl", "--version", "v2",
                           "--index-version", "idx-2")
    assert code == 0 and "names the chunks of index idx-2" in out
    with connect(warehouse) as con:
        assert ("v2", "idx-1", "n-1", "c-1", "content_hash", "idx-2") in named(con)
    code, out, _ = run_cli("rebuild", tmp_path / "idx-2.jsonl", "--version", "idx-2",
                           "--live-from", "2026-11-08")
    assert code == 0 and ("gold set v2 names the chunks of index idx-2: not carried, "
                          "compared by content on the other indexes") in out
    code, _, err = run_cli("ingest", "gold", tmp_path / "gold2.jsonl", "--version", "v2",
                           "--index-version", "idx-1")
    assert code == 2 and "names the chunks of index 'idx-2'" in err
    # a scheduled run that gives the gold set every time, and one that names its index
    for flag in ([], ["--gold-index-version", "idx-2"]):
        code, out, err = run_cli("run", "--gold", tmp_path / "gold2.jsonl", "--gold-version",
                                 "v2", *flag)
        assert code == 0, err
    code, _, err = run_cli("run", "--gold-index-version", "idx-2")
    assert code == 2 and "give --gold too" in err
    write_jsonl(tmp_path / "gold3.jsonl", GOLD_OF_IDX_2[:1])
    code, _, err = run_cli("run", "--gold", tmp_path / "gold3.jsonl", "--gold-version", "v3",
                           "--gold-index-version", "idx-2")
    assert code == 0, err
    with connect(warehouse) as con:
        assert ("v3", "idx-1", "n-1", "c-1", "content_hash", "idx-2") in named(con)


def test_content_held_by_several_chunks_is_found_under_any_of_them(con, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-1"])])
    write_jsonl(tmp_path / "idx-1.jsonl", [{"chunk_id": "c-1", "text": "alpha"}])
    write_jsonl(tmp_path / "idx-2.jsonl", [{"chunk_id": "d-1", "text": "alpha"},
                                           {"chunk_id": "d-2", "text": "alpha"}])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("old", ["c-1"], ts=day(1)),
        request("new", ["x", "d-2"], ts=day(8), index_version="idx-2")])
    ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    result = rebuild(con, "idx-2", str(tmp_path / "idx-2.jsonl"), LIVE)
    assert result.carried["content_hash"] == 1   # one gold chunk, carried to two IDs
    assert recall_of(con, "new") == 1.0


def test_a_blank_content_hash_is_no_content_and_carries_nothing(con, tmp_path):
    # both manifests give "" as the hash: the chunks' texts differ, so the gold chunk is gone
    # from the new index and a request served only an unrelated chunk is a miss, never a hit
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-5"])])
    write_jsonl(tmp_path / "idx-1.jsonl", [
        {"chunk_id": "c-5", "content_hash": "", "text": "The fee is five dollars."}])
    write_jsonl(tmp_path / "idx-2.jsonl", [
        {"chunk_id": "zz", "content_hash": " ", "text": "Unrelated chunk about weather."},
        {"chunk_id": "blank", "content_hash": "", "text": ""}])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("old", ["c-5"], ts=day(1)),
        request("new", ["zz"], ts=day(8), index_version="idx-2")])
    ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    result = rebuild(con, "idx-2", str(tmp_path / "idx-2.jsonl"), LIVE)
    assert (result.carried.get("content_hash", 0), result.carried["gone"]) == (0, 1)
    assert recall_of(con, "new") == 0.0
    assert con.sql("SELECT chunk_id, content_hash FROM index_chunks WHERE chunk_id IN "
                   "('c-5', 'zz') ORDER BY 1").fetchall() == [
        ("c-5", hashlib.sha256(b"The fee is five dollars.").hexdigest()),
        ("zz", hashlib.sha256(b"Unrelated chunk about weather.").hexdigest())]
    # a row with neither a hash nor a text is quarantined, as when both are missing
    assert con.sql("SELECT line, reason FROM quarantine WHERE kind = 'index'").fetchall() == [
        (2, "neither content_hash nor text given")]


def test_two_gold_chunks_carried_to_one_chunk_make_one_relevant_chunk(con, tmp_path):
    # a and b held the same content; the rebuilt index keeps it once, as a
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "idx-1.jsonl", [{"chunk_id": "a", "text": "same"},
                                           {"chunk_id": "b", "text": "same"}])
    write_jsonl(tmp_path / "idx-2.jsonl", [{"chunk_id": "a", "text": "same"},
                                           {"chunk_id": "z", "text": "other"}])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("new", ["a", "z"], ts=day(8), index_version="idx-2")])
    ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    rebuild(con, "idx-2", str(tmp_path / "idx-2.jsonl"), LIVE)
    assert con.sql("SELECT k, recall, precision FROM recall_at_k WHERE k <= 3 ORDER BY k"
                   ).fetchall() == [(1, 1.0, 1.0), (3, 1.0, 0.5)]
    assert con.sql("SELECT recall, precision FROM request_scores").fetchall() == [(1.0, 0.5)]


def test_rebuilds_chain_through_the_index_that_served_before(con, world, tmp_path):
    rebuild(con, "idx-2", world, LIVE)
    write_jsonl(tmp_path / "idx-3.jsonl", [{"chunk_id": "m-1", "text": "alpha"},
                                           {"chunk_id": "c-2", "text": "beta"}])
    write_jsonl(tmp_path / "later.jsonl", [
        request("later", ["m-1", "c-2"], ts=day(20), index_version="idx-3")])
    ingest_logs(con, [str(tmp_path / "later.jsonl")])
    rebuild(con, "idx-3", str(tmp_path / "idx-3.jsonl"), datetime(2026, 11, 20))
    assert [row[2:] for row in carried(con) if row[1] == "idx-3"] == [
        ("c-1", "m-1", "content_hash", "idx-2"),   # via n-1, what c-1 was in idx-2
        ("c-2", "c-2", "same_id", "idx-2"),
        ("c-3", None, "gone", "idx-1"),            # gone from idx-2: its content from idx-1
        ("c-4", None, "gone", "idx-2"),
    ]
    assert recall_of(con, "later") == 1.0


def test_before_after_numbers_equal_a_hand_computation(con, world):
    rebuild(con, "idx-2", world, LIVE)
    prepare(con)
    section = rebuild_section(con, Scope("ids", 5, "v1"), "5 (served)")
    [r] = section["rebuilds"]
    before, after = r["sides"]
    assert (before["n"], before["days"], after["n"], after["days"]) == (21, 7, 12, 3)
    assert before["mean"] == pytest.approx(sum(BEFORE_RECALLS) / 21)   # 0.5
    assert after["mean"] == pytest.approx(sum(AFTER_RECALLS) / 12)     # 0.625
    # no sessions: every request its own cluster, so the interval is Welch's on each side's
    # recalls with 0s and 1s added by its size (the 12 after one of each, the 21 before 1.75),
    # on the observed sides' degrees of freedom
    def side(recalls: list[float], each: float) -> tuple[float, float]:
        size = len(recalls) + 2 * each
        mean = (sum(recalls) + each) / size
        squares = sum((y - mean) ** 2 for y in recalls) + each * (mean ** 2 + (1 - mean) ** 2)
        return mean, size / (size - 1) * squares / size ** 2

    (m_b, var_b), (m_a, var_a) = side(BEFORE_RECALLS, 21 / 12), side(AFTER_RECALLS, 1.0)
    df = (var_b + var_a) ** 2 / (var_b ** 2 / 20 + var_a ** 2 / 11)
    centre = m_a - m_b
    half = sp.t.isf(0.025, df) * (var_b + var_a) ** 0.5
    assert r["difference"]["delta"] == pytest.approx(0.125)
    assert r["difference"]["low"] == pytest.approx(centre - half, abs=1e-9)
    assert r["difference"]["high"] == pytest.approx(centre + half, abs=1e-9)
    # recalls this spread out already show their spread: the added values move the centre
    # towards 0 (Welch's on the recalls alone is -0.196 to 0.446) and hardly widen it
    assert centre < 0.125 and r["difference"]["low"] < 0.0 < 0.125 < r["difference"]["high"]
    assert (before["first"].isoformat(), before["last"].isoformat()) == ("2026-11-01",
                                                                         "2026-11-07")
    assert r["caption"] == {"k": 5, "k_text": "5", "route": "ids", "gold_version": "v1",
                            "n": 33}
    assert [(row["gold_id"], row["chunk_id"], row["how"], row["misses"])
            for row in r["not_carried"]] == [("g-2", "c-3", "gone", 3),
                                             ("g-3", "c-4", "unknown", 0)]


def test_a_day_the_index_went_live_in_belongs_to_neither_side():
    assert live_window(datetime(2026, 11, 8, 6)) == {
        "before_start": datetime(2026, 11, 1), "before_end": datetime(2026, 11, 8),
        "after_start": datetime(2026, 11, 9), "after_end": datetime(2026, 11, 16)}
    assert live_window(LIVE)["after_start"] == LIVE


def test_report_section_lists_what_was_not_carried_escaped(con, tmp_path):
    hostile = "<b>c-9</b>"
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", [hostile, "c-1"])])
    write_jsonl(tmp_path / "idx-1.jsonl", [{"chunk_id": hostile, "text": "gone soon"},
                                           {"chunk_id": "c-1", "text": "alpha"}])
    write_jsonl(tmp_path / "idx-2.jsonl", [{"chunk_id": "c-1", "text": "alpha"}])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("old", [hostile, "c-1"], ts=day(7)),
        request("new", [hostile, "c-1"], ts=day(8), index_version="idx-2")])
    ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    rebuild(con, "idx-2", str(tmp_path / "idx-2.jsonl"), LIVE)
    page = write_report(con, tmp_path / "report", k=5).read_text()
    section = page[page.index('<section id="rebuild">'):page.index("<footer>")]
    assert hostile not in page
    assert html.escape(hostile, quote=False) in section
    assert "Before / after the rebuild" in section and "gone" in section
    assert 'data-k="5" data-route="ids" data-gold-version="v1" data-n="2"' in section
    assert recall_of(con, "new") == 0.5


def test_report_without_a_rebuild_says_how_to_record_one(con, world, tmp_path):
    # the world's second index version took over without `rebuild`: compared, noted as such
    page = write_report(con, tmp_path / "report", k=5).read_text()
    assert 'class="muted not-recorded"' in page and "Index version <code>idx-2</code>" in page


def cli_world(tmp_path, warehouse, gold: list[dict], *, also: tuple[str, ...] = ()) -> None:
    """idx-1's manifest, one request of idx-2 on day 8, `gold` loaded as v1 by `run` (and
    first as each version of `also`), in the warehouse the CLI tests use."""
    from pipeline.warehouse import connect

    write_jsonl(tmp_path / "gold.jsonl", gold)
    write_jsonl(tmp_path / "idx-1.jsonl", OLD_INDEX)
    write_jsonl(tmp_path / "idx-2.jsonl", NEW_INDEX)
    write_jsonl(tmp_path / "logs.jsonl", [
        request("a", ["n-1", "c-2"], ts=day(8), index_version="idx-2")])
    with connect(warehouse) as con:
        ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
        for version in also:
            ingest_gold(con, str(tmp_path / "gold.jsonl"), version)
        run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
            gold_version="v1")


def test_cli_rebuild_prints_what_was_carried(run_cli, tmp_path, warehouse):
    cli_world(tmp_path, warehouse, GOLD)
    code, out, err = run_cli("rebuild", tmp_path / "idx-2.jsonl", "--version", "idx-2",
                             "--live-from", "2026-11-08")
    assert (code, err) == (0, "")
    assert "same_id 1, content_hash 1, gone 1, unknown 1" in out
    assert "gone: chunk c-3 of golden g-2" in out
    assert "re-scored 1 day window(s) 2026-11-08..2026-11-08" in out
    code, _, err = run_cli("rebuild", tmp_path / "idx-2.jsonl", "--version", "idx-2",
                           "--live-from", "next week")
    assert code == 2 and "--live-from 'next week' is not an ISO date" in err
    # a time it had not served before corrects the one recorded; a later one, after it served,
    # is a second go-live and keeps the first
    assert run_cli("rebuild", tmp_path / "idx-2.jsonl", "--version", "idx-2",
                   "--live-from", "2026-11-07")[0] == 0
    code, out, err = run_cli("rebuild", tmp_path / "idx-2.jsonl", "--version", "idx-2",
                             "--live-from", "2026-11-09")
    assert (code, err) == (0, "")
    assert ("index idx-2 went live first at 2026-11-07T00:00:00 and again at "
            "2026-11-09T00:00:00: its gold chunks stay carried from its first go-live") in out
    # a mistyped warehouse is refused, not created and reported as rebuilt
    typo = tmp_path / "typo" / "recalwatch.duckdb"
    assert cli.main(["--warehouse", str(typo), "rebuild", str(tmp_path / "idx-2.jsonl"),
                     "--version", "idx-2", "--live-from", "2026-11-08"]) == 2
    assert not typo.exists()


def test_cli_rebuild_counts_each_gold_set_apart_and_names_a_version_that_served_nothing(
        run_cli, tmp_path, warehouse):
    # two gold sets of the same 3 chunks printed "same_id 2, content_hash 2, gone 2" as if
    # there were 6; a mistyped --version (idx-2x: no request of it) printed a summary like any
    # other and nothing to notice
    cli_world(tmp_path, warehouse, GOLD[:2], also=("v0",))
    code, out, err = run_cli("rebuild", tmp_path / "idx-2.jsonl", "--version", "idx-2",
                             "--live-from", "2026-11-08")
    assert (code, err) == (0, "")
    for version in ("v0", "v1"):
        assert (f"gold chunks carried, gold set {version}: same_id 1, content_hash 1, gone 1, "
                "unknown 0") in out, out
    assert "no request" not in out
    code, out, err = run_cli("rebuild", tmp_path / "idx-2.jsonl", "--version", "idx-2x",
                             "--live-from", "2026-11-08")
    assert (code, err) == (0, "")
    assert ("no request served by index idx-2x is loaded; from 2026-11-08T00:00:00 the "
            "requests loaded were served by idx-2 (is --version right?)") in out, out



def test_cli_rebuild_names_the_days_a_version_served_when_none_is_from_live_from_on(
        run_cli, tmp_path, warehouse):
    # a mistyped --live-from (after every request of the version, or in the future) was
    # recorded without a word, and the report's before/after compared around it
    cli_world(tmp_path, warehouse, GOLD)
    with connect(warehouse) as con:   # idx-1 serves on day 10
        write_jsonl(tmp_path / "more.jsonl", [request("b", ["c-1"], ts=day(10))])
        ingest_logs(con, [str(tmp_path / "more.jsonl")])
    code, out, err = run_cli("rebuild", tmp_path / "idx-2.jsonl", "--version", "idx-2",
                             "--live-from", "2026-11-09")
    assert (code, err) == (0, "")
    assert ("no request of index idx-2 is loaded from 2026-11-09T00:00:00 on: the requests "
            "loaded of it were served 2026-11-08..2026-11-08 (is --live-from right?)") in out, out
    assert "in the future" not in out
    cli_world(tmp_path / "again", tmp_path / "again.duckdb", GOLD)
    code, out, err = run_cli("--warehouse", tmp_path / "again.duckdb", "rebuild",
                             tmp_path / "idx-2.jsonl", "--version", "idx-2",
                             "--live-from", "2099-11-08")
    assert code == 0 and "--live-from 2099-11-08T00:00:00 lies in the future" in out, out
    assert "no request of index" not in out   # nothing is loaded from then on


def test_cli_rebuild_says_when_it_replaces_the_manifest_a_reused_version_served_with(
        run_cli, tmp_path, warehouse):
    # one label ("prod") for every index: the rebuild replaced the manifest prod served with
    # before --live-from without a word, and no gold chunk could be carried from it
    write_jsonl(tmp_path / "gold.jsonl", GOLD[:1])
    write_jsonl(tmp_path / "old.jsonl", OLD_INDEX)
    write_jsonl(tmp_path / "new.jsonl", NEW_INDEX)
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r-{d}", ["c-1", "c-2"] if d < 8 else ["n-1", "c-2"], ts=day(d),
                index_version="prod") for d in range(6, 10)])
    with connect(warehouse) as con:
        ingest_index(con, str(tmp_path / "old.jsonl"), "prod")
        run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
            gold_version="v1")
    code, out, err = run_cli("rebuild", tmp_path / "new.jsonl", "--version", "prod",
                             "--live-from", "2026-11-08")
    assert (code, err) == (0, "")
    assert (f"index prod was loaded before from {tmp_path / 'old.jsonl'} and served requests "
            "2026-11-06..2026-11-07, before --live-from 2026-11-08T00:00:00: that manifest is "
            "replaced, so gold chunks cannot be carried from it") in out, out
    # the same manifest again, or a version first loaded by the rebuild: nothing to say
    code, out, err = run_cli("rebuild", tmp_path / "new.jsonl", "--version", "prod",
                             "--live-from", "2026-11-08")
    assert code == 0 and "was loaded before" not in out, out
    cli_world(tmp_path / "other", tmp_path / "other.duckdb", GOLD)
    code, out, err = run_cli("--warehouse", tmp_path / "other.duckdb", "rebuild",
                             tmp_path / "other" / "idx-2.jsonl", "--version", "idx-2",
                             "--live-from", "2026-11-08")
    assert code == 0 and "was loaded before" not in out, out


def test_cli_rebuild_writes_control_characters_of_ids_and_versions_as_codes(
        run_cli, tmp_path, warehouse):
    # a gold chunk ID, golden, gold set, version or manifest name holding ESC[2J would clear
    # the terminal of whoever runs `rebuild`
    from pipeline.warehouse import connect

    write_jsonl(tmp_path / "gold.jsonl", [golden("g\x1b[2J", ["c\x1b[31m"]),
                                          golden("g-ok", ["c-1"], question="Other?")])
    write_jsonl(tmp_path / "idx-1.jsonl", [{"chunk_id": "c\x1b[31m", "text": "alpha"},
                                           {"chunk_id": "c-1", "text": "beta"}])
    manifest = write_jsonl(tmp_path / "idx\x1b[2J.jsonl", [{"chunk_id": "c-1", "text": "beta"}])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("a", ["c-1"], ts=day(8), gold_id="g-ok", index_version="v\a2")])
    with connect(warehouse) as con:
        ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
        run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
            gold_version="G\x1b]0;t\a")
    code, out, err = run_cli("rebuild", manifest, "--version", "v\a2", "--live-from",
                             "2026-11-08")
    assert (code, err) == (0, "")
    assert not any(ch in out for ch in "\x1b\a"), out
    assert "index v\\x072 live from" in out and "idx\\x1b[2J.jsonl" in out
    assert ("gone: chunk c\\x1b[31m of golden g\\x1b[2J (gold set G\\x1b]0;t\\x07)"
            in out), out


def test_late_logs_of_another_index_before_the_rebuild_carry_from_it_as_a_fresh_build(
        con, tmp_path):
    # day 1 served by zeta, day 2 by alpha (its logs arrive late), the rebuilt index from day
    # 3: the gold chunk's content is alpha's, which served last, whatever the order of loads
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-1"])])
    write_jsonl(tmp_path / "zeta.jsonl", [{"chunk_id": "c-1", "text": "zeta text"}])
    write_jsonl(tmp_path / "alpha.jsonl", [{"chunk_id": "c-1", "text": "alpha text"}])
    write_jsonl(tmp_path / "new.jsonl", [{"chunk_id": "n-1", "text": "alpha text"},
                                         {"chunk_id": "n-2", "text": "zeta text"}])
    write_jsonl(tmp_path / "d1.jsonl", [request("r1", ["c-1"], ts=day(1), index_version="zeta")])
    write_jsonl(tmp_path / "d2.jsonl", [request("r2", ["c-1"], ts=day(2),
                                                index_version="alpha")])
    write_jsonl(tmp_path / "d3.jsonl", [request("r3", ["n-1"], ts=day(3), index_version="new")])
    live = datetime(2026, 11, 3)

    def loaded(con, order: list[str]) -> list[tuple]:
        ingest_index(con, str(tmp_path / "zeta.jsonl"), "zeta")
        ingest_index(con, str(tmp_path / "alpha.jsonl"), "alpha")
        ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
        for step in order:
            if step == "rebuild":
                rebuild(con, "new", str(tmp_path / "new.jsonl"), live)
            else:
                run(con, logs=[str(tmp_path / f"{step}.jsonl")])
        run(con)
        return con.sql("SELECT request_id, recall FROM request_scores ORDER BY 1").fetchall()

    late = loaded(con, ["d1", "d3", "rebuild", "d2"])
    assert ("v1", "new", "c-1", "n-1", "content_hash", "alpha") in carried(con)
    from pipeline.warehouse import connect
    with connect(tmp_path / "fresh.duckdb") as fresh:
        assert loaded(fresh, ["d1", "d2", "d3", "rebuild"]) == late == [
            ("r1", 1.0), ("r2", 1.0), ("r3", 1.0)]


def test_what_a_rebuild_carried_does_not_change_with_later_indexes_or_other_manifests(
        con, tmp_path):
    # idx-1 served and lacks c-9: idx-2 knows nothing of c-9's content. A later rebuild
    # (idx-3 holds a c-9) and an unrelated manifest are no source for idx-2
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-1", "c-9"])])
    write_jsonl(tmp_path / "idx1.jsonl", [{"chunk_id": "c-1", "text": "alpha"}])
    write_jsonl(tmp_path / "idx2.jsonl", [{"chunk_id": "m-1", "text": "alpha"},
                                          {"chunk_id": "q-9", "text": "zzz"}])
    write_jsonl(tmp_path / "idx3.jsonl", [{"chunk_id": "c-9", "text": "zzz"},
                                          {"chunk_id": "n-1", "text": "alpha"}])
    write_jsonl(tmp_path / "staging.jsonl", [{"chunk_id": "c-9", "text": "zzz"}])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("r1", ["c-1"], ts=day(1), index_version="idx-1"),
        request("r2", ["m-1", "q-9"], ts=day(3), index_version="idx-2"),
        request("r3", ["n-1", "c-9"], ts=day(5), index_version="idx-3")])
    ingest_index(con, str(tmp_path / "idx1.jsonl"), "idx-1")
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    rebuild(con, "idx-2", str(tmp_path / "idx2.jsonl"), datetime(2026, 11, 3))
    rebuild(con, "idx-3", str(tmp_path / "idx3.jsonl"), datetime(2026, 11, 5))
    run(con)
    before = snapshot(con)
    assert ("v1", "idx-2", "c-9", "c-9", "unknown", None) in carried(con)
    assert recall_of(con, "r2") == 0.5

    rebuild(con, "idx-2", str(tmp_path / "idx2.jsonl"), datetime(2026, 11, 3))
    assert snapshot(con) == before
    ingest_index(con, str(tmp_path / "staging.jsonl"), "staging")
    run(con)
    assert recall_of(con, "r2") == 0.5
    assert [row for row in carried(con) if row[1] == "idx-2"] == [
        ("v1", "idx-2", "c-1", "m-1", "content_hash", "idx-1"),
        ("v1", "idx-2", "c-9", "c-9", "unknown", None)]


def test_logs_that_start_after_a_bare_live_from_day_still_carry_from_the_old_index(
        con, tmp_path):
    # --live-from 2026-11-08 (midnight) while the switch came mid-morning: the old index's
    # first logged request is after live_from, yet it came before the new one: its content
    # is carried
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-1"])])
    write_jsonl(tmp_path / "idx1.jsonl", [{"chunk_id": "c-1", "text": "alpha"}])
    write_jsonl(tmp_path / "idx2.jsonl", [{"chunk_id": "n-1", "text": "alpha"}])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("old", ["c-1"], ts="2026-11-08T01:00:00Z", index_version="idx-1"),
        request("new", ["n-1"], ts="2026-11-08T07:00:00Z", index_version="idx-2")])
    ingest_index(con, str(tmp_path / "idx1.jsonl"), "idx-1")
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    result = rebuild(con, "idx-2", str(tmp_path / "idx2.jsonl"), datetime(2026, 11, 8))
    assert result.carried["content_hash"] == 1
    assert ("v1", "idx-2", "c-1", "n-1", "content_hash", "idx-1") in carried(con)
    assert (recall_of(con, "old"), recall_of(con, "new")) == (1.0, 1.0)


@pytest.mark.parametrize("old, new, ahead", [("idx-1", "idx-2", "idx-3"),
                                             ("idx-v9", "idx-v10", "idx-v11")])
def test_the_next_index_loaded_ahead_is_no_source_when_the_logs_start_after_the_rebuild(
        con, tmp_path, old, new, ahead):
    # the logs start after the rebuild to `new`, so no manifest's index served before it; the
    # manifest of the next index (`ahead`: the rebuilt content, and c-1 re-used for other
    # content) loaded ahead was taken as the old index by its name, c-1 carried as gone, c-3
    # and c-4 (rewritten by the rebuild) as found, and the requests scored 0.5
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-1", "c-2"]),
                                          golden("g-2", ["c-3", "c-4"], question="Fee?")])
    old_chunks = [{"chunk_id": "c-1", "text": "alpha"}, {"chunk_id": "c-2", "text": "beta"},
                  {"chunk_id": "c-3", "text": "gamma"}, {"chunk_id": "c-4", "text": "delta"}]
    new_chunks = [{"chunk_id": "n-1", "text": "alpha"}, {"chunk_id": "c-2", "text": "beta"},
                  {"chunk_id": "c-3", "text": "gamma, rewritten"},
                  {"chunk_id": "c-4", "text": "delta, rewritten"}]
    write_jsonl(tmp_path / "old.jsonl", old_chunks)
    write_jsonl(tmp_path / "new.jsonl", new_chunks)
    write_jsonl(tmp_path / "ahead.jsonl", [*new_chunks, {"chunk_id": "c-1", "text": "zeta"}])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r{n}", ["n-1", "c-2"], ts=day(n), index_version=new) for n in (8, 9)])
    ingest_index(con, str(tmp_path / "old.jsonl"), old)
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    rebuild(con, new, str(tmp_path / "new.jsonl"), LIVE)
    expected = [("v1", new, "c-1", "n-1", "content_hash", old),
                ("v1", new, "c-2", "c-2", "same_id", old),
                ("v1", new, "c-3", None, "gone", old),
                ("v1", new, "c-4", None, "gone", old)]
    assert carried(con) == expected
    before = snapshot(con)
    ingest_index(con, str(tmp_path / "ahead.jsonl"), ahead)   # the next index, ahead
    run(con)
    assert carried(con) == expected
    assert (recall_of(con, "r8"), recall_of(con, "r9")) == (1.0, 1.0)
    scores = ("request_scores", "request_cutoffs", "miss_causes", "window_metrics",
              "drift_events")
    after = snapshot(con)
    assert [after[t] for t in scores] == [before[t] for t in scores]


def before_after(con, tmp_path, gold: list[dict], logs: list[dict]) -> dict:
    """The report's comparison of the rebuild to idx-2 on day 8 of these logs and gold set."""
    write_jsonl(tmp_path / "gold.jsonl", gold)
    write_jsonl(tmp_path / "idx-1.jsonl", OLD_INDEX)
    write_jsonl(tmp_path / "idx-2.jsonl", NEW_INDEX)
    write_jsonl(tmp_path / "logs.jsonl", logs)
    ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    rebuild(con, "idx-2", str(tmp_path / "idx-2.jsonl"), LIVE)
    run(con)
    prepare(con)
    [r] = rebuild_section(con, Scope("ids", 5, "v1"), "5 (served)")["rebuilds"]
    return r


def test_before_after_of_recalls_all_0_or_1_are_proportions_not_a_point(con, tmp_path):
    # one gold chunk per golden, found by every request on both sides: a t-interval gave each
    # side [1, 1] and the difference [0, 0]
    from statsmodels.stats.proportion import proportion_confint

    r = before_after(con, tmp_path, [golden("g-1", ["c-1"])], [
        request(f"b-{d}", ["c-1"], ts=day(d)) for d in range(1, 8)] + [
        request(f"a-{d}", ["n-1"], ts=day(d), index_version="idx-2") for d in range(8, 11)])
    before, after = r["sides"]
    assert (before["n"], before["mean"], after["n"], after["mean"]) == (7, 1.0, 3, 1.0)
    for side in (before, after):
        low, high = proportion_confint(side["n"], side["n"], 0.05, method="wilson")
        assert (side["low"], side["high"]) == (pytest.approx(low), pytest.approx(high))
    # Newcombe's hybrid of the two Wilson intervals
    assert r["difference"]["delta"] == 0.0
    assert r["difference"]["low"] == pytest.approx(-(1.0 - after["low"]))
    assert r["difference"]["high"] == pytest.approx(1.0 - before["low"])


def test_before_after_with_one_side_all_0_or_1_counts_that_sides_uncertainty(con, tmp_path):
    # before: recall 1, 0.5, 0 each day (a mean, t); after: every request found its one gold
    # chunk (a proportion, Wilson). Welch saw no spread after and took the difference's
    # interval from the before side alone, as if three requests after were a certainty.
    from statsmodels.stats.proportion import proportion_confint

    r = before_after(con, tmp_path, GOLD, [
        request(f"b-{d}-{i}", chunks, ts=day(d, 10 + i)) for d in range(1, 8)
        for i, chunks in enumerate((["c-1", "c-2"], ["c-1"], ["x"]))] + [
        request(f"a-{d}", ["n-1", "c-2"], ts=day(d), index_version="idx-2")
        for d in range(8, 11)])
    before, after = r["sides"]
    assert (before["n"], before["mean"], after["n"], after["mean"]) == (21, 0.5, 3, 1.0)
    t_low, t_high = adjusted(BEFORE_RECALLS)
    w_low, _ = proportion_confint(3, 3, 0.05, method="wilson")
    assert (before["low"], before["high"]) == (pytest.approx(t_low), pytest.approx(t_high))
    assert after["low"] == pytest.approx(w_low)
    # the MOVER combination of the two sides' own intervals, as drift uses
    d = r["difference"]
    assert d["delta"] == 0.5
    assert d["low"] == pytest.approx(0.5 - ((1.0 - w_low) ** 2 + (t_high - 0.5) ** 2) ** 0.5)
    assert d["high"] == pytest.approx(0.5 + (0.5 - t_low))
    assert d["low"] < 0.5 - (t_high - 0.5)   # wider than the before side's alone


def test_before_after_of_recalls_all_equal_are_proportions_at_their_mean(con, tmp_path):
    # every request before found one of its two gold chunks (0.5) and every one after both:
    # the before side's t-interval was [0.5, 0.5] and the difference's as narrow as the after
    # side alone made it
    from statsmodels.stats.proportion import proportion_confint

    r = before_after(con, tmp_path, GOLD, [
        request(f"b-{d}", ["c-1"], ts=day(d)) for d in range(1, 8)] + [
        request(f"a-{d}", ["n-1", "c-2"], ts=day(d), index_version="idx-2")
        for d in range(8, 11)])
    before, after = r["sides"]
    assert (before["n"], before["mean"], after["n"], after["mean"]) == (7, 0.5, 3, 1.0)
    low, high = proportion_confint(3.5, 7, 0.05, method="wilson")
    assert (before["low"], before["high"]) == (pytest.approx(low), pytest.approx(high))
    w_low, _ = proportion_confint(3, 3, 0.05, method="wilson")
    d = r["difference"]
    assert d["low"] == pytest.approx(0.5 - ((1.0 - w_low) ** 2 + (high - 0.5) ** 2) ** 0.5)
    assert d["high"] == pytest.approx(0.5 + (0.5 - low))


def test_a_before_after_side_near_1_has_its_interval_clipped_as_the_daily_rows(con, tmp_path):
    # after the rebuild six requests found 1, 1, 1, 1, 1 and 0.5 of their gold: the side's
    # interval reached above 1 in the report (the t-interval of the recalls alone, 0.917 +-
    # 2.571 x 0.083, 1.131) where window_metrics clips its rows to [0, 1]
    r = before_after(con, tmp_path, GOLD, [
        request(f"b-{d}-{i}", chunks, ts=day(d, 10 + i)) for d in range(1, 8)
        for i, chunks in enumerate((["c-1", "c-2"], ["c-1"], ["x"]))] + [
        request(f"a-{d}-{i}", ["n-1", "c-2"] if (d, i) != (8, 1) else ["n-1"],
                ts=day(d, 10 + i), index_version="idx-2")
        for d in range(8, 11) for i in range(2)])
    _, after = r["sides"]
    recalls = [1, 1, 1, 1, 1, 0.5]
    mean = sum(recalls) / 6
    t_low, t_high = adjusted(recalls)
    assert t_high > 1.0
    assert (after["n"], after["mean"]) == (6, pytest.approx(mean))
    assert (after["low"], after["high"]) == (pytest.approx(t_low), 1.0)


def test_the_before_after_difference_of_a_tiny_side_stays_within_minus_1_and_1(con, tmp_path):
    # before: every request found one of its two gold chunks (0.5, a proportion); after: two
    # requests on one day found 1 and 0.5 (a t-interval on 1 degree of freedom, [-2.42, 3.67]
    # unclipped). The side showed [0, 1], but the difference combined the unclipped interval
    # and read [-2.93, 3.18] for two recalls, whose difference lies in [-1, 1].
    r = before_after(con, tmp_path, GOLD, [
        request(f"b-{d}", ["c-1"], ts=day(d)) for d in range(1, 8)] + [
        request(f"a-8-{i}", chunks, ts=day(8, 10 + i), index_version="idx-2")
        for i, chunks in enumerate((["n-1", "c-2"], ["n-1"]))])
    before, after = r["sides"]
    assert (after["n"], after["mean"], after["low"], after["high"]) == (2, 0.75, 0.0, 1.0)
    d = r["difference"]
    assert -1.0 <= d["low"] <= d["delta"] <= d["high"] <= 1.0
    # the MOVER combination of the sides' intervals as the section shows them
    assert d["low"] == pytest.approx(
        d["delta"] - ((after["mean"] - after["low"]) ** 2
                      + (before["high"] - before["mean"]) ** 2) ** 0.5)
    assert d["high"] == pytest.approx(
        d["delta"] + ((after["high"] - after["mean"]) ** 2
                      + (before["mean"] - before["low"]) ** 2) ** 0.5)


def test_before_after_sides_stop_at_the_next_and_previous_go_live(con, tmp_path):
    # idx-1 days 1-7, idx-2 days 8-10 (recall 1), idx-3 days 11-17 (recall 0): the side after
    # idx-2 pooled days 8-14, idx-3's days in it (mean 3/7), and the side before idx-3 held
    # idx-1's days
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-1"])])
    logs = [request(f"r{d}", ["c-1"] if d < 11 else ["x"], ts=day(d),
                    index_version="idx-1" if d < 8 else "idx-2" if d < 11 else "idx-3")
            for d in range(1, 18)]
    write_jsonl(tmp_path / "logs.jsonl", logs)
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    prepare(con)
    found = rebuild_section(con, Scope("ids", 5, "v1"), "5 (served)")["rebuilds"]
    sides = {r["index_version"]: {s["side"]: s for s in r["sides"]} for r in found}
    after_2, before_3 = sides["idx-2"]["after"], sides["idx-3"]["before"]
    assert (after_2["n"], after_2["mean"], str(after_2["last"])) == (3, 1.0, "2026-11-10")
    assert (before_3["n"], before_3["mean"], str(before_3["first"])) == (3, 1.0, "2026-11-08")
    assert (sides["idx-2"]["before"]["n"], sides["idx-3"]["after"]["n"]) == (7, 7)



def test_before_after_sides_hold_only_days_the_compared_indexes_served(con, tmp_path):
    # idx-2 is tried alone on day 3 (recall 0), idx-1 serves the other days to 7 (recall 1),
    # idx-2 goes live on day 8 (recall 0.5 with its carried chunk found half the time) and is
    # rolled back to idx-1 on day 11 without a rebuild recorded: the side after held idx-1's
    # days 11-14 again, the side before idx-2's own trial day
    logs = []
    for d in range(1, 15):
        if d == 3:
            logs.append(request(f"t-{d}", ["x"], ts=day(d), index_version="idx-2"))
        elif 8 <= d < 11:
            logs += [request(f"n-{d}-{i}", ["n-1" if i else "x"], ts=day(d, 10 + i),
                             index_version="idx-2") for i in range(2)]
        else:
            logs.append(request(f"o-{d}", ["c-1"], ts=day(d)))
    sides = {s["side"]: s for s in before_after(con, tmp_path, [golden("g-1", ["c-1"])],
                                                logs)["sides"]}
    after, before = sides["after"], sides["before"]
    assert (after["n"], after["mean"], str(after["first"]), str(after["last"])) == (
        6, 0.5, "2026-11-08", "2026-11-10")
    assert (before["n"], before["mean"], str(before["first"]), str(before["last"])) == (
        4, 1.0, "2026-11-04", "2026-11-07")

def test_a_rollback_to_the_old_index_keeps_what_was_carried_to_the_one_between(con, tmp_path):
    # idx-1 to day 7, idx-2 (c-1 re-IDed n-1) from day 8, back to idx-1 from day 15: carrying
    # to idx-1 as a rebuild of day 15 made idx-1 "newer" than idx-2, and the next carry left
    # idx-2 with no earlier manifest, its gold chunk unknown and every request a miss
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-1"])])
    write_jsonl(tmp_path / "idx-1.jsonl", [{"chunk_id": "c-1", "text": "alpha"}])
    write_jsonl(tmp_path / "idx-2.jsonl", [{"chunk_id": "n-1", "text": "alpha"}])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"a-{d}", ["c-1"], ts=day(d)) for d in range(1, 8)] + [
        request(f"b-{d}", ["n-1"], ts=day(d), index_version="idx-2") for d in range(8, 15)] + [
        request(f"c-{d}", ["c-1"], ts=day(d)) for d in range(15, 17)])
    ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    rebuild(con, "idx-2", str(tmp_path / "idx-2.jsonl"), LIVE)
    rebuild(con, "idx-1", str(tmp_path / "idx-1.jsonl"), datetime(2026, 11, 15))
    run(con)

    assert carried(con) == [
        ("v1", "idx-1", "c-1", "c-1", "same_id", "idx-2"),   # back, via what c-1 was in idx-2
        ("v1", "idx-2", "c-1", "n-1", "content_hash", "idx-1"),
    ]
    assert con.sql("SELECT DISTINCT recall FROM request_scores").fetchall() == [(1.0,)]


def test_a_rollback_to_the_first_index_leaves_what_it_served_before_as_it_was(con, tmp_path):
    # idx-1 (never recorded as a rebuild) to day 7, idx-2 from day 8, back to idx-1 from day
    # 15. The gold chunk c-9 is unknown to idx-1; idx-2 uses the ID c-9 for alpha, which idx-1
    # holds as y-1. The rollback carries c-9 back through idx-2 as y-1, and that carry was
    # applied to every request of idx-1: the days 1-7, served before any rebuild, went from
    # recall 0 to 1 though neither they nor the gold set changed
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-9"])])
    write_jsonl(tmp_path / "idx-1.jsonl", [{"chunk_id": "y-1", "text": "alpha"}])
    write_jsonl(tmp_path / "idx-2.jsonl", [{"chunk_id": "c-9", "text": "alpha"}])
    stints = {"s1": [request(f"a-{d}", ["y-1"], ts=day(d)) for d in range(1, 8)],
              "s2": [request(f"b-{d}", ["c-9"], ts=day(d), index_version="idx-2")
                     for d in range(8, 15)],
              "s3": [request(f"c-{d}", ["y-1"], ts=day(d)) for d in range(15, 17)]}
    for name, logs in stints.items():
        write_jsonl(tmp_path / f"{name}.jsonl", logs)

    def scores(con) -> dict[str, float]:
        return dict(con.sql("SELECT request_id, recall FROM request_scores").fetchall())

    ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
    run(con, logs=[str(tmp_path / "s1.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    first = scores(con)
    assert set(first.values()) == {0.0}
    run(con, logs=[str(tmp_path / "s2.jsonl")])
    rebuild(con, "idx-2", str(tmp_path / "idx-2.jsonl"), LIVE)
    run(con, logs=[str(tmp_path / "s3.jsonl")])
    rebuild(con, "idx-1", str(tmp_path / "idx-1.jsonl"), datetime(2026, 11, 15))
    run(con)
    after = scores(con)

    assert {r: after[r] for r in first} == first   # the first stint as it was
    assert {r: s for r, s in after.items() if r[0] != "a"} == {   # the rollback's carry
        **{f"b-{d}": 1.0 for d in range(8, 15)}, **{f"c-{d}": 1.0 for d in range(15, 17)}}
    before = snapshot(con)
    rebuild(con, "idx-1", str(tmp_path / "idx-1.jsonl"), datetime(2026, 11, 15))
    run(con)
    assert snapshot(con) == before
    with connect(tmp_path / "fresh.duckdb") as fresh:   # every log first, same rebuilds
        ingest_index(fresh, str(tmp_path / "idx-1.jsonl"), "idx-1")
        run(fresh, logs=[str(tmp_path / f"{n}.jsonl") for n in stints],
            gold=str(tmp_path / "gold.jsonl"), gold_version="v1")
        rebuild(fresh, "idx-2", str(tmp_path / "idx-2.jsonl"), LIVE)
        rebuild(fresh, "idx-1", str(tmp_path / "idx-1.jsonl"), datetime(2026, 11, 15))
        run(fresh)
        assert scores(fresh) == after


@pytest.mark.parametrize("old_days, old_hour", [(range(10, 13), 11), (range(11, 13), 10)],
                         ids=["old-logged-later-that-day", "old-logged-from-the-next-day"])
def test_logs_that_start_during_a_canary_carry_from_the_index_it_replaces(
        con, tmp_path, old_days, old_hour):
    # idx-2 went live on day 8 beside idx-1 (a canary); the logs start on day 10 with idx-2,
    # and idx-1's first logged request comes after it: later that day, or on the next day
    # (then idx-1 was taken for a newer index, nothing was carried and every request of idx-2
    # missed). idx-1 stopped serving while idx-2 went on: it is the index idx-2 replaced
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-1"])])
    write_jsonl(tmp_path / "idx-1.jsonl", [{"chunk_id": "c-1", "text": "alpha"}])
    write_jsonl(tmp_path / "idx-2.jsonl", [{"chunk_id": "n-1", "text": "alpha"}])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"new-{d}", ["n-1"], ts=day(d, 9), index_version="idx-2")
        for d in range(10, 15)] + [
        request(f"old-{d}", ["c-1"], ts=day(d, old_hour)) for d in old_days])
    ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    rebuild(con, "idx-2", str(tmp_path / "idx-2.jsonl"), LIVE)

    assert carried(con) == [("v1", "idx-2", "c-1", "n-1", "content_hash", "idx-1")]
    assert con.sql("SELECT DISTINCT recall FROM request_scores").fetchall() == [(1.0,)]
    # and the report compares around idx-2's rebuild alone: idx-1 took over from nothing
    prepare(con)
    section = rebuild_section(con, Scope("ids", 5, "v1"), "5 (served)")
    assert [r["index_version"] for r in section["rebuilds"]] == ["idx-2"]


@pytest.mark.parametrize("with_logs", [True, False])
def test_a_rebuild_recorded_before_any_gold_set_is_carried_when_one_is_loaded(
        tmp_path, with_logs):
    # the rebuild was stored only as carried rows, and with no gold set there were none: the
    # gold set loaded later was never carried, and its re-IDed chunk missed on every request
    from pipeline import api

    warehouse = tmp_path / "w.duckdb"
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-1"])])
    write_jsonl(tmp_path / "idx-1.jsonl", [{"chunk_id": "c-1", "text": "alpha"}])
    write_jsonl(tmp_path / "idx-2.jsonl", [{"chunk_id": "n-1", "text": "alpha"}])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("old", ["c-1"], ts=day(7)),
        request("new", ["n-1"], ts=day(8), index_version="idx-2")])
    api.ingest_index(warehouse, str(tmp_path / "idx-1.jsonl"), "idx-1")
    if with_logs:
        api.ingest_logs(warehouse, [str(tmp_path / "logs.jsonl")])
    result = api.rebuild(warehouse, "idx-2", str(tmp_path / "idx-2.jsonl"), "2026-11-08")
    assert result["days_rescored"] == [] and result["gold_loaded"] is False

    api.ingest_gold(warehouse, str(tmp_path / "gold.jsonl"), "v1")
    api.run(warehouse, logs=[str(tmp_path / "logs.jsonl")])

    with connect(warehouse, read_only=True) as con:
        assert carried(con) == [("v1", "idx-2", "c-1", "n-1", "content_hash", "idx-1")]
        assert con.sql("SELECT request_id, recall FROM request_scores ORDER BY 1").fetchall() \
            == [("new", 1.0), ("old", 1.0)]


def test_cli_rebuild_without_a_gold_set_says_it_is_recorded(run_cli, tmp_path, warehouse):
    write_jsonl(tmp_path / "idx-1.jsonl", [{"chunk_id": "c-1", "text": "alpha"}])
    write_jsonl(tmp_path / "idx-2.jsonl", [{"chunk_id": "n-1", "text": "alpha"}])
    write_jsonl(tmp_path / "logs.jsonl", [request("old", ["c-1"], ts=day(7))])
    assert run_cli("ingest", "logs", tmp_path / "logs.jsonl")[0] == 0
    code, out, err = run_cli("rebuild", tmp_path / "idx-2.jsonl", "--version", "idx-2",
                             "--live-from", "2026-11-08")
    assert (code, err) == (0, "")
    assert ("no gold set is loaded yet: the rebuild is recorded, and its gold chunks are "
            "carried when one is (`recallwatch ingest gold PATH --version V`)") in out


def second_go_live_world(tmp_path, between: str) -> dict[str, str]:
    """idx-1 to day 7, idx-2 (c-1 re-IDed n-1, the ID c-1 reused for other content) from day
    8, then `between` (idx-1 again, or idx-3: c-1 re-IDed m-1) from day 15, and idx-2 again
    from day 22: the gold set, the three manifests and the logs. Returns each index's ID of
    the gold chunk."""
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-1"])])
    chunks = {"idx-1": "c-1", "idx-2": "n-1", "idx-3": "m-1"}
    for version, chunk in chunks.items():
        other = {"chunk_id": "c-1" if version == "idx-2" else f"z-{version}", "text": "zeta"}
        write_jsonl(tmp_path / f"{version}.jsonl", [{"chunk_id": chunk, "text": "alpha"}, other])
    spans = [("idx-1", range(1, 8)), ("idx-2", range(8, 15)), (between, range(15, 22)),
             ("idx-2", range(22, 24))]
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"{version}-{d}", [chunks[version]], ts=day(d), index_version=version)
        for version, days in spans for d in days])
    return chunks


@pytest.mark.parametrize("between", ["idx-1", "idx-3"])
def test_an_index_that_goes_live_a_second_time_keeps_what_was_carried_to_it(
        con, tmp_path, between):
    # idx-1 to day 7, idx-2 (c-1 re-IDed n-1) from day 8, then idx-1 again (a rollback) or
    # idx-3 (re-IDed m-1) from day 15, and back to idx-2 from day 22: the second go-live of
    # idx-2 replaced its first, so the index between was carried from what c-1 is in idx-2
    # when it is not a carry (other content), and every request it served missed
    chunks = second_go_live_world(tmp_path, between)
    ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    rebuild(con, "idx-2", str(tmp_path / "idx-2.jsonl"), LIVE)
    rebuild(con, between, str(tmp_path / f"{between}.jsonl"), datetime(2026, 11, 15))
    again = rebuild(con, "idx-2", str(tmp_path / "idx-2.jsonl"), datetime(2026, 11, 22))
    run(con)

    assert (again.live_from, again.live_again) == (LIVE, datetime(2026, 11, 22))
    assert con.sql("SELECT DISTINCT recall FROM request_scores").fetchall() == [(1.0,)]
    assert {row[1:5] for row in carried(con)} == {
        ("idx-2", "c-1", "n-1", "content_hash"),
        (between, "c-1", chunks[between], "same_id" if between == "idx-1" else "content_hash")}


@pytest.mark.parametrize("between", ["idx-1", "idx-3"])
def test_a_second_go_live_recorded_before_the_logs_keeps_the_first(con, tmp_path, between):
    # the same history as above, its rebuilds recorded on a fresh warehouse before any log was
    # loaded (the rebuild history first, then the logs caught up): no request of idx-2 was
    # loaded yet, so its second go-live (day 22, after idx-1 or idx-3 went live on day 15)
    # replaced its first (day 8) as a correction; idx-2's first stint was then served before
    # its rebuild and compared as the gold IDs are, and the index between was carried from
    # what c-1 is in idx-2 (other content): every request of both missed, where the same
    # commands after the logs score them all 1
    chunks = second_go_live_world(tmp_path, between)
    ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    rebuild(con, "idx-2", str(tmp_path / "idx-2.jsonl"), LIVE)
    rebuild(con, between, str(tmp_path / f"{between}.jsonl"), datetime(2026, 11, 15))
    again = rebuild(con, "idx-2", str(tmp_path / "idx-2.jsonl"), datetime(2026, 11, 22))
    run(con, logs=[str(tmp_path / "logs.jsonl")])

    assert (again.live_from, again.live_again) == (LIVE, datetime(2026, 11, 22))
    assert con.sql("SELECT index_version, live_from FROM rebuilds ORDER BY 2").fetchall() == [
        ("idx-2", LIVE), (between, datetime(2026, 11, 15))]
    assert con.sql("SELECT DISTINCT recall FROM request_scores").fetchall() == [(1.0,)]
    assert {row[1:5] for row in carried(con)} == {
        ("idx-2", "c-1", "n-1", "content_hash"),
        (between, "c-1", chunks[between], "same_id" if between == "idx-1" else "content_hash")}


def test_a_mistyped_go_live_is_corrected_though_another_rebuild_was_recorded_since(con,
                                                                                 tmp_path):
    # the logs loaded (idx-1 days 1-14, idx-2 15-21, idx-3 22-23), idx-3 recorded going live
    # on day 8 by mistake, idx-2 on day 15, then idx-3 on day 22: the logs show idx-3 served
    # nothing before day 22, so this is a correction, not its going live again after idx-2
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-1"])])
    chunks = {"idx-1": "c-1", "idx-2": "n-1", "idx-3": "m-1"}
    for version, chunk in chunks.items():
        write_jsonl(tmp_path / f"{version}.jsonl", [{"chunk_id": chunk, "text": "alpha"}])
    spans = [("idx-1", range(1, 15)), ("idx-2", range(15, 22)), ("idx-3", range(22, 24))]
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"{version}-{d}", [chunks[version]], ts=day(d), index_version=version)
        for version, days in spans for d in days])
    ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    rebuild(con, "idx-3", str(tmp_path / "idx-3.jsonl"), datetime(2026, 11, 8))
    rebuild(con, "idx-2", str(tmp_path / "idx-2.jsonl"), datetime(2026, 11, 15))
    rebuild(con, "idx-3", str(tmp_path / "idx-3.jsonl"), datetime(2026, 11, 22))

    assert con.sql("SELECT index_version, live_from FROM rebuilds ORDER BY 2").fetchall() == [
        ("idx-2", datetime(2026, 11, 15)), ("idx-3", datetime(2026, 11, 22))]
    assert ("idx-3", "c-1", "m-1", "content_hash", "idx-2") in {
        row[1:] for row in carried(con)}


def test_a_smoke_test_request_of_a_later_index_does_not_make_it_the_one_replaced(con, tmp_path):
    # idx-1 served to day 9, idx-2 from day 10, idx-3 from day 15 — but one smoke-test
    # request of idx-3 late on day 9 made it the last to serve before idx-2 went live, and
    # idx-2 was carried from what c-1 is in idx-3 (an ID reused for other content); the index
    # replaced is the one that served most in the day before
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-1"])])
    write_jsonl(tmp_path / "idx-1.jsonl", [{"chunk_id": "c-1", "text": "alpha"}])
    write_jsonl(tmp_path / "idx-2.jsonl", [{"chunk_id": "n-1", "text": "alpha"},
                                           {"chunk_id": "z-1", "text": "zeta"}])
    write_jsonl(tmp_path / "idx-3.jsonl", [{"chunk_id": "m-1", "text": "alpha"},
                                           {"chunk_id": "c-1", "text": "zeta"}])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"a-{d}-{h}", ["c-1"], ts=day(d, h)) for d in range(1, 10)
        for h in range(8, 20)] + [
        request("smoke", ["m-1"], ts=day(9, 23), index_version="idx-3")] + [
        request(f"b-{d}", ["n-1"], ts=day(d), index_version="idx-2") for d in range(10, 15)] + [
        request(f"c-{d}", ["m-1"], ts=day(d), index_version="idx-3") for d in range(15, 17)])
    ingest_index(con, str(tmp_path / "idx-1.jsonl"), "idx-1")
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    rebuild(con, "idx-2", str(tmp_path / "idx-2.jsonl"), datetime(2026, 11, 10))
    rebuild(con, "idx-3", str(tmp_path / "idx-3.jsonl"), datetime(2026, 11, 15))
    run(con)

    assert carried(con) == [
        ("v1", "idx-2", "c-1", "n-1", "content_hash", "idx-1"),
        ("v1", "idx-3", "c-1", "m-1", "content_hash", "idx-2"),
    ]
    assert con.sql("SELECT DISTINCT recall FROM request_scores").fetchall() == [(1.0,)]


def test_a_side_without_a_whole_day_says_why_not_dates_backwards(con, tmp_path):
    # idx-2 went live on day 8 at 11:00 and idx-3 the same day at 15:00: idx-2's after side
    # read "2026-11-09 … 2026-11-08" and "a side has no scored requests"
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["c-1"])])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r{d}-{h}", ["c-1"], ts=day(d, h),
                index_version="idx-1" if (d, h) < (8, 11) else
                "idx-2" if (d, h) < (8, 15) else "idx-3")
        for d in range(1, 12) for h in (10, 12, 16)])
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    prepare(con)
    found = rebuild_section(con, Scope("ids", 5, "v1"), "5 (served)")["rebuilds"]
    after = next(s for s in next(r for r in found if r["index_version"] == "idx-2")["sides"]
                 if s["side"] == "after")
    assert (after["first"], after["last"], after["n"]) == (None, None, 0)
    html = write_report(con, tmp_path / "report").read_text(encoding="utf-8")
    assert "no whole day of this index alone (another went live or took over that day)" in html
