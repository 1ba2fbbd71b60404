"""`recallwatch demo` end to end (pipeline/demo/run.py through the CLI), on a demo world cut to
three days of 200 requests: with a judge (the loopback OpenAI-compatible server of
tests/judge_server.py, whose words_judge attributes a claim when its words are in the context)
it scores the claims route on a sample of at most CLAIMS_CALLS_PER_DAY calls a day, prints the
route and what the judge did, and writes the route's report; a second demo run makes no call.
Without a judge it says in one line how to configure one, and scores no claims."""

from __future__ import annotations

import re
import sys
from functools import partial
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_server import JudgeServer  # noqa: E402

import pipeline.demo  # noqa: E402
from pipeline.demo.run import CLAIMS_CALLS_PER_DAY  # noqa: E402
from pipeline.warehouse import connect  # noqa: E402

DAYS, PER_DAY = 3, 200
JUDGE_ENV = ("RECALLWATCH_JUDGE_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL")
SECRET = "sk-demo-RECALLWATCH-0b7e"

pytestmark = pytest.mark.slow


@pytest.fixture
def small_world(monkeypatch):
    """The demo's world generator, cut to DAYS days of PER_DAY requests (the CLI imports it from
    pipeline.demo when it runs)."""
    monkeypatch.setattr(pipeline.demo, "generate_demo_world",
                        partial(pipeline.demo.generate_demo_world, days=DAYS,
                                requests_per_day=PER_DAY))


@pytest.fixture
def no_judge(monkeypatch):
    """No judge configured in the environment."""
    for name in JUDGE_ENV:
        monkeypatch.delenv(name, raising=False)


def demo(run_cli, tmp_path):
    return run_cli("demo", "--dir", tmp_path / "world", "--out", tmp_path / "reports")


def claims_rows(warehouse) -> tuple[dict, int, int]:
    with connect(warehouse, read_only=True) as con:
        statuses = dict(con.sql("SELECT status, count(*) FROM request_scores "
                                "WHERE route = 'claims' GROUP BY status").fetchall())
        metrics = con.sql("SELECT count(*) FROM window_metrics WHERE route = 'claims' "
                          "AND grain = 'day' AND slice = 'all' AND k = 5 AND n > 0"
                          ).fetchall()[0][0]
        verdicts = con.sql("SELECT count(*) FROM judge_verdicts").fetchall()[0][0]
    return statuses, metrics, verdicts


def test_demo_with_a_judge_scores_a_bounded_claims_sample_and_reports_it(
        run_cli, warehouse, tmp_path, monkeypatch, small_world):
    with JudgeServer(api_key=SECRET) as server:
        monkeypatch.setenv("RECALLWATCH_JUDGE_MODEL", "demo-judge")
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        code, out, err = demo(run_cli, tmp_path)
        assert code == 0, err
        calls = server.calls
        assert 0 < calls <= DAYS * CLAIMS_CALLS_PER_DAY
        assert all(entry["authorized"] for entry in server.log)
        # The gold set gives the claims: no call splits a reference.
        assert all(entry["response_format"]["json_schema"]["name"]
                   == "context_recall_classifications" for entry in server.log)

        again, out_again, err_again = demo(run_cli, tmp_path)
        assert again == 0, err_again
        assert server.calls == calls   # every verdict came from the warehouse cache

    assert re.search(r"^claims route \(RAGAS LLM, judge demo-judge, .*\): idx-v1 \d\.\d{3} → "
                     r"\d\.\d{3} \(mean recall@5, first → last day\)$", out, re.M), out
    tally = re.search(r"^judge \(demo-judge, at most 10 calls a day\): made (\d+) call\(s\)",
                      out, re.M)
    assert tally and int(tally.group(1)) == calls, out
    assert re.search(r"^judge \(demo-judge, .*\): made 0 call\(s\)", out_again, re.M), out_again
    assert "set RECALLWATCH_JUDGE_MODEL" not in out
    assert SECRET not in out + err + out_again + err_again

    statuses, metrics, verdicts = claims_rows(warehouse)
    assert 0 < statuses["scored"] <= DAYS * CLAIMS_CALLS_PER_DAY
    assert statuses["not_judged"] > 0 and verdicts == calls
    assert metrics == DAYS   # one daily window of the claims route with a mean per day

    claims_report = tmp_path / "reports" / "claims" / "report.html"
    assert f"claims route report: {claims_report.resolve()}" in out
    html = claims_report.read_text(encoding="utf-8")
    assert "route=claims" in html and 'data-route="claims"' in html
    ids_report = (tmp_path / "reports" / "report.html").read_text(encoding="utf-8")
    assert "<td>claims</td>" in ids_report   # listed among the routes in the warehouse
    # The sample is judged once: a later `recallwatch run` here does not judge the rest.
    code, config_out, _ = run_cli("config")
    assert code == 0 and "routes ids,passages" in config_out


def test_demo_without_a_judge_says_in_one_line_how_to_configure_one(
        run_cli, warehouse, tmp_path, small_world, no_judge):
    code, out, err = demo(run_cli, tmp_path)
    assert code == 0, err
    lines = [line for line in out.splitlines() if "RECALLWATCH_JUDGE_MODEL" in line]
    assert lines == ["claims route: set RECALLWATCH_JUDGE_MODEL and OPENAI_API_KEY (and "
                     "OPENAI_BASE_URL for another server) to score reference claims too"]
    assert "passages route (RAGAS NonLLM" in out
    statuses, metrics, verdicts = claims_rows(warehouse)
    assert (statuses, metrics, verdicts) == ({}, 0, 0)
    assert not (tmp_path / "reports" / "claims").exists()
    assert (tmp_path / "reports" / "report.html").exists()


def test_demo_with_a_model_but_no_key_says_the_same_one_line(run_cli, tmp_path, monkeypatch,
                                                               small_world):
    monkeypatch.setenv("RECALLWATCH_JUDGE_MODEL", "demo-judge")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, out, err = demo(run_cli, tmp_path)
    assert code == 0, err
    assert [line for line in out.splitlines() if "OPENAI_API_KEY" in line] == [
        "claims route: set RECALLWATCH_JUDGE_MODEL and OPENAI_API_KEY (and OPENAI_BASE_URL for "
        "another server) to score reference claims too"]


def test_demo_loads_only_the_files_it_wrote_and_checks_out_before_any_work(
        run_cli, warehouse, tmp_path, small_world, no_judge):
    taken = tmp_path / "taken"
    taken.write_text("a file where the report would go\n")
    code, _, err = run_cli("demo", "--dir", tmp_path / "world", "--out", taken)
    assert code == 2 and f"cannot write the report to {taken} (File exists)" in err
    assert not (tmp_path / "world").exists() and not Path(warehouse).exists()
    stray = tmp_path / "world" / "logs" / "dt=2026-10-01" / "mine.jsonl"
    stray.parent.mkdir(parents=True)
    stray.write_text('{"request_id": "x", "timestamp": "2026-10-01T10:00:00Z", "query": "q", '
                     '"index_version": "idx-v1", "retrieved": []}\n')
    code, _, err = demo(run_cli, tmp_path)
    assert code == 0, err
    with connect(warehouse, read_only=True) as con:
        assert con.sql("SELECT count(*) FROM requests").fetchall()[0][0] == DAYS * PER_DAY
        sources = [row[0] for row in con.sql("SELECT source FROM ingest_files").fetchall()]
    assert not [source for source in sources if "mine.jsonl" in source]
    assert stray.exists()   # left alone, not loaded


def test_a_demo_warehouse_of_an_earlier_release_runs_the_demo_again(
        run_cli, warehouse, tmp_path, small_world, no_judge):
    code, _, err = demo(run_cli, tmp_path)
    assert code == 0, err
    with connect(warehouse) as con:   # as a release before gold_versions.index_version left it
        con.execute("ALTER TABLE gold_versions DROP COLUMN index_version")
    code, out, err = demo(run_cli, tmp_path)
    assert code == 0, err
    assert "report:" in out


def test_a_demo_of_another_seed_into_a_loaded_world_is_refused_before_it_changes_a_file(
        run_cli, warehouse, tmp_path, small_world, no_judge):
    code, _, err = demo(run_cli, tmp_path)
    assert code == 0, err
    world = tmp_path / "world"

    def files() -> dict:
        return {p: p.read_bytes() for p in sorted(world.rglob("*")) if p.is_file()}

    before = files()
    code, _, err = run_cli("demo", "--dir", world, "--out", tmp_path / "reports", "--seed", "8")
    assert code == 2
    assert f"{warehouse} holds the demo gold set 'gold-2026-10' of another world" in err
    assert files() == before
    # a world of seed 8 written there by hand (or by an earlier release) is no reason to refuse
    # the world the warehouse holds: the same seed runs again and rewrites the folder
    pipeline.demo.generate_demo_world(world, seed=8)
    assert files() != before
    code, _, err = demo(run_cli, tmp_path)
    assert code == 0, err
    assert files() == before
    # seed 8 with its own folder and warehouse runs
    code, _, err = run_cli("--warehouse", tmp_path / "w8.duckdb", "demo", "--dir",
                           tmp_path / "world8", "--out", tmp_path / "reports8", "--seed", "8")
    assert code == 0, err
