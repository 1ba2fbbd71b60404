"""Chunk-ID scoring (pipeline.score with the ids route, sql/score_*.sql and sql/route_ids.sql):
each semantic rule of the README's "What recall means here" on its own, then properties against
the plain-Python reference."""

from __future__ import annotations

from datetime import datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.aggregate import aggregate
from pipeline.config import put_in_force, resolve
from pipeline.ingest import ingest_gold, ingest_logs
from pipeline.score import score
from pipeline.warehouse import connect
from tests import reference
from tests.conftest import golden, request, write_jsonl


def load(con, tmp_path, goldens, records, cutoffs=(1, 3, 5, 10, 20, 50, 100)):
    write_jsonl(tmp_path / "gold.jsonl", goldens)
    write_jsonl(tmp_path / "logs.jsonl", records)
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])
    score(con, cutoffs=cutoffs)


def scores(con) -> dict[str, tuple]:
    rows = con.sql("SELECT request_id, status, needed, covered, recall, precision, k "
                   "FROM request_scores").fetchall()
    return {r[0]: r[1:] for r in rows}


def test_ids_compare_as_strings(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["7", "08", "c-1"])],
         [request("r-1", [7, "8", "c-1"])])
    status, needed, covered, recall, *_ = scores(con)["r-1"]
    # 7 (a JSON number) is the string "7"; "08" is not "8"
    assert (status, needed, covered) == ("scored", 3, 2)
    assert recall == 2 / 3


def test_chunk_retrieved_twice_counts_once(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["a", "c"])],
         [request("r-1", ["a", "a", "b", "a"])])
    _, needed, covered, recall, precision, k = scores(con)["r-1"]
    assert (needed, covered, recall) == (2, 1, 0.5)
    assert precision == 0.5  # distinct served chunks: a, b
    assert k == 4


def test_gold_chunk_listed_twice_in_golden_counts_once(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["a", "a", "c"])], [request("r-1", ["a"])])
    assert scores(con)["r-1"][1:4] == (2, 1, 0.5)


def test_candidates_beyond_served_k_do_not_count_but_show_as_beyond_k(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["a", "b"])],
         [request("r-1", ["x", "a", "y", "b"], k=2)])
    _, needed, covered, recall, precision, k = scores(con)["r-1"]
    assert (k, covered, recall, precision) == (2, 1, 0.5, 0.5)
    assert con.sql("SELECT chunk_id, cause, rank FROM miss_causes").fetchall() == [
        ("b", "beyond_k", 4)]
    at_k = dict(con.sql("SELECT k, recall FROM recall_at_k").fetchall())
    assert at_k[1] == 0.0 and at_k[3] == 0.5 and at_k[100] == 0.5  # capped by served k


def test_agentic_steps_are_scored_over_their_union(con, tmp_path):
    steps = [[{"chunk_id": "a"}, {"chunk_id": "x"}], [{"chunk_id": "y"}, {"chunk_id": "b"}]]
    record = request("r-1", [], retrieval_steps=steps)
    del record["retrieved"]
    load(con, tmp_path, [golden("g-1", ["a", "b", "c"])], [record])
    _, needed, covered, recall, _, k = scores(con)["r-1"]
    assert (needed, covered, k) == (3, 2, 2)
    at_k = dict(con.sql("SELECT k, recall FROM recall_at_k").fetchall())
    # top 1 of each step is {a, y}: only a is gold
    assert at_k[1] == 1 / 3 and at_k[3] == 2 / 3


def test_golden_without_evidence_is_excluded_not_zero(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["a"]), golden("g-2", [], question="q2")],
         [request("r-1", ["a"]), request("r-2", ["a"], gold_id="g-2"),
          request("r-3", ["b"], gold_id="g-2")])
    result = scores(con)
    assert result["r-2"][0] == "no_evidence" and result["r-2"][3] is None
    assert result["r-3"][0] == "no_evidence" and result["r-3"][3] is None
    aggregate(con)
    n, mean, excluded = con.sql("SELECT n, mean_recall, n_excluded FROM window_metrics "
                                "WHERE slice = 'all' AND k = 5").fetchall()[0]
    assert (n, mean, excluded) == (1, 1.0, 2)
    assert con.sql("SELECT count(*) FROM recall_at_k WHERE request_id <> 'r-1'"
                   ).fetchall()[0][0] == 0


def test_request_without_golden_is_no_gold_match(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["a"])],
         [request("r-1", ["a"], gold_id="g-404"),
          request("r-2", ["a"], gold_id=None, query="a question nobody wrote down")])
    result = scores(con)
    assert result["r-1"][0] == "no_gold_match" and result["r-1"][3] is None
    assert result["r-2"][0] == "no_gold_match"


def test_request_without_gold_id_joins_by_normalized_question(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["a"], question="What is the Minimum  balance?")],
         [request("r-1", ["a"], gold_id=None, query="  WHAT is the ｍｉｎｉｍｕｍ balance? ")])
    status, *_ = scores(con)["r-1"]
    assert status == "scored"
    assert con.sql("SELECT gold_id FROM request_scores").fetchall() == [("g-1",)]


def test_empty_retrieval_with_reference_is_a_real_zero(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["a", "b"])], [request("r-1", [])])
    status, needed, covered, recall, precision, k = scores(con)["r-1"]
    assert (status, needed, covered, recall, precision, k) == ("scored", 2, 0, 0.0, None, 0)


def test_missing_chunk_with_manifest_is_not_in_index(con, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.ingest import ingest_index

    pq.write_table(pa.table({"chunk_id": ["a", "b"], "text": ["A", "B"]}), tmp_path / "m.parquet")
    ingest_index(con, str(tmp_path / "m.parquet"), "idx-1")
    load(con, tmp_path, [golden("g-1", ["a", "b", "gone"])], [request("r-1", ["a"])])
    causes = dict(con.sql("SELECT chunk_id, cause FROM miss_causes").fetchall())
    assert causes == {"b": "not_retrieved", "gone": "not_in_index"}


def test_scoring_is_repeatable(con, tmp_path):
    from tests.conftest import snapshot

    load(con, tmp_path, [golden("g-1", ["a", "b"])],
         [request("r-1", ["a"]), request("r-2", ["b", "a"], session_id="s-1")])
    aggregate(con)
    before = snapshot(con)
    score(con)
    aggregate(con)
    assert snapshot(con) == before


# ------------------------------------------------------------------------- properties

chunk = st.sampled_from([f"c{i}" for i in range(12)])
# a logged ranking: chunk IDs in logged order, each with a logged rank or none (then its list
# position stands in); ranks may tie, skip, start above 1 or disagree with the list order
ranking = st.lists(st.tuples(chunk, st.one_of(st.none(), st.integers(1, 8))), max_size=15)


@st.composite
def scenario(draw):
    requests = []
    for i in range(draw(st.integers(1, 6))):
        gold = draw(st.lists(chunk, min_size=1, max_size=5, unique=True))
        steps = draw(st.lists(ranking, min_size=1, max_size=3))
        k = draw(st.one_of(st.none(), st.integers(1, 12)))   # a logged k is at least 1
        requests.append((f"r-{i}", gold, steps, k))
    return requests


def log_records(case) -> tuple[list, list, dict]:
    """Gold set, log records (rank key left out where none is logged) and what the reference
    expects, for one generated case."""
    goldens, records, expected = [], [], {}
    for request_id, gold, steps, k in case:
        gold_id = "g-" + request_id
        goldens.append(golden(gold_id, gold, question=request_id))
        step_items = [[{"chunk_id": c} if r is None else {"chunk_id": c, "rank": r}
                       for c, r in step] for step in steps]
        extra = {"k": k} if k is not None else {}
        if len(steps) == 1:
            record = request(request_id, step_items[0], gold_id=gold_id, **extra)
        else:
            record = request(request_id, [], gold_id=gold_id, retrieval_steps=step_items,
                             **extra)
            del record["retrieved"]
        records.append(record)
        ranked = [[(c, pos if r is None else r) for pos, (c, r) in enumerate(step, start=1)]
                  for step in steps]
        served_k = k if k is not None else max(len(s) for s in steps)
        expected[request_id] = (gold, ranked, served_k)
    return goldens, records, expected


def write_parquet_logs(path, records) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    item = pa.struct([("chunk_id", pa.string()), ("rank", pa.int64())])
    schema = pa.schema([
        ("request_id", pa.string()), ("timestamp", pa.string()), ("query", pa.string()),
        ("index_version", pa.string()), ("gold_id", pa.string()), ("k", pa.int64()),
        ("retrieved", pa.list_(item)), ("retrieval_steps", pa.list_(pa.list_(item))),
    ])
    pq.write_table(pa.Table.from_pylist(records, schema=schema), path)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=scenario(), logged_as=st.sampled_from(["jsonl", "parquet"]))
def test_recall_at_k_matches_reference_and_is_monotone_in_unit_interval(tmp_path_factory, case,
                                                                          logged_as):
    tmp = tmp_path_factory.mktemp("prop")
    goldens, records, expected = log_records(case)
    con = connect(":memory:")
    cutoffs = (1, 2, 3, 5, 8, 13)
    write_jsonl(tmp / "gold.jsonl", goldens)
    ingest_gold(con, str(tmp / "gold.jsonl"), "v1")
    if logged_as == "jsonl":
        write_jsonl(tmp / "logs.jsonl", records)
        ingest_logs(con, [str(tmp / "logs.jsonl")])
    else:
        write_parquet_logs(tmp / "logs.parquet", records)
        ingest_logs(con, [str(tmp / "logs.parquet")])
    assert con.sql("SELECT count(*) FROM quarantine").fetchall()[0][0] == 0
    score(con, cutoffs=cutoffs)
    rows = con.sql("SELECT request_id, k, recall, precision, hit FROM recall_at_k "
                   "ORDER BY request_id, k").fetchall()
    assert len(rows) == len(case) * len(cutoffs)
    last: dict[str, float] = {}
    for request_id, cutoff, recall, precision, hit in rows:
        gold, ranked, served_k = expected[request_id]
        assert recall == reference.recall_at(gold, ranked, served_k, cutoff)
        assert precision == reference.precision_at(gold, ranked, served_k, cutoff)
        assert hit == reference.hit_at(gold, ranked, served_k, cutoff)
        assert 0.0 <= recall <= 1.0
        assert recall >= last.get(request_id, 0.0)
        last[request_id] = recall
    served = dict(con.sql("SELECT request_id, recall FROM request_scores").fetchall())
    for request_id, (gold, ranked, served_k) in expected.items():
        assert served[request_id] == reference.recall_at(gold, ranked, served_k, served_k)
    con.close()


def test_window_bounds_are_half_open(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["a"])],
         [request("r-1", ["a"], ts="2026-11-01T23:59:59.999Z"),
          request("r-2", ["a"], ts="2026-11-02T00:00:00Z")])
    con.execute("DELETE FROM request_scores")
    score(con, start=datetime(2026, 11, 1), end=datetime(2026, 11, 2))
    assert con.sql("SELECT request_id FROM request_scores").fetchall() == [("r-1",)]


def _rows(con, table: str) -> list:
    return sorted(con.sql(f'SELECT * FROM "{table}"').fetchall(), key=repr)


def test_scoring_a_window_while_the_next_day_arrives_changes_only_that_window(con, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    day1 = write_jsonl(tmp_path / "dt=2026-11-01" / "a.jsonl",
                       [request("d1-1", ["a"], ts="2026-11-01T08:00:00Z"),
                        request("d1-2", ["a", "b"], ts="2026-11-01T09:00:00Z")])
    ingest_logs(con, [str(day1)])
    window = {"start": datetime(2026, 11, 1), "end": datetime(2026, 11, 2)}
    score(con, **window)
    aggregate(con, **window)
    before = {t: _rows(con, t) for t in ("request_scores", "recall_at_k", "miss_causes",
                                         "window_metrics")}
    day2 = write_jsonl(tmp_path / "dt=2026-11-02" / "a.jsonl",
                       [request("d2-1", ["b"], ts="2026-11-02T08:00:00Z")])
    ingest_logs(con, [str(day2)])
    score(con, **window)
    aggregate(con, **window)
    after = {t: _rows(con, t) for t in before}
    assert after == before  # day 2 is not touched until its own window is scored
    score(con, start=datetime(2026, 11, 2), end=datetime(2026, 11, 3))
    scored = dict(con.sql("SELECT request_id, recall FROM request_scores").fetchall())
    assert scored == {"d1-1": 0.5, "d1-2": 1.0, "d2-1": 0.5}
    day1_rows = [r for r in _rows(con, "recall_at_k") if r[0].startswith("d1")]
    assert day1_rows == before["recall_at_k"]


def test_a_window_that_fails_keeps_its_previous_rows(con, tmp_path, monkeypatch):
    from pipeline import score as score_module

    load(con, tmp_path, [golden("g-1", ["a", "b"])], [request("r-1", ["a"])])
    before = {t: _rows(con, t) for t in ("request_scores", "recall_at_k", "miss_causes")}
    real = score_module.run_script

    def failing(connection, name, params=None):
        real(connection, name, params)
        connection.execute("DELETE FROM request_cutoffs")  # half-way through a window's writes ...
        raise RuntimeError("disk full")  # ... the step fails before its commit

    monkeypatch.setattr(score_module, "run_script", failing)
    try:
        score(con)
    except RuntimeError:
        pass
    else:
        raise AssertionError("the injected failure did not surface")
    assert {t: _rows(con, t) for t in before} == before


def test_batched_and_per_window_scoring_agree(con, tmp_path):
    records = [request(f"r-{d}-{i}", ["a", "x", "b"][: 1 + (i % 3)],
                       ts=f"2026-11-0{d}T1{i}:00:00Z") for d in range(1, 5) for i in range(3)]
    load(con, tmp_path, [golden("g-1", ["a", "b"])], records)
    together = {t: _rows(con, t) for t in ("request_scores", "request_cutoffs", "miss_causes")}
    for table in together:
        con.execute(f'DELETE FROM "{table}"')
    summary = score(con, batch_requests=1)  # every day window in its own transaction
    assert len(summary.windows) == 4
    assert {t: _rows(con, t) for t in together} == together


def test_ids_with_surrounding_spaces_compare_exactly(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["c1 ", "c2"])], [request("r-1", ["c1 ", "c2"])])
    assert scores(con)["r-1"][1:4] == (2, 2, 1.0)


def test_score_without_window_scores_only_days_with_requests(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["a"])],
         [request("r-1", ["a"], ts="2026-01-01T10:00:00Z"),
          request("r-2", ["a"], ts="2026-11-01T10:00:00Z")])
    summary_days = [w[0].date().isoformat() for w in score(con).windows]
    assert summary_days == ["2026-01-01", "2026-11-01"]
    after = [w[0].date().isoformat() for w in score(con, start=datetime(2026, 6, 1)).windows]
    assert after == ["2026-11-01"]


def test_logged_ranks_order_the_list_but_k_counts_places(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["c", "d"])], [
        # ties: four chunks share rank 1; only two are served (k=2), in logged order
        request("ties", [{"chunk_id": c, "rank": 1} for c in "abcd"], k=2),
        # an offset and a gap: ranks 3, 4, 10 are still the top three places
        request("gaps", [{"chunk_id": "a", "rank": 3}, {"chunk_id": "b", "rank": 4},
                         {"chunk_id": "c", "rank": 10}]),
        # logged rank disagrees with list order: rank wins
        request("order", [{"chunk_id": "c", "rank": 2}, {"chunk_id": "a", "rank": 1}], k=1),
    ], cutoffs=(1, 2, 3, 5))
    result = scores(con)
    assert result["ties"][1:5] == (2, 0, 0.0, 0.0)
    assert result["gaps"][1:4] == (2, 1, 0.5) and result["gaps"][5] == 3
    assert result["order"][1:4] == (2, 0, 0.0)
    at_k = {(r, k): v for r, k, v in con.sql(
        "SELECT request_id, k, recall FROM recall_at_k").fetchall()}
    assert [at_k[("gaps", c)] for c in (1, 2, 3, 5)] == [0.0, 0.0, 0.5, 0.5]
    causes = con.sql("SELECT request_id, chunk_id, cause, rank FROM miss_causes "
                     "ORDER BY 1, 2").fetchall()
    assert causes == [("gaps", "d", "not_retrieved", None),
                      ("order", "c", "beyond_k", 2), ("order", "d", "not_retrieved", None),
                      ("ties", "c", "beyond_k", 3), ("ties", "d", "beyond_k", 4)]


def test_later_scores_keep_the_cutoffs_put_in_force(con, tmp_path):
    load(con, tmp_path, [golden("g-1", ["a"])], [request("r-1", ["a"])], cutoffs=(1, 2))
    # cutoffs given to one call are for that call only ...
    assert score(con).cutoffs == (1, 3, 5, 10, 20, 50, 100)
    # ... putting them in force is the explicit act that later scores keep
    put_in_force(con, resolve(con, cutoffs=(1, 2)))
    summary = score(con)
    assert summary.cutoffs == (1, 2)
    assert con.sql("SELECT DISTINCT cutoffs FROM request_cutoffs").fetchall() == [([1, 2],)]


def test_a_greek_capital_and_small_letter_casefold_alike_join_by_question(con, tmp_path):
    # 'ΐ' casefolds to three code points, its capital 'Ϊ́' to two (ϊ + acute): NFKC after
    # casefolding makes both the one letter again
    load(con, tmp_path, [golden("g-1", ["a"], question="τι είναι το \u0390;")],
         [request("r-1", ["a"], gold_id=None, query="ΤΙ ΕΊΝΑΙ ΤΟ \u03aa\u0301;")])
    assert scores(con)["r-1"][0] == "scored"
    assert con.sql("SELECT gold_id FROM request_scores").fetchall() == [("g-1",)]
