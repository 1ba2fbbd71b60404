"""The `passages` route (pipeline/routes/passages.py, sql/route_passages*.sql): RAGAS
NonLLMContextRecall semantics pinned rule by rule (strictly above 0.5 normalized Levenshtein
similarity, the best place among covering chunks, recall@k at the cutoffs), chunk text from the
manifest, its rows apart from the ids route's, and its similarity against a plain-Python
Levenshtein."""

from __future__ import annotations

import random
import unicodedata

import pyarrow as pa
import pytest

from pipeline.config import in_force, put_in_force, resolve
from pipeline.ingest import ingest_gold, ingest_index, ingest_logs
from pipeline.routes import register
from pipeline.routes.passages import (
    SIMILARITY_THRESHOLD,
    PassagesRoute,
    bounded_batches,
    covering_pairs,
    similarities,
)
from pipeline.score import score
from tests.conftest import golden, request, snapshot, write_jsonl

BOTH = ("ids", "passages")


def chunk(chunk_id: str, text: str | None = None) -> dict:
    return {"chunk_id": chunk_id} if text is None else {"chunk_id": chunk_id, "text": text}


def load(con, tmp_path, goldens, records, *, manifest=None, cutoffs=(1, 3, 5, 10)):
    write_jsonl(tmp_path / "gold.jsonl", goldens)
    write_jsonl(tmp_path / "logs.jsonl", records)
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    if manifest is not None:
        write_jsonl(tmp_path / "manifest.jsonl", manifest)
        ingest_index(con, str(tmp_path / "manifest.jsonl"), "idx-1")
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])
    return score(con, routes=BOTH, cutoffs=cutoffs)


def scores(con, route="passages") -> dict[str, tuple]:
    rows = con.execute("SELECT request_id, status, needed, covered, recall FROM request_scores "
                       "WHERE route = $route", {"route": route}).fetchall()
    return {r[0]: r[1:] for r in rows}


def at_k(con, request_id: str) -> dict[int, float]:
    return dict(con.execute("SELECT k, recall FROM recall_at_k WHERE route = 'passages' "
                            "AND request_id = $r", {"r": request_id}).fetchall())


def levenshtein(a: str, b: str) -> int:
    """Plain dynamic-programming edit distance (insert, delete, substitute cost 1)."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def reference_similarity(a: str, b: str) -> float:
    """RAGAS's NonLLM default: 1 - distance / max(len), 1 for two empty strings."""
    longest = max(len(a), len(b))
    return 1.0 - levenshtein(a, b) / longest if longest else 1.0


def test_similarity_matches_hand_computed_normalized_levenshtein():
    pairs = [("abcd", "abxy"), ("kitten", "sitting"), ("flaw", "lawn"), ("", ""), ("a", ""),
             ("minimum balance", "minimum balances"), ("héllo", "hello")]
    got = similarities([a for a, _ in pairs], [b for _, b in pairs])
    # by hand: 2/4 edits, 3/7 (k->s, e->i, +g), 2/4, none, 1/1, 1/16, 1/5
    assert list(got) == pytest.approx([0.5, 1 - 3 / 7, 0.5, 1.0, 0.0, 1 - 1 / 16, 0.8],
                                      abs=1e-12)
    rng = random.Random(3)
    words = ["".join(rng.choice("abcde ") for _ in range(rng.randint(0, 12)))
             for _ in range(200)]
    left, right = words[:100], words[100:]
    assert list(similarities(left, right)) == pytest.approx(
        [reference_similarity(a, b) for a, b in zip(left, right, strict=True)], abs=1e-12)


def test_similarity_exactly_at_threshold_is_not_covered_just_above_is(con, tmp_path):
    load(con, tmp_path, [
        golden("g-1", ["a"], gold_passages=["abcd"]),
        golden("g-2", ["a"], question="q2", gold_passages=["a" * 101]),
    ], [
        request("r-at", [chunk("a", "abxy")]),          # 1 - 2/4 = 0.5: not above
        request("r-above", [chunk("a", "abcdxy")]),     # 1 - 2/6 = 0.667: above
        # 1 - 50/101 = 0.50495: just above
        request("r-just-above", [chunk("a", "a" * 51 + "b" * 50)], gold_id="g-2"),
        # 1 - 51/101 = 0.49505: just below
        request("r-just-below", [chunk("a", "a" * 50 + "b" * 51)], gold_id="g-2"),
    ])
    got = scores(con)
    assert got["r-at"] == ("scored", 1, 0, 0.0)
    assert got["r-above"] == ("scored", 1, 1, 1.0)
    assert got["r-just-above"] == ("scored", 1, 1, 1.0)
    assert got["r-just-below"] == ("scored", 1, 0, 0.0)
    assert SIMILARITY_THRESHOLD == 0.5


def test_score_cutoff_changes_no_decision_of_the_strict_threshold():
    """Below the cutoff a pair scores 0; at or above it keeps its exact similarity, so a pair
    exactly at 0.5 (2 edits in 4) is still not covered and one just above still is."""
    rng = random.Random(5)
    words = ["".join(rng.choice("abc") for _ in range(rng.randint(0, 8))) for _ in range(4000)]
    left = ["abcd", "abcdefghij", "abcdefghij", *words[:2000]]
    right = ["abxy", "abcdefxyzw", "abcdexyzwv", *words[2000:]]
    exact = [reference_similarity(a, b) for a, b in zip(left, right, strict=True)]
    cut = similarities(left, right, score_cutoff=SIMILARITY_THRESHOLD)
    assert list(cut[:3]) == [0.5, 0.6, 0.5]
    assert [c > 0.5 for c in cut] == [e > 0.5 for e in exact]
    assert sum(e == 0.5 for e in exact) > 100


def test_any_threshold_decides_as_the_exact_arithmetic_does_whatever_the_cutoff():
    """1 - 7/10 is 0.30000000000000004 in float64, which RAGAS counts as above 0.3; the early
    stop of rapidfuzz must not cut such a pair to 0 at any threshold."""
    pairs = [("a" * m, "b" * d + "a" * (m - d)) for m in range(1, 41) for d in range(m + 1)]
    batch = pa.record_batch({
        "request_id": [f"r{i}" for i in range(len(pairs))], "passage_no": [1] * len(pairs),
        "place": pa.array([1] * len(pairs), pa.int32()),
        "passage": [p for p, _ in pairs], "text": [t for _, t in pairs]})
    for threshold in [i / 20 for i in range(1, 20)]:
        covered = {c["request_id"] for c in covering_pairs([batch], threshold).to_pylist()}
        assert covered == {f"r{i}" for i, (p, t) in enumerate(pairs)
                           if reference_similarity(p, t) > threshold}, threshold


def test_covering_pairs_score_repeated_pairs_alike_and_never_cover_with_a_null():
    batch = pa.record_batch({
        "request_id": ["r", "r", "s", "s", "t"], "passage_no": [1, 2, 1, 2, 1],
        "place": pa.array([1, 2, 3, 4, 5], pa.int32()),
        "passage": ["abcd", "abcd", "abcd", None, "abcd"],
        "text": ["abcx", "wxyz", "abcx", "abcd", None]})
    assert [(c["request_id"], c["place"]) for c in covering_pairs([batch]).to_pylist()] == [
        ("r", 1), ("s", 3)]


def test_covering_pairs_use_a_strict_threshold():
    batch = pa.record_batch({"request_id": ["r", "r"], "passage_no": [1, 2], "place": [1, 2],
                             "passage": ["abcd", "abcd"], "text": ["abxy", "abcx"]})
    covers = covering_pairs([batch], threshold=0.5).to_pylist()
    assert covers == [{"request_id": "r", "passage_no": 2, "place": 2}]
    assert covering_pairs([batch], threshold=0.75).num_rows == 0


def test_empty_retrieval_is_a_real_zero(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["a"], gold_passages=["abcd", "wxyz"])],
         [request("r-1", [])])
    assert scores(con)["r-1"] == ("scored", 2, 0, 0.0)
    assert con.sql("SELECT chunk_id, cause FROM miss_causes WHERE route = 'passages' "
                   "ORDER BY 1").fetchall() == [("passage 1", "not_retrieved"),
                                                ("passage 2", "not_retrieved")]


def test_golden_without_passages_is_no_evidence_not_zero(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["a"], gold_passages=[])],
         [request("r-1", [chunk("a", "abcd")])])
    assert scores(con)["r-1"] == ("no_evidence", None, None, None)
    assert scores(con, "ids")["r-1"] == ("scored", 1, 1, 1.0)


def test_chunk_text_comes_from_the_manifest_when_not_logged(con, tmp_path):
    manifest = [{"index_version": "idx-1", "chunk_id": "a", "text": "the fee is ten"},
                {"index_version": "idx-1", "chunk_id": "b", "text": "the fee is tem"}]
    load(con, tmp_path, [golden("g-1", ["z"], gold_passages=["the fee is ten"])], [
        request("r-manifest", [chunk("a")]),
        # a logged text wins over the manifest's
        request("r-logged", [chunk("a", "unrelated words entirely")]),
        # no text anywhere: nothing served can be compared, so the request is not measured
        request("r-none", [chunk("q")]),
        # one served chunk with a text is compared; the one without covers nothing
        request("r-part", [chunk("q"), chunk("x", "unrelated words entirely")]),
        # a blank logged text is no text: the manifest's is read
        request("r-empty", [chunk("a", "")]),
        request("r-blank", [chunk("a", " \n\t ")]),
        # logged with its text once and once without (a repeat in the list, or another
        # step): read as logged, as the claims route reads it — not also as the manifest's
        request("r-repeat", [chunk("a", "unrelated words entirely"), chunk("a")]),
        {key: value for key, value in request(
            "r-steps", [], retrieval_steps=[[chunk("a", "unrelated words entirely")],
                                            [chunk("a")]]).items() if key != "retrieved"},
    ], manifest=manifest)
    got = scores(con)
    assert got["r-manifest"] == ("scored", 1, 1, 1.0)
    assert got["r-logged"] == ("scored", 1, 0, 0.0)
    assert got["r-none"] == ("no_context_text", None, None, None)
    assert got["r-part"] == ("scored", 1, 0, 0.0)
    assert con.execute("SELECT count(*) FROM miss_causes WHERE request_id = 'r-none' "
                       "AND route = 'passages'"
                       ).fetchall() == [(0,)]
    assert got["r-empty"] == got["r-blank"] == ("scored", 1, 1, 1.0)
    assert got["r-repeat"] == got["r-steps"] == ("scored", 1, 0, 0.0)


def test_a_passage_and_a_text_that_differ_only_in_unicode_composition_are_the_same_text(
        con, tmp_path):
    # the same words with precomposed (NFC) or decomposed (NFD) accents, as macOS file names,
    # some editors and some PDF extractors write them: 0.5 apart by raw code points
    words = "Đường Nguyễn Huệ ở Quận Một"
    composed, decomposed = (unicodedata.normalize(form, words) for form in ("NFC", "NFD"))
    assert composed != decomposed
    load(con, tmp_path, [golden("g-1", ["z"], gold_passages=[composed]),
                         golden("g-2", ["z"], gold_passages=[decomposed])], [
        request("r-1", [chunk("a", decomposed)], gold_id="g-1"),
        request("r-2", [chunk("a", composed)], gold_id="g-2")])
    got = scores(con)
    assert got["r-1"] == got["r-2"] == ("scored", 1, 1, 1.0)


def test_recall_at_k_counts_a_passage_covered_at_rank_4_only_from_k_4(con, tmp_path):
    chunks = [chunk(c, "zzzzzzzz") for c in "abc"] + [chunk("d", "alpha beta"),
                                                       chunk("e", "gamma delta")]
    load(con, tmp_path, [golden("g-1", ["x"], gold_passages=["alpha beta", "omega"])], [
        request("r-1", chunks),            # served k = 5
        request("r-2", chunks, k=3),       # the covering chunk lies beyond the served k
    ], cutoffs=(1, 3, 4, 5, 10))
    assert at_k(con, "r-1") == {1: 0.0, 3: 0.0, 4: 0.5, 5: 0.5, 10: 0.5}
    assert at_k(con, "r-2") == {1: 0.0, 3: 0.0, 4: 0.0, 5: 0.0, 10: 0.0}
    assert con.sql("SELECT request_id, chunk_id, cause, rank FROM miss_causes "
                   "WHERE route = 'passages' ORDER BY ALL").fetchall() == [
        ("r-1", "passage 2", "not_retrieved", None),
        ("r-2", "passage 1", "beyond_k", 4), ("r-2", "passage 2", "not_retrieved", None)]


def test_best_place_among_covering_chunks_counts(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["x"], gold_passages=["minimum balance"])], [
        request("r-1", [chunk("a", "minimum balances"), chunk("b", "zzz"),
                        chunk("c", "minimum balance")]),
    ], cutoffs=(1, 3))
    assert at_k(con, "r-1") == {1: 1.0, 3: 1.0}


def test_passages_rows_are_apart_from_ids_rows_which_stay_unchanged(con, tmp_path):
    goldens = [golden("g-1", ["a", "b"], gold_passages=["the fee is ten dollars"])]
    records = [request("r-1", [chunk("a", "the fee is ten dollars"), chunk("x", "nothing")])]
    write_jsonl(tmp_path / "gold.jsonl", goldens)
    write_jsonl(tmp_path / "logs.jsonl", records)
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])
    score(con, routes=("ids",))
    ids_only = con.sql("SELECT * FROM request_scores ORDER BY ALL").fetchall()
    score(con, routes=BOTH)
    assert con.sql("SELECT * FROM request_scores WHERE route = 'ids' "
                   "ORDER BY ALL").fetchall() == ids_only
    assert scores(con, "ids")["r-1"] == ("scored", 2, 1, 0.5)
    assert scores(con)["r-1"] == ("scored", 1, 1, 1.0)
    assert con.sql("SELECT route, count(*) FROM request_cutoffs GROUP BY 1 "
                   "ORDER BY 1").fetchall() == [("ids", 1), ("passages", 1)]


def test_rescoring_changes_nothing(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["a"], gold_passages=["abcd", "hello world"])], [
        request("r-1", [chunk("a", "abcx"), chunk("b", "hello")]),
        request("r-2", [], ts="2026-11-02T10:00:00Z"),
    ])
    before = snapshot(con)
    score(con, routes=BOTH, cutoffs=(1, 3, 5, 10))
    assert snapshot(con) == before


@pytest.mark.parametrize("bound, filler", [
    ({"batch_pairs": 5}, ""),
    # long texts: a batch is bounded by its bytes before its pairs
    ({"batch_bytes": 4_000}, " and more words about the monthly fee" * 40)])
def test_small_batches_score_like_one(con, tmp_path, bound, filler):
    texts = [chunk(f"c{i}", f"passage number {i} about fees{filler}") for i in range(12)]
    load(con, tmp_path, [golden("g-1", ["a"], gold_passages=[
        f"passage number 7 about fees{filler}", f"passage number 11 about fees{filler}",
        "unrelated"])], [request("r-1", texts)], cutoffs=(1, 12))
    whole = at_k(con, "r-1")
    register(PassagesRoute(**bound))
    try:
        score(con, routes=BOTH, cutoffs=(1, 12))
        assert at_k(con, "r-1") == whole
    finally:
        register(PassagesRoute())
    # "passage number 7 about fees" is one edit from chunk c0's text: place 1 already
    assert whole == {1: pytest.approx(2 / 3), 12: pytest.approx(2 / 3)}


def test_long_texts_make_smaller_batches_not_more_memory():
    # a pair repeats its passage and its text: 100,000 pairs of 5 KB texts are a gigabyte.
    # Reads of 10 rows: eight short (~200 bytes), then eight long (~10 KB), then one huge.
    sizes = [10] * 8 + [1000] * 8 + [5000]
    reads = [pa.record_batch({"n": pa.array(range(10 * i, 10 * i + 10)),
                              "text": ["x" * size] * 10}) for i, size in enumerate(sizes)]
    gathered = list(bounded_batches(reads, max_rows=45, max_bytes=30_000))
    assert pa.Table.from_batches(gathered).column("n").to_pylist() == list(range(170))
    # short reads gather up to the row bound, long ones up to the byte bound; a read larger
    # than the bound on its own passes whole
    assert [b.num_rows for b in gathered] == [40, 40, 20, 20, 20, 20, 10]
    assert all(b.nbytes <= 30_000 for b in gathered[:-1]) and gathered[-1].nbytes > 30_000


@pytest.mark.slow
def test_a_window_of_long_passages_is_scored_in_bounded_memory(tmp_path):
    """2,000 requests x 20 chunks of 5 KB x 3 gold passages of 5 KB: 120,000 pairs of 10 KB.
    Scored 100,000 pairs at a time, the batch alone took a gigabyte beyond DuckDB's limit (peak
    RSS 2.45-2.66 GiB); bounded by bytes too, the peak is DuckDB's own (1.07-1.14 GiB)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    rng = random.Random(5)
    words = "the a fee balance minimum account branch urban rural monthly charge card".split()

    def text() -> str:
        return " ".join(rng.choice(words) for _ in range(900))[:5000]

    with open(tmp_path / "gold.jsonl", "w") as gold, open(tmp_path / "logs.jsonl", "w") as logs:
        for i in range(2000):
            gold.write(json.dumps({"gold_id": f"g{i}", "question": f"q{i}",
                                   "gold_passages": [text() for _ in range(3)]}) + "\n")
            logs.write(json.dumps({
                "request_id": f"r{i}", "timestamp": "2026-11-01T10:00:00Z", "query": f"q{i}",
                "gold_id": f"g{i}", "index_version": "v1",
                "retrieved": [{"chunk_id": f"c{i}-{j}", "rank": j + 1, "text": text()}
                              for j in range(20)]}) + "\n")
    root = Path(__file__).resolve().parent.parent
    cli = [sys.executable, "-m", "pipeline.cli", "--warehouse", str(tmp_path / "w.duckdb")]
    for args in (["ingest", "gold", str(tmp_path / "gold.jsonl"), "--version", "g1"],
                 ["ingest", "logs", str(tmp_path / "logs.jsonl")],
                 ["config", "--routes", "passages"]):
        subprocess.run(cli + args, cwd=root, check=True, capture_output=True)
    # the peak of the scoring process alone: a process of its own that waits for it
    measure = ("import resource, subprocess, sys; "
               "subprocess.run(sys.argv[1:], check=True, capture_output=True); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    done = subprocess.run([sys.executable, "-c", measure, *cli, "score"], cwd=root,
                          check=True, capture_output=True, text=True)
    peak_gib = int(done.stdout) / (1 << 20)
    assert peak_gib < 1.75, f"peak RSS {peak_gib:.2f} GiB"
    import duckdb
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        counts = con.execute("SELECT count(*) FILTER (status = 'scored'), count(*) "
                             "FROM request_scores WHERE route = 'passages'").fetchone()
    assert counts == (2000, 2000)


def test_routes_are_put_in_force_and_ids_stays_the_default(con):
    assert in_force(con).routes == ("ids",)
    put_in_force(con, resolve(con, routes=BOTH))
    assert in_force(con).routes == BOTH


def test_the_report_of_the_passages_route_names_gold_passages_not_chunks(con, tmp_path):
    # its misses are passages ('passage 2'), never in an index manifest: the report called
    # them gold chunks and explained not_retrieved as "in the index, never returned"
    import re

    from pipeline.aggregate import aggregate
    from pipeline.report import write_report

    chunks = [chunk(c, "zzzzzzzz") for c in "abc"] + [chunk("d", "alpha beta")]
    load(con, tmp_path, [golden("g-1", ["x"], gold_passages=["alpha beta", "omega"])],
         [request("r-1", chunks), request("r-2", chunks, k=3), request("r-3", chunks)],
         cutoffs=(1, 3, 5))
    aggregate(con)
    html = write_report(con, tmp_path / "report", route="passages", k=5).read_text("utf-8")
    misses = html[html.index('<section id="misses">'):html.index('<section id="slices">')]
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", misses))
    assert "gold chunk" not in text and "in the index, never returned" not in text
    assert "4 missing gold passages in 3 of 3 scored requests" in text, text
    assert "missing gold passages (misses, main cause)" in text
