"""The `claims` route (pipeline/routes/claims.py, pipeline/claims.py, sql/*claims*.sql) against a
real OpenAI-compatible server on loopback (tests/judge_server.py): the RAGAS worked example,
the warehouse cache (call counts come from the server's log), budgets and dry runs, judge
failures kept out of the means, claims fixed once per gold version with export/import, and the
API key kept out of every table and output."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_server import WORKED_CLAIMS, Fault, JudgeServer, script, words_judge  # noqa: E402

from pipeline.aggregate import aggregate  # noqa: E402
from pipeline.claims import export_claims, import_claims, stored_claims  # noqa: E402
from pipeline.errors import RecallwatchError  # noqa: E402
from pipeline.ingest import ingest_gold, ingest_logs  # noqa: E402
from pipeline.judge import JudgeConfig  # noqa: E402
from pipeline.routes import register  # noqa: E402
from pipeline.routes.claims import ClaimsRoute  # noqa: E402
from pipeline.score import score  # noqa: E402
from tests.conftest import ALL_TABLES, request, write_jsonl  # noqa: E402

SECRET = "sk-test-RECALLWATCH-claims-41c7e2"
NOW = datetime(2026, 11, 2, 3, 0)

CLAIMS = WORKED_CLAIMS
CHUNKS = [
    {"chunk_id": "urban", "text": "Urban branches require a minimum balance of 5000 rupees."},
    {"chunk_id": "fee", "text": "A fee of 50 rupees applies when the balance falls below the "
                                "minimum."},
    {"chunk_id": "kyc", "text": "Opening an account needs KYC documents: an identity proof and "
                                "an address proof."},
    {"chunk_id": "semi", "text": "Semi-urban branches require a minimum balance of 2500 "
                                 "rupees."},
]
REFERENCE = ("Urban branches need a minimum balance of 5000 rupees and rural ones 1000 rupees; "
             "below it a fee of 50 rupees applies.")
SPLIT = ["Urban branches require a minimum balance of 5000 rupees.",
         "Rural branches need a minimum balance of 1000 rupees.",
         "A fee of 50 rupees applies below the minimum balance."]


def judge(server: JudgeServer, **overrides) -> JudgeConfig:
    settings = {"model": "judge-model", "base_url": server.url, "api_key": SECRET,
                "timeout": 2.0, "backoff": 0.01, "max_backoff": 0.05, "max_retries": 1,
                **overrides}
    return JudgeConfig(**settings)


@pytest.fixture(autouse=True)
def _built_in_claims_route():
    """The CLI and use_judge register a claims route with a judge; the built-in one comes
    back after each test."""
    yield
    register(ClaimsRoute())


@pytest.fixture
def use_judge():
    """Register the claims route with a judge for one test."""
    def use(config: JudgeConfig, **kwargs) -> None:
        register(ClaimsRoute(judge=config, clock=lambda: NOW, **kwargs))

    return use


def splitting(request) -> dict:
    """The server's reply: a split of the reference for the split prompt, else words_judge."""
    if request.response_format["json_schema"]["name"] == "reference_claims":
        return {"claims": SPLIT}
    return words_judge(request)


def load(con, tmp_path, goldens, records):
    write_jsonl(tmp_path / "gold.jsonl", goldens)
    write_jsonl(tmp_path / "logs.jsonl", records)
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])


def rows(con) -> dict[str, tuple]:
    return {r[0]: r[1:] for r in con.execute(
        "SELECT request_id, status, needed, covered, recall FROM request_scores "
        "WHERE route = 'claims'").fetchall()}


def example(con, tmp_path, *, n=1):
    load(con, tmp_path, [{"gold_id": "g-1", "question": "What is the minimum balance?",
                          "claims": CLAIMS}],
         [request(f"r-{i}", CHUNKS) for i in range(n)])


def test_worked_example_three_of_four_claims_is_recall_075(con, tmp_path, use_judge):
    example(con, tmp_path)
    with JudgeServer(api_key=SECRET) as server:
        use_judge(judge(server))
        summary = score(con, routes=("ids", "claims"), cutoffs=(1, 4, 10))
    assert server.calls == 1 and server.log[0]["claims"] == CLAIMS
    assert rows(con) == {"r-0": ("scored", 4, 3, 0.75)}
    assert summary.by_status["claims"] == {"scored": 1}
    verdict = con.execute("SELECT attributed, reasons, status FROM judge_verdicts").fetchone()
    assert verdict[0] == [True, True, False, True] and verdict[2] == "ok"
    assert "rural" in verdict[1][2]
    # recall at the served k (4) and above it; below it the request is not measured (no row)
    at_k = dict(con.execute("SELECT k, recall FROM recall_at_k WHERE route = 'claims'")
                .fetchall())
    assert at_k == {4: 0.75, 10: 0.75}
    assert stored_claims(con, "v1") == {"g-1": tuple(CLAIMS)}


def test_a_second_score_over_the_same_windows_makes_no_call(con, tmp_path, use_judge):
    example(con, tmp_path, n=3)
    with JudgeServer() as server:
        use_judge(judge(server))
        score(con, routes=("claims",))
        first = rows(con)
        score(con, routes=("claims",))
    assert server.calls == 1
    assert rows(con) == first and {r[0] for r in first.values()} == {"scored"}


def test_thousand_requests_over_fifty_goldens_make_one_call_per_distinct_context(
        con, tmp_path, use_judge):
    goldens = [{"gold_id": f"g-{g}", "question": f"question {g}?",
                "claims": [f"Branch {g} opens at {g % 12 + 1} o'clock.",
                           f"Branch {g} has a large garden."]}
               for g in range(50)]
    records = []
    for i in range(1000):
        g = i % 50
        variant = (i // 50) % 2   # two context sets per golden, each repeated ten times
        text = (f"Branch {g} opens at {g % 12 + 1} o'clock." if variant
                else f"Branch {g} is closed on Sundays.")
        records.append(request(f"r-{i}", [{"chunk_id": f"c-{g}-{variant}", "text": text}],
                               gold_id=f"g-{g}"))
    load(con, tmp_path, goldens, records)
    with JudgeServer() as server:
        use_judge(judge(server, concurrency=8))
        score(con, routes=("claims",))
    assert server.calls == 100
    recalls = con.execute("SELECT recall, count(*) FROM request_scores WHERE route = 'claims' "
                          "GROUP BY recall ORDER BY recall").fetchall()
    assert recalls == [(0.0, 500), (0.5, 500)]


def test_a_budget_stops_calls_and_a_rerun_makes_exactly_the_missing_ones(con, tmp_path,
                                                                         use_judge):
    goldens = [{"gold_id": f"g-{g}", "question": f"q {g}?", "claims": [f"Fact {g} holds."]}
               for g in range(10)]
    records = [request(f"r-{g}", [{"chunk_id": f"c-{g}", "text": f"Fact {g} holds."}],
                       gold_id=f"g-{g}") for g in range(10)]
    load(con, tmp_path, goldens, records)
    with JudgeServer() as server:
        use_judge(judge(server, max_calls=4, concurrency=1))
        score(con, routes=("claims",))
        statuses = [r[0] for r in rows(con).values()]
        assert server.calls == 4
        assert statuses.count("scored") == 4 and statuses.count("not_judged") == 6
        use_judge(judge(server))
        score(con, routes=("claims",))
    assert server.calls == 10
    assert {r[0] for r in rows(con).values()} == {"scored"}


def test_splits_keep_to_the_token_budget_and_their_retries_to_the_call_budget(
        con, tmp_path, use_judge):
    goldens = [{"gold_id": f"g-{g}", "question": f"q {g}?", "reference": REFERENCE}
               for g in range(3)]
    records = [request(f"r-{g}", CHUNKS, gold_id=f"g-{g}") for g in range(3)]
    load(con, tmp_path, goldens, records)
    with JudgeServer(reply=splitting) as server:
        use_judge(judge(server, max_tokens=1))   # no split fits
        score(con, routes=("claims",))
    assert server.calls == 0
    assert {r[0] for r in rows(con).values()} == {"not_judged"}
    with JudgeServer(reply=script(*[Fault("500")] * 5, then=splitting)) as server:
        use_judge(judge(server, max_calls=1, max_retries=4))
        score(con, routes=("claims",))
    assert server.calls == 1   # the retries of the one split allowed are calls too
    assert sorted(r[0] for r in rows(con).values()) == [
        "judge_failed", "not_judged", "not_judged"]


def test_a_retry_the_budget_has_no_room_for_is_a_paid_failure_not_a_skip(
        con, tmp_path, use_judge, capsys):
    example(con, tmp_path)
    with JudgeServer(reply=script(Fault("500"))) as server:
        use_judge(judge(server, max_calls=1), report=print)
        score(con, routes=("claims",))
    assert server.calls == 1
    assert rows(con) == {"r-0": ("judge_failed", None, None, None)}
    assert "made 1 call(s)" in capsys.readouterr().out


def test_a_server_that_leaves_out_usage_is_charged_the_estimate(con, tmp_path, use_judge):
    goldens = [{"gold_id": f"g-{g}", "question": f"q {g}?", "claims": [f"Fact {g} holds."]}
               for g in range(10)]
    records = [request(f"r-{g}", [{"chunk_id": f"c-{g}", "text": f"Fact {g} holds."}],
                       gold_id=f"g-{g}") for g in range(10)]
    load(con, tmp_path, goldens, records)
    with JudgeServer(usage=False) as server:
        use_judge(judge(server, max_tokens=500, concurrency=1))
        score(con, routes=("claims",))
    statuses = [r[0] for r in rows(con).values()]
    assert 0 < server.calls < 10 and statuses.count("scored") == server.calls


def run_with_judge(run_cli, tmp_path, monkeypatch, golden: dict, records: list[dict],
                   *options) -> tuple[JudgeServer, str]:
    """`recallwatch run` over `records` with the ids and claims routes in force, judged by a
    loopback server; returns the server and what run printed (its exit code checked)."""
    write_jsonl(tmp_path / "gold.jsonl", [golden])
    write_jsonl(tmp_path / "logs.jsonl", records)
    run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")
    run_cli("config", "--routes", "ids,claims")
    with JudgeServer() as server:
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        code, out, err = run_cli("run", "--logs", tmp_path / "logs.jsonl", "--judge-model", "m",
                                 *options)
    assert code == 0, err
    return server, out


def test_run_max_calls_bounds_the_whole_run_over_days_with_gaps(run_cli, tmp_path, monkeypatch):
    server, _ = run_with_judge(
        run_cli, tmp_path, monkeypatch, {"gold_id": "g-1", "question": "q?", "claims": CLAIMS},
        [request(f"r-{d}", [{"chunk_id": f"c-{d}", "text": f"context of day {d}"}],
                 ts=f"2026-11-{d:02d}T10:00:00Z", gold_id="g-1") for d in (1, 3, 5, 7)],
        "--max-calls", "1")
    assert server.calls == 1


def test_judge_failures_are_counted_and_excluded_from_the_means(con, tmp_path, use_judge):
    goldens = [{"gold_id": "g-ok", "question": "ok?", "claims": ["Fact one holds."]},
               {"gold_id": "g-bad", "question": "bad?", "claims": ["Fact two holds."]}]
    records = [request("r-ok", [{"chunk_id": "c1", "text": "Fact one holds."}], gold_id="g-ok"),
               request("r-bad", [{"chunk_id": "c2", "text": "Fact two holds."}],
                       gold_id="g-bad")]
    load(con, tmp_path, goldens, records)

    def reply(req):
        return Fault("500") if "two" in req.context else words_judge(req)

    with JudgeServer(reply=reply) as server:
        use_judge(judge(server))
        score(con, routes=("claims",), cutoffs=(1, 5))
    assert rows(con) == {"r-ok": ("scored", 1, 1, 1.0),
                         "r-bad": ("judge_failed", None, None, None)}
    assert con.execute("SELECT status FROM judge_verdicts WHERE status = 'failed'").fetchall()
    aggregate(con, routes=("claims",), cutoffs=(1, 5))
    n, excluded, mean = con.execute(
        "SELECT n, n_excluded, mean_recall FROM window_metrics WHERE route = 'claims' "
        "AND slice = 'all' AND k = 5").fetchone()
    assert (n, excluded, mean) == (1, 1, 1.0)


def test_empty_retrieval_is_a_real_zero_and_no_reference_is_no_evidence(con, tmp_path,
                                                                         use_judge):
    goldens = [{"gold_id": "g-1", "question": "q1?", "claims": CLAIMS},
               {"gold_id": "g-2", "question": "q2?", "gold_chunk_ids": ["c"]}]
    load(con, tmp_path, goldens, [request("r-empty", [], gold_id="g-1"),
                                  request("r-none", CHUNKS, gold_id="g-2")])
    with JudgeServer() as server:
        use_judge(judge(server))
        score(con, routes=("claims",))
    assert server.calls == 0
    assert rows(con) == {"r-empty": ("scored", 4, 0, 0.0),
                         "r-none": ("no_evidence", None, None, None)}


def test_claims_imported_for_a_golden_without_claims_or_reference_are_scored(
        con, tmp_path, use_judge):
    # the import was taken and exported as the golden's claims, yet its requests stayed
    # no_evidence: the match read only the gold file's claims and reference
    load(con, tmp_path, [{"gold_id": "g-2", "question": "q2?", "gold_chunk_ids": ["c"]}],
         [request("r-1", CHUNKS, gold_id="g-2")])
    with JudgeServer() as server:
        use_judge(judge(server))
        score(con, routes=("claims",))
        assert rows(con) == {"r-1": ("no_evidence", None, None, None)}
        path = tmp_path / "claims.jsonl"
        path.write_text(json.dumps({"gold_id": "g-2", "claims": CLAIMS}) + "\n")
        assert import_claims(con, path, "v1") == 1
        score(con, routes=("claims",))
    assert server.calls == 1 and server.log[0]["claims"] == CLAIMS
    assert rows(con) == {"r-1": ("scored", 4, 3, 0.75)}


@pytest.mark.parametrize("blank", ["   ", "\n\t\n", "\u00a0\r\n"])
def test_a_blank_reference_is_no_evidence_and_costs_no_call(con, tmp_path, use_judge, blank):
    # blank as a claim is blank: any whitespace, not only spaces (DuckDB's trim)
    load(con, tmp_path, [{"gold_id": "g-1", "question": "q1?", "reference": blank}],
         [request("r-1", CHUNKS, gold_id="g-1"), request("r-empty", [], gold_id="g-1")])
    with JudgeServer(reply=splitting) as server:
        use_judge(judge(server))
        score(con, routes=("claims",))
        score(con, routes=("claims",))
    assert server.calls == 0
    assert rows(con) == {"r-1": ("no_evidence", None, None, None),
                         "r-empty": ("no_evidence", None, None, None)}


def test_a_claim_given_twice_is_needed_once_from_a_split_an_import_or_the_gold_set(
        con, tmp_path, use_judge):
    # every gold item weighs the same, once; in Unicode NFC, as passages compare
    composed, decomposed = "Caf\u00e9 cr\u00e8me holds.", "Cafe\u0301 cre\u0300me holds."
    load(con, tmp_path, [{"gold_id": "g-1", "question": "q1?", "reference": REFERENCE},
                         {"gold_id": "g-2", "question": "q2?",
                          "claims": [composed, decomposed, "Beta holds.", " Beta holds.\n",
                                     decomposed + " "]}],
         [request("r-1", CHUNKS, gold_id="g-1")])

    def split_twice(req):
        if req.response_format["json_schema"]["name"] == "reference_claims":
            return {"claims": [SPLIT[0], SPLIT[0] + " ", SPLIT[1]]}
        return words_judge(req)

    with JudgeServer(reply=split_twice) as server:
        use_judge(judge(server))
        score(con, routes=("claims",))
    claims = stored_claims(con, "v1")
    assert claims["g-1"] == (SPLIT[0], SPLIT[1]) and rows(con)["r-1"][1] == 2
    assert claims["g-2"] == (composed, "Beta holds.")
    # an unedited export and import of them changes nothing
    export_claims(con, tmp_path / "exported.jsonl", "v1")
    import_claims(con, tmp_path / "exported.jsonl", "v1")
    assert stored_claims(con, "v1") == claims
    path = tmp_path / "claims.jsonl"
    path.write_text(json.dumps({"gold_id": "g-1", "claims": ["A.", decomposed, composed]}))
    import_claims(con, path, "v1")
    assert stored_claims(con, "v1")["g-1"] == ("A.", decomposed)


def test_served_chunks_without_any_text_are_not_a_zero_and_cost_no_call(con, tmp_path,
                                                                        use_judge):
    # the retriever served chunks, but neither the log nor a manifest holds their text: what
    # was served is unknown, not empty, so the request is not measured (never a 0); a request
    # whose served chunks have some text is judged on those
    goldens = [{"gold_id": "g-1", "question": "q1?", "reference": REFERENCE},
               {"gold_id": "g-2", "question": "q2?", "claims": CLAIMS}]
    unread = [{"chunk_id": c["chunk_id"]} for c in CHUNKS]
    load(con, tmp_path, goldens, [
        request("r-unread", unread, gold_id="g-1"),
        request("r-some", [*unread[:2], CHUNKS[2]], gold_id="g-2"),
        request("r-empty", [], gold_id="g-2")])
    with JudgeServer(reply=splitting) as server:
        use_judge(judge(server))
        summary = score(con, routes=("claims",))
    # g-1's reference is not split: no request of it has a context to judge
    assert server.calls == 1
    got = rows(con)
    assert got["r-unread"] == ("no_context_text", None, None, None)
    assert got["r-some"][0] == "scored" and got["r-some"][1] == 4
    assert got["r-empty"] == ("scored", 4, 0, 0.0)
    assert summary.by_status["claims"] == {"no_context_text": 1, "scored": 2}
    assert con.execute("SELECT count(*) FROM recall_at_k WHERE request_id = 'r-unread'"
                       ).fetchall() == [(0,)]


def test_a_rescoring_without_a_judge_keeps_the_verdicts_already_given(
        con, tmp_path, use_judge, monkeypatch):
    # day 1 judged; a late request of day 1 arrives when no judge is configured: the day is
    # rescored, the judged request keeps its verdict (from the cache, no call), the new one
    # waits for a judge, and one served nothing is a real 0
    for name in ("RECALLWATCH_JUDGE_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    example(con, tmp_path)
    with JudgeServer() as server:
        use_judge(judge(server))
        score(con, routes=("claims",))
    judged = rows(con)["r-0"]
    assert judged[0] == "scored" and server.calls == 1
    write_jsonl(tmp_path / "late.jsonl", [request("r-late", CHUNKS[:2]),
                                          request("r-none", [])])
    ingest_logs(con, [str(tmp_path / "late.jsonl")])
    said = []
    register(ClaimsRoute(report=said.append))   # the built-in route, no judge in the env
    score(con, routes=("claims",))
    assert rows(con) == {"r-0": judged, "r-late": ("not_judged", None, None, None),
                         "r-none": ("scored", 4, 0, 0.0)}
    assert said and said[0].startswith("claims route not judged")


def test_a_rescoring_without_a_judge_keeps_a_failed_verdict_and_no_evidence(
        con, tmp_path, use_judge, monkeypatch):
    # what a judge settled stays as it is: a call that failed is judge_failed, a golden with
    # nothing to compare (blank claims, no reference) no_evidence, not "not judged"
    for name in ("RECALLWATCH_JUDGE_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    load(con, tmp_path, [{"gold_id": "g-fail", "question": "q1?", "claims": ["Fact two."]},
                         {"gold_id": "g-blank", "question": "q2?", "claims": ["\t"]},
                         {"gold_id": "g-ref", "question": "q3?", "reference": REFERENCE}],
         [request("r-fail", CHUNKS, gold_id="g-fail"),
          request("r-blank", CHUNKS, gold_id="g-blank"),
          request("r-ref", CHUNKS, gold_id="g-ref")])
    with JudgeServer(reply=lambda req: Fault("500")) as server:
        use_judge(judge(server))
        score(con, routes=("claims",))
    judged = rows(con)
    assert {r: v[0] for r, v in judged.items()} == {
        "r-fail": "judge_failed", "r-blank": "no_evidence", "r-ref": "judge_failed"}
    register(ClaimsRoute(report=lambda _: None))   # no judge now
    score(con, routes=("claims",))
    # the reference never split: nothing of it was judged, so it waits for a judge
    assert rows(con) == {**judged, "r-ref": ("not_judged", None, None, None)}


def test_blank_claims_and_blank_logged_texts_are_nothing_to_judge(con, tmp_path, use_judge):
    # a claim of a tab or a line break is blank, as a space is; a blank logged text gives way
    # to the manifest's, so the judge reads what was served
    from pipeline.ingest import ingest_index

    write_jsonl(tmp_path / "manifest.jsonl", [
        {"index_version": "idx-1", "chunk_id": c["chunk_id"], "text": c["text"]}
        for c in CHUNKS])
    ingest_index(con, str(tmp_path / "manifest.jsonl"), "idx-1")
    load(con, tmp_path, [{"gold_id": "g-1", "question": "q?",
                          "claims": [CLAIMS[0], "\n", "\t", " "]}],
         [request("r-manifest", [{"chunk_id": c["chunk_id"]} for c in CHUNKS], gold_id="g-1"),
          request("r-blank", [{"chunk_id": c["chunk_id"], "text": " \n"} for c in CHUNKS],
                  gold_id="g-1")])
    with JudgeServer() as server:
        use_judge(judge(server))
        score(con, routes=("claims",))
    assert stored_claims(con, "v1") == {"g-1": (CLAIMS[0],)}
    assert rows(con) == {"r-manifest": ("scored", 1, 1, 1.0), "r-blank": ("scored", 1, 1, 1.0)}
    assert server.calls == 1   # one context: the manifest's texts for both


def test_a_chunk_logged_with_its_text_in_one_step_is_read_as_logged_not_from_the_manifest(
        con, tmp_path, use_judge):
    # an agentic request logs urban with its text in step 1 and again without it in step 2;
    # the manifest holds an older text for it: the judge reads what was logged
    from pipeline.ingest import ingest_index

    write_jsonl(tmp_path / "manifest.jsonl", [
        {"chunk_id": "urban", "text": "(old manifest copy) Nothing about balances."}])
    ingest_index(con, str(tmp_path / "manifest.jsonl"), "idx-1")
    steps = request("r-1", [])
    del steps["retrieved"]
    steps["retrieval_steps"] = [[CHUNKS[0]], [{"chunk_id": "urban"}]]
    load(con, tmp_path, [{"gold_id": "g-1", "question": "q?", "claims": CLAIMS[:1]}], [steps])
    with JudgeServer() as server:
        use_judge(judge(server))
        score(con, routes=("claims",))
    assert rows(con) == {"r-1": ("scored", 1, 1, 1.0)}
    assert con.execute("SELECT contexts FROM judge_verdicts").fetchall() == [
        ([CHUNKS[0]["text"]],)]


@pytest.mark.parametrize("max_calls, max_tokens", [(None, None), (1, None), (2, None),
                                                  (3, None), (5, None), (None, 600),
                                                  (None, 900), (None, 1500)])
def test_a_dry_run_counts_the_splits_and_judgements_a_bounded_run_makes(con, tmp_path, use_judge,
                                                                         max_calls, max_tokens):
    # two references to split, each then judged on two distinct contexts: 6 calls unbounded;
    # a dry run counted all 6 whatever --max-calls or --max-tokens (2 to 5 made)
    from pipeline.routes.claims import estimate_score

    load(con, tmp_path, [{"gold_id": "g-1", "question": "q?", "reference": REFERENCE},
                         {"gold_id": "g-2", "question": "p?", "reference": REFERENCE + " Also."}],
         [request("r-1", CHUNKS[:2]), request("r-2", CHUNKS[2:]),
          request("r-3", CHUNKS[:1], gold_id="g-2"), request("r-4", CHUNKS[1:], gold_id="g-2")])
    with JudgeServer(reply=splitting) as server:
        config = judge(server, max_calls=max_calls, max_tokens=max_tokens)
        estimated = estimate_score(con, config, "v1")
        assert server.calls == 0
        use_judge(config)
        score(con, routes=("claims",))
    if max_tokens is None:
        assert estimated.calls == server.calls == min(6, max_calls or 6)
    else:   # the judging after a split is weighed with the reference for its claims: close
        assert estimated.tokens <= max_tokens
        assert abs(estimated.calls - server.calls) <= 1, (estimated, server.calls)


def test_reference_is_split_once_stored_and_export_import_round_trip(con, tmp_path, use_judge):
    load(con, tmp_path, [{"gold_id": "g-1", "question": "q?", "reference": REFERENCE}],
         [request("r-1", CHUNKS[:2]), request("r-2", CHUNKS[2:])])
    with JudgeServer(reply=splitting) as server:
        use_judge(judge(server))
        score(con, routes=("claims",))
        assert server.calls == 3   # one split, two distinct contexts
        assert server.log[0]["response_format"]["json_schema"]["name"] == "reference_claims"
        score(con, routes=("claims",))
        assert server.calls == 3   # never split again, verdicts cached
    assert con.execute("SELECT claim, source FROM golden_claims ORDER BY claim_no").fetchall() \
        == [(c, "judge") for c in SPLIT]
    assert rows(con)["r-1"] == ("scored", 3, 2, 2 / 3)

    path = tmp_path / "claims.jsonl"
    assert export_claims(con, path, "v1") == 1
    record = json.loads(path.read_text())
    assert record == {"gold_id": "g-1", "claims": SPLIT, "source": "judge"}
    record["claims"] = SPLIT[:2]
    path.write_text(json.dumps(record) + "\n")
    assert import_claims(con, path, "v1") == 1
    assert con.execute("SELECT list(claim ORDER BY claim_no), min(source) FROM golden_claims"
                       ).fetchone() == (SPLIT[:2], "import")
    export_claims(con, tmp_path / "again.jsonl", "v1")
    assert json.loads((tmp_path / "again.jsonl").read_text())["claims"] == SPLIT[:2]


def test_cli_dry_run_makes_no_call_and_prints_the_estimate(run_cli, tmp_path, monkeypatch):
    write_jsonl(tmp_path / "gold.jsonl", [{"gold_id": "g-1", "question": "q?",
                                           "claims": CLAIMS}])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", CHUNKS), request("r-2", CHUNKS[:1])])
    assert run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")[0] == 0
    assert run_cli("ingest", "logs", tmp_path / "logs.jsonl")[0] == 0
    assert run_cli("config", "--routes", "ids,claims")[0] == 0
    with JudgeServer(api_key=SECRET) as server:
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        code, out, err = run_cli("score", "--judge-model", "judge-model", "--dry-run")
        assert code == 0, err
        assert server.calls == 0
        assert "dry run" in out and "would make 2 call(s)" in out
        code, out, err = run_cli("score", "--judge-model", "judge-model", "--dry-run",
                                 "--max-calls", "1")
        assert code == 0 and server.calls == 0 and "would make 1 call(s)" in out, out
        # an empty window is the one error `score` gives, not "0 call(s)"
        code, out, err = run_cli("score", "--judge-model", "judge-model", "--dry-run",
                                 "--start", "2026-11-02", "--end", "2026-11-01")
        assert code == 2 and "the window is empty" in err, out + err
        code, out, err = run_cli("score", "--judge-model", "judge-model", "--lang", "en")
        assert code == 0, err
        assert server.calls == 2 and "made 2 call(s)" in out
        code, out2, err2 = run_cli("score", "--judge-model", "judge-model")
        assert server.calls == 2 and "made 0 call(s)" in out2
        code, out3, err3 = run_cli("claims", "export", tmp_path / "out.jsonl")
        assert code == 0 and "1 golden" in out3
        code, out4, err4 = run_cli("claims", "import", tmp_path / "out.jsonl")
        assert code == 0 and "1 golden" in out4
        # the route out of force: `score` calls nothing, and its dry run says so
        assert run_cli("config", "--routes", "ids")[0] == 0
        code, out5, err5 = run_cli("score", "--judge-model", "judge-model", "--dry-run")
        assert code == 0 and "would make" not in out5, out5
        assert "claims route is not in force (`recallwatch config --routes ids,claims`" in out5
    from pipeline.warehouse import connect
    with connect(tmp_path / "wh" / "recallwatch.duckdb") as wh:
        for table in ALL_TABLES:
            assert SECRET not in repr(wh.sql(f'SELECT * FROM "{table}"').fetchall())
    assert all(SECRET not in text for text in (out, err, out2, err2, out3, err3, out4, err4))


def _one_request_on_the_claims_route(run_cli, tmp_path, *more) -> None:
    write_jsonl(tmp_path / "gold.jsonl", [{"gold_id": "g-1", "question": "q?",
                                           "gold_chunk_ids": ["urban"], "claims": CLAIMS}])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", CHUNKS), *more])
    run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")
    run_cli("ingest", "logs", tmp_path / "logs.jsonl")
    run_cli("config", "--routes", "ids,claims")


def test_cli_without_a_judge_skips_the_claims_route_with_one_line(run_cli, tmp_path,
                                                                   monkeypatch):
    for name in ("RECALLWATCH_JUDGE_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    # days apart, so scored as windows of their own: said once, not once a window
    _one_request_on_the_claims_route(run_cli, tmp_path, *(
        request(f"r-{day}", CHUNKS, ts=f"2026-11-{day:02d}T10:00:00Z") for day in (3, 5)))
    code, out, err = run_cli("run", "--out", tmp_path / "report")
    assert code == 0, err
    assert (out + err).count("claims route not judged") == 1, out + err
    assert "RECALLWATCH_JUDGE_MODEL" in out + err
    assert "route ids" in out and "route claims" not in out and "3 day window(s)" in out


@pytest.mark.parametrize("env, refused", [
    ({"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "127.0.0.1:8000"},
     "OPENAI_BASE_URL must be an http:// or https:// URL"),
    ({}, "OPENAI_API_KEY is not set"),
])
def test_a_judge_configured_in_the_environment_but_wrongly_is_refused_not_called_absent(
        run_cli, tmp_path, monkeypatch, env, refused):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RECALLWATCH_JUDGE_MODEL", "judge-x")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _one_request_on_the_claims_route(run_cli, tmp_path)
    for command in (("score",), ("run",)):
        code, out, err = run_cli(*command)
        assert code == 2 and refused in err and "no judge is configured" not in out + err


def test_cli_run_judges_the_claims_route_in_force(run_cli, tmp_path, monkeypatch):
    server, out = run_with_judge(
        run_cli, tmp_path, monkeypatch,
        {"gold_id": "g-1", "question": "q?", "gold_chunk_ids": ["urban"], "claims": CLAIMS},
        [request("r-1", CHUNKS)], "--max-calls", "5", "--out", tmp_path / "report")
    assert server.calls == 1 and "made 1 call(s)" in out
    from pipeline.warehouse import connect
    with connect(tmp_path / "wh" / "recallwatch.duckdb") as wh:
        assert wh.sql("SELECT status, recall FROM request_scores WHERE route = 'claims'"
                      ).fetchall() == [("scored", 0.75)]
    # a claim has no chunk to look up: the report of the route says it records no miss
    # causes (it said "No missing gold chunks among 1 scored requests")
    code, _, err = run_cli("report", "--route", "claims", "--out", tmp_path / "claims")
    html = (tmp_path / "claims" / "report.html").read_text(encoding="utf-8")
    misses = html[html.index('<section id="misses">'):html.index('<section id="worst">')]
    assert code == 0 and "records no miss causes" in misses and "gold chunks" not in misses


def test_a_split_with_half_a_character_keeps_its_claims_and_one_nested_past_reading_fails(
        con, tmp_path, use_judge):
    # both reached DuckDB or json as given: internal error, every run paying for the call again
    load(con, tmp_path, [{"gold_id": "g-1", "question": "q1?", "reference": REFERENCE},
                         {"gold_id": "g-2", "question": "q2?", "reference": "Another one."}],
         [request("r-1", CHUNKS, gold_id="g-1"), request("r-2", CHUNKS, gold_id="g-2")])

    def odd_splits(req):
        if req.response_format["json_schema"]["name"] != "reference_claims":
            return words_judge(req)
        if "Another one." in req.messages[-1]["content"]:
            return '{"claims": ' + "[" * 100_000
        return json.dumps({"claims": SPLIT}).replace("5000 rupees.", "5000 rupees. \\ud83d")

    with JudgeServer(reply=odd_splits) as server:
        use_judge(judge(server))
        score(con, routes=("claims",))
    stored = stored_claims(con, "v1")
    assert stored == {"g-1": (SPLIT[0][:-1] + ". \ufffd", SPLIT[1], SPLIT[2])}
    assert rows(con)["r-1"][:2] == ("scored", 3)
    assert rows(con)["r-2"][0] == "judge_failed"


def test_a_claims_file_holding_half_a_character_is_one_sentence_and_changes_nothing(
        con, tmp_path):
    load(con, tmp_path, [{"gold_id": "g-1", "question": "q?", "claims": ["A holds."]}],
         [request("r-1", CHUNKS)])
    path = tmp_path / "claims.jsonl"
    path.write_text('{"gold_id": "g-1", "claims": ["B holds. \\ud83d"]}\n', encoding="utf-8")
    with pytest.raises(RecallwatchError, match=r"line 1 holds an unpaired surrogate \(\\ud83d"):
        import_claims(con, path, "v1")
    assert con.sql("SELECT count(*) FROM golden_claims").fetchall() == [(0,)]
    # a line nested past reading: the same one sentence as any line that is no JSON object
    path.write_text("[" * 200_000 + "\n", encoding="utf-8")
    with pytest.raises(RecallwatchError, match="line 1 must be JSON with a gold_id"):
        import_claims(con, path, "v1")


def test_claims_with_line_separators_or_a_byte_order_mark_import_as_exported(con, tmp_path):
    # a claim holding U+2028, U+2029 or U+0085 is one JSON line as exported, but the import
    # split lines there too and refused its own export; a file saved with a BOM was refused
    claims = ["The urban balance is 5,000.\u2028Rural is 1,000.", "The fee is 10\u0085.",
              "Paragraph\u2029two."]
    load(con, tmp_path, [{"gold_id": "g-1", "question": "q?", "claims": claims},
                         {"gold_id": "g-2", "question": "q2?", "claims": ["fee is 10"]}],
         [request("r-1", CHUNKS)])
    path = tmp_path / "claims.jsonl"
    assert export_claims(con, path, "v1") == 2
    assert import_claims(con, path, "v1") == 2
    stored = con.execute("SELECT list(claim ORDER BY claim_no) FROM golden_claims "
                         "WHERE gold_id = 'g-1'").fetchone()[0]
    assert stored == claims
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps({"gold_id": "g-2", "claims": ["fee: 10"]}).encode()
                    + b"\r\n")
    assert import_claims(con, bom, "v1") == 1
    assert con.execute("SELECT claim FROM golden_claims WHERE gold_id = 'g-2'").fetchall() == [
        ("fee: 10",)]


def test_a_claims_file_naming_a_golden_twice_is_refused_and_changes_nothing(con, tmp_path):
    # the second line replaced the first silently: the claims of the first were lost
    load(con, tmp_path, [{"gold_id": "g-1", "question": "q?", "claims": ["A holds."]}],
         [request("r-1", CHUNKS)])
    path = tmp_path / "claims.jsonl"
    write_jsonl(path, [{"gold_id": "g-1", "claims": ["B holds."]},
                       {"gold_id": "g-1", "claims": ["C holds."]}])
    with pytest.raises(RecallwatchError, match=r"names gold_id 'g-1' twice \(lines 1 and 2\)"):
        import_claims(con, path, "v1")
    assert con.sql("SELECT count(*) FROM golden_claims").fetchall() == [(0,)]
