"""The `recallwatch` command end to end on small files: the worked examples of the README's
"What recall means here", help for every command, and one-sentence errors without tracebacks."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
import sys

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import cli
from pipeline.config import in_force
from pipeline.warehouse import connect
from tests.conftest import golden, request, write_jsonl

CLAIMS_GOLDEN = golden(
    "g-bal", ["urban", "fee", "rural", "semi-urban"],
    question="What is the minimum balance for a savings account?",
    reference=("Urban branches need a 10,000 balance; a 500 fee applies below it; rural "
               "branches need 2,500; semi-urban branches need 5,000."),
)


def test_worked_example_three_of_four_claims_is_075_and_passes_07(tmp_path, run_cli, warehouse):
    write_jsonl(tmp_path / "gold.jsonl", [CLAIMS_GOLDEN])
    write_jsonl(tmp_path / "logs" / "day.jsonl", [
        request("r-1", ["urban", "fee", "kyc", "semi-urban"], gold_id="g-bal"),
    ])
    assert run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")[0] == 0
    assert run_cli("ingest", "logs", tmp_path / "logs")[0] == 0
    assert run_cli("score", "--pass-mark", "0.7")[0] == 0
    assert run_cli("aggregate")[0] == 0
    code, out, _ = run_cli("export", "request_scores", tmp_path / "scores.csv")
    assert code == 0, out
    (row,) = list(csv.DictReader(open(tmp_path / "scores.csv")))
    assert (row["needed"], row["covered"], float(row["recall"])) == ("4", "3", 0.75)
    assert row["status"] == "scored" and row["full_coverage"] == "false"
    con = duckdb.connect(str(warehouse), read_only=True)
    pass_rate, pass_mark, n = con.sql(
        "SELECT pass_rate, pass_mark, n FROM window_metrics "
        "WHERE slice = 'all' AND k = 5").fetchall()[0]
    assert (pass_rate, pass_mark, n) == (1.0, 0.7, 1)
    cause = con.sql("SELECT chunk_id, cause FROM miss_causes").fetchall()
    assert cause == [("rural", "not_retrieved")]


def test_worked_example_ranking_gives_recall_at_1_to_5(tmp_path, run_cli):
    write_jsonl(tmp_path / "gold.jsonl", [CLAIMS_GOLDEN])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("r-2", ["urban", "fee", "KYC", "semi-urban", "rural"], gold_id="g-bal"),
    ])
    run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")
    run_cli("ingest", "logs", tmp_path / "logs.jsonl")
    assert run_cli("score", "--cutoffs", "1,2,3,4,5")[0] == 0
    run_cli("export", "recall_at_k", tmp_path / "rak.jsonl")
    import json
    rows = [json.loads(line) for line in open(tmp_path / "rak.jsonl")]
    by_k = {r["k"]: r["recall"] for r in rows}
    assert by_k == {1: 0.25, 2: 0.50, 3: 0.50, 4: 0.75, 5: 1.00}


@pytest.mark.parametrize("command", [
    [], ["ingest"], ["ingest", "logs"], ["ingest", "gold"], ["ingest", "index"], ["score"],
    ["config"], ["aggregate"], ["report"], ["export"], ["run"], ["demo"],
])
def test_every_command_has_help(command, capsys):
    from pipeline import cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main([*command, "--help"])
    assert exit_info.value.code == 0
    assert "usage: recallwatch" in capsys.readouterr().out


def test_missing_input_is_one_sentence_not_a_traceback(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "--warehouse", str(tmp_path / "w.duckdb"),
         "ingest", "logs", str(tmp_path / "nope")],
        capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    expected = f"recallwatch: error: no such file or directory: {tmp_path / 'nope'}"
    assert result.stderr.strip() == expected


def test_a_reader_that_goes_away_stops_the_command_quietly(tmp_path):
    # `recallwatch ingest logs ... | head -0`: no "rolled back" message, no error at exit
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    command = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "--warehouse", str(tmp_path / "w.duckdb"),
         "ingest", "logs", str(tmp_path / "logs.jsonl")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    command.stdout.close()   # before the command has printed anything
    _, err = command.communicate(timeout=120)
    assert (command.returncode, err.decode()) == (141, "")


def test_a_reader_that_goes_away_from_a_table_stops_the_command_quietly(tmp_path):
    # `recallwatch run | head -1`: the closing table is printed by rich, whose own answer to a
    # broken pipe is exit 1; the command stops with 141 as it does for a plain line
    script = ("import sys\nfrom pipeline import cli\n"
              "cli.cmd_config = lambda args: cli._console().print('x' * 70000)\n"
              "sys.exit(cli.main(['config']))\n")
    command = subprocess.Popen([sys.executable, "-c", script],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    command.stdout.close()   # before the command has printed anything
    _, err = command.communicate(timeout=120)
    assert (command.returncode, err.decode()) == (141, "")


def test_a_window_beyond_the_data_is_nothing_to_do_not_an_end_never_given(tmp_path, run_cli):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold", tmp_path / "gold.jsonl",
            "--gold-version", "v1", "--out", tmp_path / "report")
    for bound in (("--start", "2030-01-01"), ("--end", "2020-01-01")):
        code, out, err = run_cli("aggregate", *bound)
        assert (code, err) == (0, ""), bound
        assert out == "nothing to aggregate: no requests in the warehouse for that window.\n"


@pytest.mark.parametrize("command", ["ingest logs", "run --logs"])
def test_reading_logs_over_an_empty_interval_is_one_error_not_nothing_read(
        tmp_path, run_cli, command):
    # as `check` and `score` refuse it: an --end not after --start reads nothing, silently
    logs = write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    code, out, err = run_cli(*command.split(), logs, "--start", "2026-11-05",
                             "--end", "2026-11-01")
    assert (code, out) == (2, "")
    assert "the window is empty: --end 2026-11-01 00:00:00 is not after --start" in err


def test_run_says_what_it_loaded_of_the_gold_set_and_manifests_it_was_given(tmp_path, run_cli):
    gold = write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"]), "not json"])
    manifest = write_jsonl(tmp_path / "idx.jsonl", [{"chunk_id": "a", "text": "x"}])
    logs = write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    code, out, err = run_cli("run", "--logs", logs, "--gold", gold, "--gold-version", "v1",
                             "--index", f"idx-1={manifest}", "--out", tmp_path / "report")
    assert (code, err) == (0, "")
    assert out.splitlines()[:2] == [
        f"gold v1 from {gold}: read 2, loaded 1, quarantined 1",
        f"index idx-1 from {manifest}: read 1, loaded 1, quarantined 0"]


def test_an_alert_k_of_ones_own_can_go_back_to_the_default_that_follows_the_cutoffs(
        tmp_path, run_cli):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")
    assert run_cli("config", "--alert-k", "10")[0] == 0
    code, _, err = run_cli("config", "--cutoffs", "1,5")
    assert code == 2 and "--alert-k 10 must be one of the cutoffs 1,5" in err
    code, out, err = run_cli("config", "--alert-k", "auto", "--cutoffs", "1,5")
    assert (code, err) == (0, "")
    with connect(tmp_path / "wh" / "recallwatch.duckdb", read_only=True) as con:
        assert (in_force(con).alert_k, in_force(con).alert_cutoff) == (None, 5)


def test_file_names_and_versions_reach_the_terminal_with_their_control_characters_as_codes(
        tmp_path, run_cli):
    logs = write_jsonl(tmp_path / "day\x1b[2J.jsonl", [request("r-1", ["a"])])
    gold = write_jsonl(tmp_path / "gold\nv2.jsonl", [golden("g-1", ["a"])])
    outputs = [run_cli("ingest", "logs", logs),
               run_cli("ingest", "gold", gold, "--version", "v\a1"),
               run_cli("run", "--logs", logs, "--gold", gold, "--gold-version", "v\x1b1",
                       "--out", tmp_path / "report")]
    for code, out, err in outputs:
        assert code == 0, err
        assert not any(ch in out for ch in "\x1b\a") and "\nv2" not in out
    assert f"{tmp_path}/day\\x1b[2J.jsonl: read 1, loaded 1" in outputs[0][1]
    assert f"gold v\\x071 from {tmp_path}/gold\\x0av2.jsonl: read 1" in outputs[1][1]


def test_score_without_gold_set_says_what_to_do(tmp_path, run_cli):
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    run_cli("ingest", "logs", tmp_path / "logs.jsonl")
    code, _, err = run_cli("score")
    assert code == 2
    assert "recallwatch ingest gold" in err
    # later steps say that nothing is scored, not to run the step just run
    code, out, _ = run_cli("aggregate")
    assert code == 0 and "0 rows" in out and "nothing is scored there yet" in out
    code, out, _ = run_cli("drift")
    assert code == 0 and "no window metrics yet" in out and "`score`" in out


def test_a_score_of_part_of_a_day_shows_the_instants_it_covered(tmp_path, run_cli):
    write_jsonl(tmp_path / "gold.jsonl", [CLAIMS_GOLDEN])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["urban"], gold_id="g-bal",
                                                  ts="2026-11-01T10:40:00Z")])
    run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")
    run_cli("ingest", "logs", tmp_path / "logs.jsonl")
    code, out, _ = run_cli("score", "--start", "2026-11-01T10:30", "--end", "2026-11-01T11:30")
    assert code == 0 and "2026-11-01 10:30..2026-11-01 11:30" in out, out
    code, out, _ = run_cli("score", "--start", "2026-11-01", "--end", "2026-11-02")
    assert code == 0 and "window(s) 2026-11-01..2026-11-02 " in out, out


def test_export_unknown_table_and_format_are_clear_errors(tmp_path, run_cli):
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    run_cli("ingest", "logs", tmp_path / "logs.jsonl")
    code, _, err = run_cli("export", "no_such_table", tmp_path / "x.csv")
    assert code == 2 and "table 'no_such_table' is unknown" in err
    code, _, err = run_cli("export", "requests", tmp_path / "x.csv")
    assert code == 2 and "table 'requests' is internal: choose one of request_scores" in err
    code, _, err = run_cli("export", "quarantine", tmp_path / "x.xlsx")
    assert code == 2 and ".csv, .parquet or .jsonl" in err


def test_busy_warehouse_is_reported_not_crashed(tmp_path, warehouse, run_cli):
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    run_cli("ingest", "logs", tmp_path / "logs.jsonl")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('ok', flush=True); "
         "time.sleep(30)", str(warehouse)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ok"
        code, _, err = run_cli("score")
        assert code == 2
        assert "in use by another recallwatch process" in err
    finally:
        holder.kill()
        holder.wait()


def test_warehouse_comes_from_environment(tmp_path, monkeypatch, capsys):
    from pipeline import cli

    target = tmp_path / "env" / "w.duckdb"
    monkeypatch.setenv("RECALLWATCH_WAREHOUSE", str(target))
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    assert cli.main(["ingest", "logs", str(tmp_path / "logs.jsonl")]) == 0
    assert target.exists()


@pytest.mark.parametrize("command", [["score"], ["aggregate"], ["report", "--out", "r"],
                                     ["export", "quarantine", "q.csv"]])
def test_commands_that_read_refuse_a_missing_warehouse(tmp_path, run_cli, warehouse, command):
    code, _, err = run_cli(*command)
    assert code == 2
    assert f"warehouse {warehouse} does not exist" in err
    assert not warehouse.exists()  # a mistyped path does not become an empty warehouse


def test_report_rejects_unknown_gold_version_and_unscored_k(tmp_path, run_cli):
    write_jsonl(tmp_path / "gold.jsonl", [CLAIMS_GOLDEN])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["urban"], gold_id="g-bal")])
    run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")
    run_cli("ingest", "logs", tmp_path / "logs.jsonl")
    run_cli("score", "--cutoffs", "1,5")
    run_cli("aggregate")
    code, _, err = run_cli("report", "--out", tmp_path / "r", "--gold-version", "NOPE")
    assert code == 2 and "gold version 'NOPE' is not in the warehouse; known: v1." in err
    code, _, err = run_cli("report", "--out", tmp_path / "r", "--k", "7")
    assert code == 2 and "--k 7 is not a scored cutoff; choose one of 1, 5" in err
    code, out, _ = run_cli("report", "--out", tmp_path / "r", "--k", "5")
    assert code == 0 and "report.html" in out


def test_summary_table_shows_logged_versions_as_text(tmp_path, run_cli):
    write_jsonl(tmp_path / "gold.jsonl", [CLAIMS_GOLDEN])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("r-1", ["urban"], gold_id="g-bal", index_version="idx[/v2][bold]")])
    code, out, err = run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold",
                             tmp_path / "gold.jsonl", "--gold-version", "G[/x]",
                             "--out", tmp_path / "r")
    assert code == 0, err
    assert "idx[/v2][bold]" in out and "G[/x]" in out


def test_summary_table_writes_control_characters_of_logged_versions_as_codes(
        tmp_path, run_cli):
    # an index version holding ESC[2J would clear the terminal of whoever runs `run`
    write_jsonl(tmp_path / "gold.jsonl", [CLAIMS_GOLDEN])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("r-1", ["urban"], gold_id="g-bal", index_version="idx\x1b[2J\x1b[31mred")])
    code, out, err = run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold",
                             tmp_path / "gold.jsonl", "--gold-version", "v1")
    assert code == 0, err
    assert "\x1b" not in out and "idx\\x1b[2J\\x1b[31mred" in out.replace("\n", "")


def test_a_warehouse_scored_on_the_passages_route_alone_is_reported_on_it(tmp_path, run_cli):
    write_jsonl(tmp_path / "gold.jsonl", [{**CLAIMS_GOLDEN, "gold_passages": [
        "the minimum balance is 100 dollars"]}])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("r-1", [{"chunk_id": "a", "text": "the minimum balance is 100 dollars"}],
                gold_id="g-bal"),
        request("r-2", [{"chunk_id": "x", "text": "unrelated text entirely here"}],
                gold_id="g-bal")])
    run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")
    run_cli("config", "--routes", "passages")
    code, out, err = run_cli("run", "--logs", tmp_path / "logs.jsonl", "--out", tmp_path / "r")
    assert code == 0, err
    assert "no scored windows yet" not in out and "route passages" in out
    html = (tmp_path / "r" / "report.html").read_text()
    assert "Nothing is scored yet" not in html and "route passages" in html
    code, _, err = run_cli("report", "--out", tmp_path / "r2", "--route", "bogus")
    assert code == 2 and "--route 'bogus' is not a route; known: ids" in err
    code, out, _ = run_cli("report", "--out", tmp_path / "r3", "--route", "ids")
    assert code == 0
    assert "Nothing is scored yet" in (tmp_path / "r3" / "report.html").read_text()


def test_a_warehouse_scored_on_passages_beside_an_ids_route_with_no_chunk_ids_is_reported_on_it(
        tmp_path, run_cli):
    # routes ids,passages and a gold set of passages alone: every request is no_evidence on
    # ids, so the summary said "no scored windows yet." and the report showed ids with n = 0
    # while the passages route had scored them all
    write_jsonl(tmp_path / "gold.jsonl", [{
        "gold_id": "g-bal", "question": CLAIMS_GOLDEN["question"],
        "gold_passages": ["the minimum balance is 100 dollars"]}])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("r-1", [{"chunk_id": "a", "text": "the minimum balance is 100 dollars"}],
                gold_id="g-bal")])
    run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")
    run_cli("config", "--routes", "ids,passages")
    code, out, err = run_cli("run", "--logs", tmp_path / "logs.jsonl", "--out", tmp_path / "r")
    assert code == 0, err
    assert "no scored windows yet" not in out, out
    assert "route passages" in out, out
    html = (tmp_path / "r" / "report.html").read_text()
    assert "route passages" in html and "route ids" not in html
    # asked for, the ids route is still reported, as having nothing scored
    code, _, err = run_cli("report", "--out", tmp_path / "r2", "--route", "ids")
    assert code == 0, err
    assert "route ids" in (tmp_path / "r2" / "report.html").read_text()


def test_score_reports_how_requests_found_their_golden(tmp_path, run_cli):
    write_jsonl(tmp_path / "gold.jsonl", [CLAIMS_GOLDEN])
    write_jsonl(tmp_path / "logs.jsonl", [
        request("r-1", ["urban"], gold_id="g-bal"),
        request("r-2", ["urban"], gold_id=None,
                query="what is the MINIMUM balance for a  savings account?"),
        request("r-3", ["urban"], gold_id=None, query="something else"),
    ])
    run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")
    run_cli("ingest", "logs", tmp_path / "logs.jsonl")
    code, out, _ = run_cli("score")
    assert code == 0
    assert ("matched a golden: 2 of 3 (66.7%): 1 by gold_id, 1 by normalized query; "
            "1 matched none") in out


def test_empty_cutoffs_are_rejected_not_ignored(tmp_path, run_cli):
    write_jsonl(tmp_path / "gold.jsonl", [CLAIMS_GOLDEN])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["urban"], gold_id="g-bal")])
    run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")
    run_cli("ingest", "logs", tmp_path / "logs.jsonl")
    code, _, err = run_cli("score", "--cutoffs", "")
    assert code == 2 and "--cutoffs '' has an empty item" in err
    code, _, err = run_cli("score", "--cutoffs", "1,,2")
    assert code == 2 and "--cutoffs '1,,2' has an empty item" in err


def test_warehouse_of_another_format_is_refused(tmp_path, run_cli, warehouse):
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    run_cli("ingest", "logs", tmp_path / "logs.jsonl")
    con = duckdb.connect(str(warehouse))
    con.execute("UPDATE settings SET value = '0' WHERE name = 'format'")
    con.close()
    code, _, err = run_cli("score")
    assert code == 2 and "was written in format 0, this recallwatch writes format 1" in err
    code, _, err = run_cli("report", "--out", tmp_path / "r")
    assert code == 2 and "cannot be used" in err


def test_a_duckdb_file_of_another_tool_is_not_adopted(tmp_path, run_cli, warehouse):
    warehouse.parent.mkdir(parents=True)
    con = duckdb.connect(str(warehouse))
    con.execute("CREATE TABLE orders (id INTEGER)")
    con.close()
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    for command in (["ingest", "logs", tmp_path / "logs.jsonl"], ["export", "quarantine",
                                                                   tmp_path / "q.csv"]):
        code, _, err = run_cli(*command)
        assert code == 2 and "it is not a recallwatch warehouse" in err
    con = duckdb.connect(str(warehouse), read_only=True)
    assert [r[0] for r in con.sql("SELECT table_name FROM duckdb_tables()").fetchall()] == [
        "orders"]


@pytest.mark.parametrize("name", ["gold.jsonl", "idx.parquet", "tiny.duckdb"])
def test_a_data_file_given_as_the_warehouse_is_refused_not_written_to_memory(tmp_path, name):
    # DuckDB opens a .jsonl or .parquet path as a throw-away in-memory database
    path = tmp_path / name
    if name.endswith(".parquet"):
        pq.write_table(pa.table({"chunk_id": ["a"], "text": ["A"]}), path)
    elif name.endswith(".jsonl"):
        write_jsonl(path, [golden("g-1", ["a"])])
    else:
        path.write_bytes(b"not a database")
    before = path.read_bytes()
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    for args in (["ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1"], ["config"],
                 ["report", "--out", tmp_path / "r"]):
        code = cli.main(["--warehouse", str(path), *map(str, args)])
        assert code == 2
    assert path.read_bytes() == before


def test_an_unusable_memory_limit_is_one_clear_error(run_cli, monkeypatch, tmp_path):
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    run_cli("ingest", "logs", tmp_path / "logs.jsonl")
    for limit in ("-1", "99999TB", "abc"):
        monkeypatch.setenv("RECALLWATCH_MEMORY_LIMIT", limit)
        code, _, err = run_cli("config")
        assert code == 2 and f"RECALLWATCH_MEMORY_LIMIT='{limit}' is not a memory size" in err


def test_config_shows_and_puts_settings_in_force(tmp_path, run_cli):
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    run_cli("ingest", "logs", tmp_path / "logs.jsonl")
    code, out, _ = run_cli("config")
    assert code == 0 and "cutoffs 1,3,5,10,20,50,100\npass mark 0.7\ngrains day" in out
    code, out, _ = run_cli("config", "--cutoffs", "5,1", "--grains", "day,hour")
    assert code == 0 and "cutoffs 1,5\n" in out and "grains day,hour" in out
    code, _, err = run_cli("config", "--grains", "week")
    assert code == 2 and "grain 'week' (--window, --grains) must be one of day, hour" in err
    assert "cutoffs 1,5\n" in run_cli("config")[1]


def test_a_command_that_fails_puts_nothing_in_force(tmp_path, run_cli):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")
    run_cli("ingest", "logs", tmp_path / "logs.jsonl")
    code, _, err = run_cli("score", "--cutoffs", "1,2", "--gold-version", "nope")
    assert code == 2 and "gold version 'nope' is not loaded" in err
    code, _, err = run_cli("aggregate", "--window", "hour", "--pass-mark", "0.3",
                           "--start", "2026-11-03", "--end", "2026-11-01")
    assert code == 2 and "the window is empty" in err
    _, out, _ = run_cli("config")
    assert "cutoffs 1,3,5,10,20,50,100\npass mark 0.7\ngrains day\n" in out
    assert run_cli("score", "--cutoffs", "1,2")[0] == 0
    assert "cutoffs 1,2\n" in run_cli("config")[1]


def test_a_failed_run_puts_nothing_in_force(tmp_path, run_cli):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")
    code, _, err = run_cli("run", "--logs", tmp_path / "logs.jsonl", "--cutoffs", "1,2",
                           "--gold-version", "nope", "--out", "")
    assert code == 2 and "gold version 'nope' is not loaded" in err
    assert "cutoffs 1,3,5,10,20,50,100\n" in run_cli("config")[1]
    code, _, err = run_cli("config", "--grains", "hour")
    assert code == 2 and "must include day" in err


def _schema_additions() -> list[str]:
    """What sql/schema.sql adds to a warehouse an earlier recallwatch wrote, as the statement
    that takes it away again."""
    from pipeline.warehouse import sql

    schema = sql("schema")
    return ([f"ALTER TABLE {t} DROP COLUMN {c}" for t, c in re.findall(
        r"^ALTER TABLE (\w+) ADD COLUMN IF NOT EXISTS (\w+)", schema, re.MULTILINE)]
        + [f"DROP VIEW {v}" for v in re.findall(r"^CREATE OR REPLACE VIEW (\w+)", schema,
                                                 re.MULTILINE)]
        + [f"DROP TABLE {t}" for t in ("alerts", "carried_gold_ids", "judge_verdicts")])


@pytest.mark.parametrize("as_before", _schema_additions())
def test_read_only_commands_on_a_warehouse_from_before_a_schema_addition_say_how_to_upgrade(
        tmp_path, run_cli, warehouse, monkeypatch, as_before):
    # `report`, `alert --dry-run` and `metrics` open the warehouse read-only and cannot add
    # what a later recallwatch added; each says so in one sentence instead of failing inside
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold", tmp_path / "gold.jsonl",
            "--gold-version", "v1", "--out", "")
    with duckdb.connect(str(warehouse)) as con:
        con.execute(as_before)
    monkeypatch.setenv("RECALLWATCH_WEBHOOK_URL", "http://127.0.0.1:9/hook")
    for command in (("report", "--out", tmp_path / "report"), ("alert", "--dry-run"),
                    ("metrics",), ("export", "requests", tmp_path / "requests.parquet")):
        code, _, err = run_cli(*command)
        assert code == 2 and "run `recallwatch run` on it once" in err, (command, err)
    assert run_cli("run", "--out", "")[0] == 0
    assert run_cli("report", "--out", tmp_path / "report")[0] == 0
    assert run_cli("alert", "--dry-run")[0] == 0


def test_paths_and_dates_a_user_can_fix_are_one_sentence_with_exit_2(tmp_path, run_cli, capsys):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold", tmp_path / "gold.jsonl",
            "--gold-version", "v1", "--out", "")
    with pytest.raises(SystemExit) as exit_info:   # argparse's own one-line error
        run_cli("score", "--start", "2026-11-01", "--end", "9999-12-31T12:00")
    assert exit_info.value.code == 2
    assert "date 9999-12-31T12:00 is outside 1900-01-01..3000-01-01" in capsys.readouterr().err
    (tmp_path / "taken.csv").mkdir()
    code, _, err = run_cli("export", "request_scores", tmp_path / "taken.csv")
    assert code == 2 and "is a directory: name the file to write" in err
    # a trailing slash names a directory: the file new.csv was written in its place
    code, _, err = run_cli("export", "request_scores", f"{tmp_path / 'new.csv'}/")
    assert code == 2 and "is a directory: name the file to write" in err
    assert not (tmp_path / "new.csv").exists()
    # a dry run without a judge said so on a warehouse that does not exist, exit 0
    assert cli.main(["--warehouse", str(tmp_path / "nowhere" / "w.duckdb"), "score",
                     "--dry-run"]) == 2
    assert "does not exist" in capsys.readouterr().err
    # an empty list was taken for no change at all
    for flag in ("--grains", "--routes", "--alert-metrics"):
        code, _, err = run_cli("config", flag, "")
        assert code == 2 and f"{flag} '' names nothing between its commas" in err, flag
    code, _, err = run_cli("config", "--grains", "day,,hour")
    assert code == 2 and "names nothing between its commas" in err
    (tmp_path / "a-file").write_text("x")
    code, _, err = run_cli("export", "request_scores", tmp_path / "a-file" / "scores.csv")
    assert code == 2 and "cannot write" in err and "Traceback" not in err
    code, _, err = run_cli("report", "--out", tmp_path / "a-file" / "report")
    assert code == 2 and "cannot write the report to" in err
    code, _, err = run_cli("report", "--out", "")
    assert code == 2 and "--out must name the report's directory" in err


def test_running_out_of_the_memory_limit_names_the_setting_not_the_file(tmp_path, warehouse,
                                                                         capsys, monkeypatch):
    import json

    from pipeline import cli

    with open(tmp_path / "logs.jsonl", "w") as fh:
        for i in range(5000):
            fh.write(json.dumps(request(f"r{i}", [f"c{i}-{j}" for j in range(20)])) + "\n")
    monkeypatch.setenv("RECALLWATCH_MEMORY_LIMIT", "5MB")
    code = cli.main(["--warehouse", str(warehouse), "ingest", "logs",
                     str(tmp_path / "logs.jsonl")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "ran out of the memory RECALLWATCH_MEMORY_LIMIT=5MB allows" in err
    assert "cannot read this file" not in err and "internal error" not in err
    monkeypatch.delenv("RECALLWATCH_MEMORY_LIMIT")
    assert cli.main(["--warehouse", str(warehouse), "ingest", "logs",
                     str(tmp_path / "logs.jsonl")]) == 0
    assert "loaded 5000" in capsys.readouterr().out


def test_a_warehouse_under_a_file_is_one_sentence(tmp_path, capsys):
    from pipeline import cli

    (tmp_path / "a-file").write_text("x")
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    code = cli.main(["--warehouse", str(tmp_path / "a-file" / "w.duckdb"), "ingest", "logs",
                     str(tmp_path / "logs.jsonl")])
    err = capsys.readouterr().err
    assert code == 2 and "cannot create the warehouse" in err and "internal error" not in err


@pytest.mark.skipif(not __import__("os").path.exists("/dev/full"),
                    reason="needs /dev/full to stand for a full disk")
def test_a_full_disk_is_one_sentence_not_an_internal_error(tmp_path, run_cli):
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    run_cli("ingest", "logs", tmp_path / "logs.jsonl")
    (tmp_path / "full.csv").symlink_to("/dev/full")
    code, _, err = run_cli("export", "quarantine", tmp_path / "full.csv")
    assert code == 2 and "No space left on device" in err and "internal error" not in err


def test_export_gives_the_same_file_whatever_order_the_rows_were_stored_in(
        tmp_path, run_cli, warehouse):
    write_jsonl(tmp_path / "logs.jsonl",
                [request(f"r-{i}", ["a", "b"][: 1 + i % 2]) for i in range(40)])
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    assert run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold", tmp_path / "gold.jsonl",
                   "--gold-version", "v1", "--out", tmp_path / "report")[0] == 0
    assert run_cli("export", "request_scores", tmp_path / "first.csv")[0] == 0
    con = duckdb.connect(str(warehouse))
    con.execute("CREATE TEMP TABLE kept AS SELECT * FROM request_scores")
    con.execute("DELETE FROM request_scores")
    con.execute("INSERT INTO request_scores SELECT * FROM kept ORDER BY request_id DESC")
    con.close()
    assert run_cli("export", "request_scores", tmp_path / "second.csv")[0] == 0
    first, second = ((tmp_path / name).read_bytes() for name in ("first.csv", "second.csv"))
    assert first == second and first.count(b"\n") == 41


def test_a_jsonl_export_holds_the_rows_of_the_parquet_export_in_the_same_order(
        tmp_path, run_cli):
    write_jsonl(tmp_path / "logs.jsonl",
                [request(f"r-{i}", ["a", "b"][: 1 + i % 2]) for i in range(30)])
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    assert run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold", tmp_path / "gold.jsonl",
                   "--gold-version", "v1", "--out", tmp_path / "report")[0] == 0
    # written by DuckDB as it reads (within the memory limit); a quote in the name is a name
    target = tmp_path / "it's window_metrics.jsonl"
    assert run_cli("export", "window_metrics", target)[0] == 0
    assert run_cli("export", "window_metrics", tmp_path / "wm.parquet")[0] == 0
    import json

    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in target.read_text().splitlines()]
    expected = pq.read_table(tmp_path / "wm.parquet").to_pylist()
    assert len(rows) == len(expected) > 0
    for got, want in zip(rows, expected, strict=True):
        assert got.keys() == want.keys()
        assert {k: v for k, v in got.items() if k not in ("window_start", "window_end")} == {
            k: v for k, v in want.items() if k not in ("window_start", "window_end")}
        assert got["window_start"] == f"{want['window_start']:%Y-%m-%d %H:%M:%S}"


def test_a_baseline_for_a_slice_with_no_windows_is_kept_with_a_note(tmp_path, run_cli):
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"], tags={"tenant": "acme"})])
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    assert run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold", tmp_path / "gold.jsonl",
                   "--gold-version", "v1", "--out", tmp_path / "report")[0] == 0
    code, out, err = run_cli("config", "--baseline", "tenant=acme=trailing:3",
                             "--baseline", "tenant=acmee=first:3", "--baseline", "*=first:5")
    assert code == 0
    assert "tenant=acmee=first:3" in out and "tenant=acme=trailing:3" in out
    assert "no slice 'tenant=acmee' in window_metrics yet" in err
    assert "'tenant=acme'" not in err and "'*'" not in err
    # a baseline pinned to an index that served nothing turned drift off in silence
    code, out, err = run_cli("config", "--baseline", "all=index:idx-9", "--baseline",
                             "tenant=acme=index:idx-1")
    assert code == 0 and "all=index:idx-9" in out
    assert ("no window of slice 'all' was served by index version 'idx-9' alone yet; until "
            "one is, slice 'all' has no baseline to compare with") in err, err
    assert "'idx-1'" not in err


def test_a_baseline_pinned_to_an_index_that_only_served_beside_another_gets_a_note(
        tmp_path, run_cli):
    # a canary: idx-1 and idx-2 serve every day, so slice all has no window of idx-2 alone and
    # `all=index:idx-2` compares nothing; the note only looked for an index_version= slice
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r-{d}-{v}", ["a"], ts=f"2026-11-0{d}T1{v}:00:00Z", index_version=f"idx-{v}")
        for d in (1, 2) for v in (1, 2)])
    assert run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold", tmp_path / "gold.jsonl",
                   "--gold-version", "v1", "--out", tmp_path / "report")[0] == 0
    code, _, err = run_cli("config", "--baseline", "all=index:idx-2",
                           "--baseline", "index_version=idx-2=index:idx-2")
    assert code == 0
    assert "no window of slice 'all' was served by index version 'idx-2' alone yet" in err
    assert "slice 'index_version=idx-2'" not in err


@pytest.mark.skipif(shutil.which("strace") is None,
                    reason="strace is not installed (apt-get install strace; `make test` installs "
                           "it as root): only strace can kill the export at a "
                           "given write to its file")
@pytest.mark.parametrize("name", ["big.csv", "big.jsonl", "big.parquet"])
def test_an_export_killed_mid_write_leaves_no_half_table_under_its_name(tmp_path, warehouse,
                                                                        name):
    # a web server or a script reading the file finds the whole table or none of it: strace
    # kills `export` (SIGKILL: no handler) as it enters its first write to the file's name (a
    # count of each thread's own: DuckDB writes from several)
    connect(warehouse).close()
    with duckdb.connect(str(warehouse)) as con:
        con.execute("INSERT INTO quarantine SELECT 'logs.jsonl', i, 'bad record number ' || i, "
                    "repeat('x', 200), 'logs', NULL FROM range(200000) t(i)")
    target = (tmp_path / "out" / name).resolve()
    target.parent.mkdir()
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("RECALLWATCH_")}
    subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-P", str(target),
                    "-e", "trace=pwrite64,write", "-e", "inject=pwrite64,write:signal=KILL:when=1",
                    sys.executable, "-m", "pipeline.cli", "--warehouse", str(warehouse),
                    "export", "quarantine", str(target)],
                   capture_output=True, text=True, env=env, timeout=300, check=False)
    whole = tmp_path / f"whole{target.suffix}"
    assert cli.main(["--warehouse", str(warehouse), "export", "quarantine", str(whole)]) == 0
    if target.exists():   # what is there under its name is the whole table
        assert target.read_bytes() == whole.read_bytes()
    assert [p.name for p in target.parent.iterdir()] in ([], [name])


@pytest.mark.skipif(shutil.which("strace") is None,
                    reason="strace is not installed (apt-get install strace; `make test` installs "
                           "it as root): only strace can hold one report mid-write")
def test_two_reports_written_at_once_into_one_directory_each_stay_whole(tmp_path, run_cli,
                                                                         warehouse):
    # readers share the warehouse, so a person's `report --out reports/latest --k 1` may run
    # while the scheduled one writes there: strace holds the first as it moves its page onto
    # report.html until the second has written and moved its own; the first must not have
    # had its page overwritten (nor fail), and report.html is then one whole report, its own
    import os
    import time

    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs.jsonl", [request(f"r-{i}", ["a", "c", "b"][: 1 + i % 3])
                                          for i in range(30)])
    assert run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold", tmp_path / "gold.jsonl",
                   "--gold-version", "v1", "--out", "")[0] == 0
    out = (tmp_path / "latest").resolve()
    out.mkdir()
    # no .pyc is written, so the report's is the command's only rename
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RECALLWATCH_")},
           "PYTHONDONTWRITEBYTECODE": "1"}

    def command(k: int) -> list[str]:
        return [sys.executable, "-m", "pipeline.cli", "--warehouse", str(warehouse),
                "report", "--out", str(out), "--k", str(k)]

    alone = {}
    for k in (1, 3):
        subprocess.run([*command(k)[:-5], "report", "--out", str(tmp_path / f"k{k}"), "--k",
                        str(k)], check=True, capture_output=True, env=env, timeout=120)
        alone[k] = (tmp_path / f"k{k}" / "report.html").read_bytes()
    assert alone[1] != alone[3]
    renames = "rename,renameat,renameat2"
    held = subprocess.Popen(["strace", "-f", "-qq", "-o", os.devnull, "-e", f"trace={renames}",
                             "-e", f"inject={renames}:delay_enter=10000000:when=1",
                             *command(1)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while not any(out.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.05)   # the first is writing its page
        second = subprocess.run(command(3), capture_output=True, text=True, env=env,
                                timeout=120)
        assert second.returncode == 0, second.stderr
        _, err = held.communicate(timeout=120)
    finally:
        held.kill()
        held.wait()
    assert held.returncode == 0, err
    assert (out / "report.html").read_bytes() == alone[1]   # the last one renamed wins whole
    assert [p.name for p in out.iterdir()] == ["report.html"]


def _claims_and_verdicts(tmp_path, run_cli, warehouse) -> None:
    """A gold set whose 2,000 goldens give their claims (about 1 MB exported) and 2,000
    verdicts of the judge to sample from (about 300 KB)."""
    from tests.conftest import insert_rows
    from tests.test_audit import verdict

    write_jsonl(tmp_path / "gold.jsonl", [
        golden(f"g-{i}", ["a"], question=f"q {i}", claims=[f"claim {i}.{c} " + "x" * 100
                                                          for c in range(5)])
        for i in range(2000)])
    assert run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")[0] == 0
    with connect(warehouse) as con:
        insert_rows(con, "judge_verdicts", [verdict(f"en-{i:04d}", [True, False, True])
                                            for i in range(2000)])


@pytest.mark.skipif(shutil.which("strace") is None,
                    reason="strace is not installed (apt-get install strace; `make test` installs "
                           "it as root): only strace can kill a command at a given write to "
                           "its file")
@pytest.mark.parametrize("command", [("claims", "export"), ("audit", "sample", "--n", "4000")],
                         ids=["claims-export", "audit-sample"])
def test_a_file_for_review_killed_mid_write_leaves_no_part_of_it_under_its_name(
        tmp_path, run_cli, warehouse, command):
    # as an export: strace kills the command (SIGKILL: no handler) at its first write to the
    # file's name; a person opening the file finds the whole of it or none, never the first
    # 8 KiB of it as if that were everything
    _claims_and_verdicts(tmp_path, run_cli, warehouse)
    suffix = ".jsonl" if command[0] == "claims" else ".csv"
    target = (tmp_path / "out" / f"review{suffix}").resolve()
    target.parent.mkdir()
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("RECALLWATCH_")}
    subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-P", str(target),
                    "-e", "trace=write", "-e", "inject=write:signal=KILL:when=1",
                    sys.executable, "-m", "pipeline.cli", "--warehouse", str(warehouse),
                    *command, str(target)],
                   capture_output=True, text=True, env=env, timeout=300, check=False)
    whole = tmp_path / f"whole{suffix}"
    assert run_cli(*command, whole)[0] == 0 and whole.stat().st_size > 100_000
    if target.exists():
        assert target.read_bytes() == whole.read_bytes()
    assert [p.name for p in target.parent.iterdir()] in ([], [target.name])


def test_every_writer_writes_through_a_link_to_its_target_and_keeps_the_link(
        tmp_path, run_cli, warehouse):
    # `--out` (or FILE) naming a link, as a deployment links a served path into a shared
    # directory: the link's target gets the new file, whole, and the link stays; report and
    # metrics replaced the link with a file and left its target stale, while export wrote
    # through it in place
    _claims_and_verdicts(tmp_path, run_cli, warehouse)
    write_jsonl(tmp_path / "logs.jsonl", [request(f"r-{i}", ["a"], gold_id=f"g-{i}")
                                          for i in range(5)])
    assert run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold", tmp_path / "gold.jsonl",
                   "--gold-version", "v1", "--out", "")[0] == 0
    real, links = tmp_path / "real", tmp_path / "links"
    real.mkdir()
    (links / "report").mkdir(parents=True)
    commands = {
        "report.html": ("report", "--out", links / "report"),
        "m.prom": ("metrics", "--out", links / "m.prom"),
        "wm.csv": ("export", "window_metrics", links / "wm.csv"),
        "claims.jsonl": ("claims", "export", links / "claims.jsonl"),
        "sample.csv": ("audit", "sample", "--n", "10", links / "sample.csv"),
    }
    for name in commands:
        (real / name).write_text("stale\n")
        link = links / "report" / name if name == "report.html" else links / name
        link.symlink_to(real / name)
    for name, command in commands.items():
        code, _, err = run_cli(*command)
        assert code == 0, (name, err)
        link = links / "report" / name if name == "report.html" else links / name
        assert link.is_symlink(), f"{name}: the link was replaced by a file"
        assert (real / name).read_text() != "stale\n", f"{name}: the link's target is stale"
    assert sorted(p.name for p in real.iterdir()) == sorted(commands)   # no temporary left


def test_a_negative_demo_seed_is_argparses_one_line_error_before_any_file(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--warehouse", str(tmp_path / "w.duckdb"), "demo", "--dir",
                  str(tmp_path / "world"), "--out", str(tmp_path / "report"), "--seed", "-1"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --seed: -1 must be a whole number of at least 0" in err
    assert "internal error" not in err
    assert not (tmp_path / "world").exists() and not (tmp_path / "w.duckdb").exists()


@pytest.mark.parametrize("command", ["run", "check"])
def test_logs_given_twice_reads_every_source_not_the_last_alone(tmp_path, run_cli, command):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    write_jsonl(tmp_path / "a.jsonl", [request("r-1", ["a"])])
    write_jsonl(tmp_path / "b.jsonl", [request("r-2", ["a"])])
    args = {"run": ["--gold", tmp_path / "gold.jsonl", "--gold-version", "v1", "--out", ""],
            "check": ["--start", "2026-11-01", "--end", "2026-11-02"]}[command]
    code, out, err = run_cli(command, "--logs", tmp_path / "a.jsonl", "--logs",
                             tmp_path / "b.jsonl", *args)
    assert code == 0, err
    if command == "run":
        assert "2 file(s) ingested, 0 unchanged: read 2, loaded 2, quarantined 0" in out
    else:
        assert "✓ warning  log files: 2 files, 2 records" in out


def test_drift_options_of_the_other_action_are_refused_not_ignored(tmp_path, run_cli):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r{d}", ["a"], ts=f"2026-11-{d:02d}T10:00:00Z") for d in range(1, 4)])
    run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold", tmp_path / "gold.jsonl",
            "--gold-version", "v1", "--out", "")
    # `rebaseline` left out: the baseline was not restarted, yet drift ran and said nothing
    code, out, err = run_cli("drift", "--slice", "all", "--from", "2026-11-02")
    assert code == 2 and out == ""
    assert err == ("recallwatch: error: --slice and --from apply to `recallwatch drift "
                   "rebaseline`; give it (recallwatch drift rebaseline --slice S --from DAY) "
                   "or leave them out.\n")
    code, out, err = run_cli("drift", "rebaseline", "--slice", "all", "--from", "2026-11-02",
                             "--start", "2026-11-01")
    assert code == 2 and out == ""
    assert "--start and --end apply to `recallwatch drift`, not to `recallwatch drift " \
           "rebaseline`" in err
    con = duckdb.connect(str(tmp_path / "wh" / "recallwatch.duckdb"), read_only=True)
    assert in_force(con).baseline_for("all").restarts == ()


@pytest.mark.parametrize("given", ["", "  "])
def test_an_empty_warehouse_path_is_refused_not_the_default_one(tmp_path, monkeypatch,
                                                                 capsys, given):
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RECALLWATCH_WAREHOUSE", raising=False)
    assert cli.main(["--warehouse", given, "ingest", "logs", "logs.jsonl"]) == 2
    assert capsys.readouterr().err == (
        "recallwatch: error: the warehouse path is blank (--warehouse, or RECALLWATCH_WAREHOUSE): "
        "give the warehouse's DuckDB file, e.g. warehouse/recallwatch.duckdb, or leave both "
        "out.\n")
    # a path given is used whatever the variable holds (the DAGs give the variable's value)
    monkeypatch.setenv("RECALLWATCH_WAREHOUSE", " ")
    assert cli.main(["--warehouse", "w.duckdb", "ingest", "logs", "logs.jsonl"]) == 0
    capsys.readouterr()
    (tmp_path / "w.duckdb").unlink()
    assert cli.main(["ingest", "logs", "logs.jsonl"]) == 2
    assert capsys.readouterr().err == (
        "recallwatch: error: RECALLWATCH_WAREHOUSE holds only spaces: set it to the "
        "warehouse's DuckDB file, e.g. warehouse/recallwatch.duckdb, or unset it.\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs.jsonl"]


def test_an_empty_channels_file_is_refused_not_the_environments_channels(tmp_path, run_cli,
                                                                         monkeypatch):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold", tmp_path / "gold.jsonl",
            "--gold-version", "v1", "--out", "")
    monkeypatch.setenv("RECALLWATCH_WEBHOOK_URL", "http://127.0.0.1:9/hook")
    for command in (("alert", "--dry-run"), ("alert", "test")):
        code, out, err = run_cli(*command, "--channels", "")
        assert (code, out) == (2, ""), command
        assert err == ("recallwatch: error: --channels is empty: give the TOML file of the "
                       "channels, or leave --channels out to use the environment's.\n")


def test_run_names_its_own_flags_for_a_blank_gold_version_or_index(tmp_path, run_cli):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    common = ("run", "--logs", tmp_path / "logs.jsonl", "--gold", tmp_path / "gold.jsonl",
              "--out", "")
    code, _, err = run_cli(*common, "--gold-version", " ")
    assert code == 2
    assert err == ("recallwatch: error: --gold needs --gold-version to name the gold-set "
                   "version.\n")
    code, _, err = run_cli(*common, "--gold-version", "v1", "--gold-index-version", "")
    assert code == 2
    assert err == ("recallwatch: error: --gold-index-version must name the index version "
                   "whose chunk IDs --gold names (e.g. idx-2026-11), or be left out.\n")


def test_score_cutoffs_put_in_force_leave_the_routes_in_force(tmp_path, run_cli, warehouse,
                                                              monkeypatch):
    monkeypatch.delenv("RECALLWATCH_JUDGE_MODEL", raising=False)
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    run_cli("run", "--logs", tmp_path / "logs.jsonl", "--gold", tmp_path / "gold.jsonl",
            "--gold-version", "v1", "--out", "")
    assert run_cli("config", "--routes", "ids,claims")[0] == 0
    # without a judge `score` scores ids alone; --cutoffs puts the cutoffs in force, not that
    code, out, _ = run_cli("score", "--cutoffs", "1,5")
    assert code == 0 and "(route ids, cutoffs 1,5)" in out
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert [in_force(con).routes, in_force(con).cutoffs] == [("ids", "claims"), (1, 5)]
