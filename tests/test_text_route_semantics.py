"""What the text routes (passages, claims) measure at each cutoff and what `run` keeps current
for them: claims recall below the served context is not measured (no row, never a 0), precision
counts served chunks that hold something needed (never above 1; undefined on claims), and days
whose claims can be judged again or were re-imported are stale for `run`. The judge is a real
OpenAI-compatible server on loopback (tests/judge_server.py)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_server import WORKED_CLAIMS, Fault, JudgeServer, words_judge  # noqa: E402

from pipeline import api  # noqa: E402
from pipeline.aggregate import aggregate  # noqa: E402
from pipeline.claims import export_claims, import_claims  # noqa: E402
from pipeline.config import resolve  # noqa: E402
from pipeline.ingest import ingest_gold, ingest_logs  # noqa: E402
from pipeline.judge import JudgeConfig  # noqa: E402
from pipeline.report import write_report  # noqa: E402
from pipeline.routes import register  # noqa: E402
from pipeline.routes.claims import ClaimsRoute  # noqa: E402
from pipeline.score import score  # noqa: E402
from pipeline.state import stale_metric_days, stale_score_days  # noqa: E402
from pipeline.warehouse import connect  # noqa: E402
from tests.conftest import request, write_jsonl  # noqa: E402

URBAN = {"chunk_id": "urban", "text": "Urban branches require a minimum balance of 5000 rupees."}
FEE = {"chunk_id": "fee", "text": "A fee of 50 rupees applies when the balance falls below the "
                                  "minimum."}
KYC = {"chunk_id": "kyc", "text": "Opening an account needs KYC documents: an identity proof "
                                  "and an address proof."}
SEMI = {"chunk_id": "semi", "text": "Semi-urban branches require a minimum balance of 2500 "
                                    "rupees."}
WORKED = [URBAN, FEE, KYC, SEMI]


@pytest.fixture(autouse=True)
def _built_in_claims_route(monkeypatch):
    """Tests register claims routes with a judge; the built-in one comes back after each, and
    no judge leaks in from the environment."""
    for name in ("RECALLWATCH_JUDGE_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    yield
    register(ClaimsRoute())


def judge(server: JudgeServer, **overrides) -> JudgeConfig:
    return JudgeConfig(**{"model": "judge-model", "base_url": server.url, "api_key": "sk-test",
                          "timeout": 2.0, "backoff": 0.01, "max_backoff": 0.05,
                          "max_retries": 1, "concurrency": 1, **overrides})


def load(con, tmp_path, goldens, records) -> None:
    write_jsonl(tmp_path / "gold.jsonl", goldens)
    write_jsonl(tmp_path / "logs.jsonl", records)
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])


def steps(request_id: str, lists: list[list[dict]]) -> dict:
    record = request(request_id, [], retrieval_steps=lists)
    del record["retrieved"]
    return record


def at_k(con, route: str) -> dict[tuple[str, int], tuple]:
    return {(r[0], r[1]): r[2:] for r in con.execute(
        "SELECT request_id, k, recall, precision FROM recall_at_k WHERE route = $route",
        {"route": route}).fetchall()}


def metrics(con, route: str) -> dict[int, tuple]:
    return {r[0]: r[1:] for r in con.execute(
        "SELECT k, n, mean_recall, mean_precision FROM window_metrics WHERE route = $route "
        "AND slice = 'all' AND grain = 'day' ORDER BY k", {"route": route}).fetchall()}


def curve_rows(html: str) -> dict[int, list[str]]:
    """The report's recall@k table: cutoff -> [recall, precision, hit rate, n] as printed."""
    table = html[html.index('id="fig-curve-table"'):]
    table = table[:table.index("</table>")]
    found = {}
    for row in re.findall(r"<tr><td class=\"num\">(\d+)</td>(.*?)</tr>", table, re.S):
        found[int(row[0])] = re.findall(r"<td class=\"num\">(.*?)</td>", row[1])[:4]
    return found


# ------------------------------------------------------- claims recall below the served context

def test_claims_recall_below_the_served_context_is_not_measured_never_zero(con, tmp_path):
    # r-4: the worked example, 4 chunks served (k 4): 3 of 4 claims. r-1: one chunk served: 1
    # of 4. r-short: k 10 logged but only 2 chunks came back: the judge read both, 2 of 4.
    load(con, tmp_path, [{"gold_id": "g-1", "question": "What is the minimum balance?",
                          "claims": WORKED_CLAIMS}],
         [request("r-4", WORKED), request("r-1", [URBAN]),
          request("r-short", [URBAN, FEE], k=10)])
    with JudgeServer() as server:
        register(ClaimsRoute(judge=judge(server)))
        score(con, routes=("claims",), cutoffs=(1, 2, 3, 4, 10))
    rows = {key: value[0] for key, value in at_k(con, "claims").items()}
    assert rows == {("r-1", 1): 0.25, ("r-1", 2): 0.25, ("r-1", 3): 0.25, ("r-1", 4): 0.25,
                    ("r-1", 10): 0.25,
                    ("r-short", 2): 0.5, ("r-short", 3): 0.5, ("r-short", 4): 0.5,
                    ("r-short", 10): 0.5,
                    ("r-4", 4): 0.75, ("r-4", 10): 0.75}
    # the shared aggregation counts only the requests measured at each cutoff
    aggregate(con, routes=("claims",), cutoffs=(1, 2, 3, 4, 10))
    by_k = metrics(con, "claims")
    assert {k: (n, mean) for k, (n, mean, _) in by_k.items()} == {
        1: (1, 0.25), 2: (2, 0.375), 3: (2, 0.375), 4: (3, 0.5), 10: (3, 0.5)}
    html = write_report(con, tmp_path / "report", route="claims", k=1,
                        gold_version="v1").read_text()
    curve = curve_rows(html)
    assert curve[1][0] == "0.250" and curve[1][3] == "1"
    assert curve[4][0] == "0.500" and curve[4][3] == "3"


def test_claims_measured_at_no_cutoff_count_with_n_zero_and_are_aggregated_once(con,
                                                                                   tmp_path):
    load(con, tmp_path, [{"gold_id": "g-1", "question": "What is the minimum balance?",
                          "claims": WORKED_CLAIMS}], [request("r-4", WORKED)])
    with JudgeServer() as server:
        register(ClaimsRoute(judge=judge(server)))
        score(con, routes=("claims",), cutoffs=(1, 2))
    assert at_k(con, "claims") == {}
    aggregate(con, routes=("claims",), cutoffs=(1, 2))
    assert metrics(con, "claims") == {1: (0, None, None), 2: (0, None, None)}
    config = resolve(con, routes=("claims",), cutoffs=(1, 2))
    assert stale_metric_days(con, config, "day") == []


# --------------------------------------------------------------------- precision at most 1

def test_passages_precision_counts_served_chunks_holding_a_passage_never_above_one(con,
                                                                                   tmp_path):
    passages = ["Urban branches require a minimum balance of 5000 rupees.",
                "Urban branches require a minimum balance of 5000 rupees!",
                "A fee of 50 rupees applies when the balance falls below the minimum."]
    load(con, tmp_path, [{"gold_id": "g-1", "question": "What is the minimum balance?",
                          "gold_passages": passages}],
         [request("r-one", [URBAN]),            # one chunk covers two passages
          request("r-two", [URBAN, KYC, FEE])])  # 2 of 3 chunks hold a passage
    score(con, routes=("passages",), cutoffs=(1, 2, 3))
    assert con.execute("SELECT request_id, covered, precision FROM request_scores "
                       "ORDER BY request_id").fetchall() == [("r-one", 2, 1.0),
                                                             ("r-two", 3, 2 / 3)]
    assert at_k(con, "passages") == {
        ("r-one", 1): (2 / 3, 1.0), ("r-one", 2): (2 / 3, 1.0), ("r-one", 3): (2 / 3, 1.0),
        ("r-two", 1): (2 / 3, 1.0), ("r-two", 2): (2 / 3, 0.5), ("r-two", 3): (1.0, 2 / 3)}
    aggregate(con, routes=("passages",), cutoffs=(1, 2, 3))
    assert all(p <= 1.0 for _, _, p in metrics(con, "passages").values())


def test_passages_precision_tells_chunks_at_the_same_place_apart(con, tmp_path):
    # two retrieval steps, each with one chunk at place 1: only one of them holds the two
    # passages
    load(con, tmp_path, [{"gold_id": "g-1", "question": "What is the minimum balance?",
                          "gold_passages": [URBAN["text"], URBAN["text"] + "!"]}],
         [steps("r-1", [[URBAN], [KYC]])])
    score(con, routes=("passages",), cutoffs=(1,))
    assert at_k(con, "passages") == {("r-1", 1): (1.0, 0.5)}


def test_claims_precision_is_undefined_and_reads_as_a_dash(con, tmp_path):
    load(con, tmp_path, [{"gold_id": "g-1", "question": "What is the minimum balance?",
                          "claims": WORKED_CLAIMS, "gold_chunk_ids": ["urban"]}],
         [request("r-1", WORKED)])
    with JudgeServer() as server:
        register(ClaimsRoute(judge=judge(server)))
        score(con, routes=("ids", "claims"), cutoffs=(4, 10))
    assert con.execute("SELECT route, recall, precision FROM request_scores ORDER BY route"
                       ).fetchall() == [("claims", 0.75, None), ("ids", 1.0, 0.25)]
    assert at_k(con, "claims") == {("r-1", 4): (0.75, None), ("r-1", 10): (0.75, None)}
    aggregate(con, routes=("ids", "claims"), cutoffs=(4, 10))
    assert metrics(con, "claims") == {4: (1, 0.75, None), 10: (1, 0.75, None)}
    assert metrics(con, "ids")[4] == (1, 1.0, 0.25)
    html = write_report(con, tmp_path / "report", route="claims", k=4,
                        gold_version="v1").read_text()
    assert curve_rows(html)[4][:2] == ["0.750", "—"]


def test_a_warehouse_scored_before_relevant_chunks_were_counted_is_rescored(tmp_path):
    path = tmp_path / "wh.duckdb"
    with connect(path) as con:
        load(con, tmp_path, [{"gold_id": "g-1", "question": "What is the minimum balance?",
                              "gold_chunk_ids": ["urban"]}], [request("r-1", WORKED)])
        score(con, cutoffs=(1, 4))
        config = resolve(con, cutoffs=(1, 4))
        assert stale_score_days(con, config) == []
        # as an earlier recallwatch left it
        con.execute("DROP VIEW recall_at_k")
        con.execute("ALTER TABLE request_cutoffs DROP COLUMN relevant")
        con.execute("ALTER TABLE score_windows DROP COLUMN route_inputs")
    with connect(path) as con:
        assert [d.date().isoformat() for d in stale_score_days(con, config)] == ["2026-11-01"]
        assert con.execute("SELECT precision FROM recall_at_k").fetchall() == [(None,), (None,)]
        score(con, cutoffs=(1, 4))
        assert stale_score_days(con, config) == []
        assert con.execute("SELECT k, precision FROM recall_at_k ORDER BY k").fetchall() == [
            (1, 1.0), (4, 0.25)]


# -------------------------------------------------------------- run re-judges what it can

def claims_gold(tmp_path) -> Path:
    return write_jsonl(tmp_path / "gold.jsonl", [
        {"gold_id": f"g-{g}", "question": f"question {g}?",
         "claims": [f"Branch {g} opens at {g + 1} o'clock.", f"Branch {g} has a garden."]}
        for g in range(4)])


def claims_logs(tmp_path) -> Path:
    # two days, four goldens, one distinct context per golden and day
    return write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r-{day}-{g}", [{"chunk_id": f"c-{g}-{day}",
                                  "text": f"Branch {g} opens at {g + 1} o'clock (day {day})."}],
                gold_id=f"g-{g}", ts=f"2026-11-0{day}T10:00:00Z")
        for day in (1, 2) for g in range(4)])


def claims_state(warehouse: Path) -> tuple[dict[str, int], list[tuple]]:
    with connect(warehouse) as con:
        statuses = dict(con.execute("SELECT status, count(*) FROM request_scores "
                                    "WHERE route = 'claims' GROUP BY status").fetchall())
        means = con.execute("SELECT window_start, n, n_excluded, mean_recall FROM window_metrics"
                            " WHERE route = 'claims' AND slice = 'all' AND grain = 'day' "
                            "AND k = 10 ORDER BY window_start").fetchall()
    return statuses, means


def test_run_judges_again_what_was_not_judged_and_rescores_imported_claims(tmp_path):
    warehouse = tmp_path / "wh" / "recallwatch.duckdb"
    api.ingest_gold(warehouse, str(claims_gold(tmp_path)), "v1")
    api.configure(warehouse, routes=("ids", "claims"))
    logs = [str(claims_logs(tmp_path))]
    with JudgeServer() as server:
        # no judge: every claims request is not_judged, and a second run does not rescore them
        register(ClaimsRoute())
        first = api.run(warehouse, logs=logs)
        assert len(first.days_scored) == 2
        assert claims_state(warehouse)[0] == {"not_judged": 8}
        assert api.run(warehouse, logs=logs).days_scored == ()

        # a judge with a budget of 3 calls: 3 of 8 distinct items judged
        register(ClaimsRoute(judge=judge(server, max_calls=3)))
        second = api.run(warehouse, logs=logs)
        assert len(second.days_scored) == 2 and server.calls == 3
        statuses, means = claims_state(warehouse)
        assert statuses == {"scored": 3, "not_judged": 5}
        assert sum(n for _, n, _, _ in means) == 3 and sum(e for *_, e, _ in means) == 5

        # with budget: the days left not_judged are judged, each missing item once
        register(ClaimsRoute(judge=judge(server)))
        third = api.run(warehouse, logs=logs)
        assert len(third.days_scored) == 2 and server.calls == 8
        statuses, means = claims_state(warehouse)
        assert statuses == {"scored": 8}
        assert [(n, excluded, mean) for _, n, excluded, mean in means] == [(4, 0, 0.5),
                                                                           (4, 0, 0.5)]
        assert api.run(warehouse, logs=logs).days_scored == ()
        assert server.calls == 8

        # a person corrects one golden's claims: the next run rescores, calling the judge only
        # for that golden's contexts (one per day)
        export = tmp_path / "claims.jsonl"
        with connect(warehouse) as con:
            export_claims(con, export, "v1")
            corrected = [json.loads(line) for line in export.read_text().splitlines()]
            corrected = [{"gold_id": "g-0", "claims": [corrected[0]["claims"][0]]}]
            export.write_text(json.dumps(corrected[0]) + "\n")
            assert import_claims(con, export, "v1") == 1
        fourth = api.run(warehouse, logs=logs)
        assert len(fourth.days_scored) == 2 and server.calls == 10
        assert {tuple(r["claims"]) for r in server.log[-2:]} == {
            ("Branch 0 opens at 1 o'clock.",)}
        assert [mean for *_, mean in claims_state(warehouse)[1]] == [0.625, 0.625]
        last = api.run(warehouse, logs=logs)
        assert last.days_scored == () and last.days_aggregated == ()
        assert server.calls == 10


def test_run_judges_again_what_the_judge_failed_once_per_run(tmp_path):
    warehouse = tmp_path / "wh" / "recallwatch.duckdb"
    api.ingest_gold(warehouse, str(claims_gold(tmp_path)), "v1")
    api.configure(warehouse, routes=("claims",))
    logs = [str(claims_logs(tmp_path))]
    broken = {"on": True}

    def reply(req):
        return Fault("500") if broken["on"] and "Branch 3" in req.context else words_judge(req)

    with JudgeServer(reply=reply) as server:
        register(ClaimsRoute(judge=judge(server, max_retries=0)))
        api.run(warehouse, logs=logs)
        assert claims_state(warehouse)[0] == {"scored": 6, "judge_failed": 2}
        calls = server.calls
        # still failing: the next run tries those days once more, and only the failed items
        again = api.run(warehouse, logs=logs)
        assert len(again.days_scored) == 2 and server.calls > calls
        assert all("Branch 3" in r["claims"][0] for r in server.log[calls:])
        broken["on"] = False
        api.run(warehouse, logs=logs)
        assert claims_state(warehouse)[0] == {"scored": 8}
        calls = server.calls
        assert api.run(warehouse, logs=logs).days_scored == ()
        assert server.calls == calls
