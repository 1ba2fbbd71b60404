"""Tests for dags/: both DAGs load and declare what a scheduler needs, the DAG files stay wiring,
and `dag.test()` of recallwatch_monitor over demo days builds exactly what `recallwatch run`
builds, changes nothing when a day is re-run, and stops at the quality gate.

Airflow reads its configuration (AIRFLOW_HOME, the DAGs folder, ...) when first imported and
then sets up logging and its database session for the whole process, so no test process imports
it: everything that needs Airflow runs in a child Python (CHILD below) with a fresh
AIRFLOW_HOME whose SQLite metadata DB `airflow db migrate` created once for this module. The
children run with AIRFLOW__CORE__UNIT_TEST_MODE=False, the production configuration: unit-test
mode would load Airflow's test defaults (examples on, another executor) and can hide what
`@daily` means, while these DAGs pass their timetable explicitly and are tested as deployed."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pipeline import api
from pipeline.demo import generate_demo_world
from pipeline.warehouse import connect
from tests.conftest import golden, request, snapshot, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
DAGS = ROOT / "dags"
AIRFLOW = Path(sys.executable).with_name("airflow")
POOL = "recallwatch_writer"
# Tasks that open the warehouse: each in the writer pool (one process at a time per file).
WAREHOUSE_TASKS = {"recallwatch_monitor": {"check", "ingest", "score", "quality_warnings",
                                           "aggregate", "drift", "report", "alert"},
                   "recallwatch_backfill": {"rebuild", "drift", "report", "alert"}}

# argv: dags folder, output JSON file, then `describe` or a DAG id and its runs.
CHILD = """
import json, sys
from datetime import datetime
from airflow.dag_processing.dagbag import DagBag

bag = DagBag(dag_folder=sys.argv[1])
value = lambda state: getattr(state, "value", state)
if sys.argv[3] == "describe":
    out = {"errors": {str(k): str(v) for k, v in bag.import_errors.items()}, "dags": {
        d.dag_id: {"timetable": type(d.timetable).__name__, "catchup": d.catchup,
                   "tags": sorted(d.tags), "doc_md": d.doc_md, "owner": d.owner,
                   "max_active_runs": d.max_active_runs,
                   "schedule": repr(d.timetable),
                   "start_date": d.start_date and d.start_date.isoformat(),
                   "tasks": {t.task_id: {"pool": t.pool, "retries": t.retries, "owner": t.owner,
                                         "on_failure": [c.__qualname__ for c in
                                                        t.on_failure_callback or []]}
                             for t in d.tasks}}
        for d in bag.dags.values()}}
else:  # each argument: a logical date, or a JSON object of params for a run without one
    out = []
    for arg in sys.argv[4:]:
        if arg.startswith("{"):
            run = bag.dags[sys.argv[3]].test(logical_date=None, run_conf=json.loads(arg))
        else:
            run = bag.dags[sys.argv[3]].test(logical_date=datetime.fromisoformat(arg))
        iso = lambda t: t and t.isoformat()
        out.append({"state": value(run.state), "start": iso(run.data_interval_start),
                    "end": iso(run.data_interval_end),
                    "tasks": {ti.task_id: [value(ti.state), ti.try_number]
                              for ti in run.get_task_instances()}})
json.dump(out, open(sys.argv[2], "w"))
"""


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory) -> dict[str, str]:
    """The environment of the Airflow children: a migrated SQLite metadata DB, the writer pool
    of 1 slot, this repository's dags/, no examples; no RECALLWATCH_* or AIRFLOW* variable of
    the caller's (no real alert channel, no other Airflow)."""
    home = tmp_path_factory.mktemp("airflow-home")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RECALLWATCH_", "AIRFLOW"))}
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False",
               AIRFLOW__CORE__DAGS_FOLDER=str(DAGS), AIRFLOW__CORE__UNIT_TEST_MODE="False")
    for command in (["db", "migrate"],
                    ["pools", "set", POOL, "1", "recallwatch: one process per DuckDB file"]):
        done = subprocess.run([str(AIRFLOW), *command], env=env, capture_output=True, text=True,
                              timeout=180, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return env


def child(env: dict[str, str], tmp_path: Path, *args: str, **extra_env: str):
    """Run CHILD with `args` and return what it wrote; its output is shown when it fails."""
    out = tmp_path / f"child-{len(list(tmp_path.glob('child-*')))}.json"
    done = subprocess.run([sys.executable, "-c", CHILD, str(DAGS), str(out), *args],
                          env={**env, **extra_env}, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0 and out.exists(), done.stdout[-5000:] + done.stderr[-5000:]
    return json.loads(out.read_text())


# ------------------------------------------------------------------------- DagBag integrity

@pytest.fixture(scope="module")
def described(airflow_env, tmp_path_factory) -> dict:
    return child(airflow_env, tmp_path_factory.mktemp("describe"), "describe")


def test_both_dags_import_without_errors(described):
    assert described["errors"] == {}
    assert set(described["dags"]) == {"recallwatch_monitor", "recallwatch_backfill"}


def test_monitor_runs_daily_over_real_data_intervals_with_catchup(described):
    monitor = described["dags"]["recallwatch_monitor"]
    # not CronTriggerTimetable, whose runs have start == end == logical date
    assert monitor["timetable"] == "CronDataIntervalTimetable"
    assert "expression='0 0 * * *'" in monitor["schedule"]
    assert "timezone='UTC'" in monitor["schedule"]
    assert monitor["catchup"] is True
    assert monitor["max_active_runs"] == 1


def test_backfill_is_scheduled_on_the_index_rebuild_asset(described):
    backfill = described["dags"]["recallwatch_backfill"]
    assert backfill["timetable"] == "AssetTriggeredTimetable"
    assert "uri='recallwatch://index-rebuild/'" in backfill["schedule"]
    assert backfill["catchup"] is False


@pytest.mark.parametrize("dag_id", sorted(WAREHOUSE_TASKS))
def test_dag_sets_owner_tags_retries_doc_and_failure_callback(described, dag_id):
    dag = described["dags"][dag_id]
    assert dag["tags"] == ["recallwatch"]
    assert dag["owner"] == "recallwatch"
    assert "[start, end)" in dag["doc_md"] or "live_from" in dag["doc_md"]
    for task_id, task in dag["tasks"].items():
        assert task["owner"] == "recallwatch"
        assert task["on_failure"] == ["on_task_failure"], task_id
        # the gate too: a lock held by another process (a metrics scrape) or a source out of
        # reach failed the day for good; a failed gate still fails at once (tested below)
        assert task["retries"] == 2, task_id


@pytest.mark.parametrize("dag_id", sorted(WAREHOUSE_TASKS))
def test_every_task_that_opens_the_warehouse_runs_in_the_writer_pool(described, dag_id):
    tasks = described["dags"][dag_id]["tasks"]
    assert {t for t, task in tasks.items() if task["pool"] == POOL} == WAREHOUSE_TASKS[dag_id]
    assert {t for t, task in tasks.items() if task["pool"] != POOL} <= {"logs"}


def _imports(tree: ast.AST, *, top_level_only: bool = False) -> list[tuple[int, str]]:
    """(line, module) of every import; `from a.b import c` counts as a.b."""
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, node.module or ""))
    return found


@pytest.mark.parametrize("name", ["recallwatch_monitor.py", "recallwatch_backfill.py"])
def test_dag_file_is_wiring_that_reads_in_one_screen(name):
    source = (DAGS / name).read_text()
    code = [line for line in source.splitlines() if line.strip()]
    # about 60 lines of code: a screen with the blank lines between tasks (the two tasks that
    # fail at once on what no retry mends take a few more)
    assert len(code) <= 80, f"{name}: {len(code)} lines of code; move logic to pipeline/"
    # parsing the file stays cheap: duckdb, polars and the pipeline's steps load inside tasks
    modules = {module for _, module in _imports(ast.parse(source), top_level_only=True)}
    assert modules <= {"os", "datetime", "airflow.sdk", "pipeline.announce"}, modules


def test_pipeline_never_imports_airflow():
    offenders = [f"{path.relative_to(ROOT)}:{line} imports {module}"
                 for path in sorted((ROOT / "pipeline").rglob("*.py"))
                 for line, module in _imports(ast.parse(path.read_text(), filename=str(path)))
                 if module == "airflow" or module.startswith("airflow.")]
    assert offenders == []


# ------------------------------------------------------------------------- dag.test() runs

def _readable(line: str) -> bool:
    """Whether the quality gate lets a JSON line of the demo through (it parses, has a
    timestamp and a retrieved list of chunk IDs: ingest would load it)."""
    try:
        record = json.loads(line)
        datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return False
    return isinstance(record.get("retrieved"), list) and all(
        isinstance(item, dict) and item.get("chunk_id") is not None
        for item in record["retrieved"])


def _table(path: Path, table: str) -> list:
    with connect(path, read_only=True) as con:
        return sorted(con.sql(f"SELECT * FROM {table}").fetchall(), key=repr)


def _monitor_env(tmp_path: Path, warehouse: Path, logs: Path) -> dict[str, str]:
    return {"RECALLWATCH_WAREHOUSE": str(warehouse), "RECALLWATCH_LOG_SOURCE": str(logs),
            "RECALLWATCH_REPORT_DIR": str(tmp_path / "report")}


def _scheduled_world(tmp_path: Path, *, days: int, per_day: int):
    """A demo world, its gold set and manifests loaded into the warehouse the DAG will use:
    (world, index manifests, that warehouse, one for `run` to build alike, the DAG's env).
    The demo slips broken records into its days (unparsable, timestamp-less, a retrieved list
    as text, a null chunk ID); at these sizes they are over the gate's 1 % tolerance and it
    would stop the day (tested below), so they are dropped here."""
    world = generate_demo_world(tmp_path / "world", days=days, requests_per_day=per_day)
    for day in world.logs_dir.glob("dt=*/requests.jsonl"):
        day.write_text("".join(f"{line}\n" for line in day.read_text().splitlines()
                               if _readable(line)))
    index = [(str(path), version) for version, path in world.index_manifests.items()]
    scheduled, caught_up = tmp_path / "scheduled.duckdb", tmp_path / "run.duckdb"
    api.ingest_gold(scheduled, str(world.gold_path), world.gold_version)
    for path, version in index:
        api.ingest_index(scheduled, path, version)
    return world, index, scheduled, caught_up, _monitor_env(tmp_path, scheduled, world.logs_dir)


@pytest.mark.slow
def test_monitor_over_three_days_builds_what_run_builds_and_a_rerun_changes_nothing(
        airflow_env, tmp_path):
    world, index, scheduled, caught_up, env = _scheduled_world(tmp_path, days=3, per_day=150)

    # A run's logical date is the end of its interval here: dag.test infers [day - 1, day).
    runs = child(airflow_env, tmp_path, "recallwatch_monitor", "2026-10-02T00:00:00+00:00",
                 "2026-10-03T00:00:00+00:00", "2026-10-04T00:00:00+00:00", **env)
    assert [(r["state"], r["start"][:10], r["end"][:10]) for r in runs] == [
        ("success", "2026-10-01", "2026-10-02"), ("success", "2026-10-02", "2026-10-03"),
        ("success", "2026-10-03", "2026-10-04")], runs
    assert (tmp_path / "report" / "report.html").exists()

    api.run(caught_up, logs=[str(world.logs_dir / f"dt=2026-10-0{d}") for d in (1, 2, 3)],
            gold=str(world.gold_path), gold_version=world.gold_version, index=index)
    for table in ("window_metrics", "drift_events"):
        rows = _table(scheduled, table)
        assert rows and rows == _table(caught_up, table), table
    with connect(scheduled, read_only=True) as con:
        days = con.sql("SELECT DISTINCT strftime(window_start, '%Y-%m-%d') FROM window_metrics "
                       "WHERE grain = 'day' ORDER BY 1").fetchall()
    assert days == [("2026-10-01",), ("2026-10-02",), ("2026-10-03",)]

    with connect(scheduled, read_only=True) as con:
        before = snapshot(con)
    (again,) = child(airflow_env, tmp_path, "recallwatch_monitor", "2026-10-03T00:00:00+00:00",
                     **env)
    assert again["state"] == "success"
    with connect(scheduled, read_only=True) as con:
        assert snapshot(con) == before


@pytest.mark.slow
def test_a_schedule_off_midnight_does_the_day_that_ended_whole_and_an_hour_without_one_skips(
        airflow_env, tmp_path):
    world, index, scheduled, caught_up, env = _scheduled_world(tmp_path, days=2, per_day=80)

    (run,) = child(airflow_env, tmp_path, "recallwatch_monitor", "2026-10-02T06:00:00+00:00",
                   RECALLWATCH_SCHEDULE="0 6 * * *", **env)
    assert (run["state"], run["start"], run["end"]) == (
        "success", "2026-10-01T06:00:00+00:00", "2026-10-02T06:00:00+00:00"), run
    with connect(scheduled, read_only=True) as con:
        checked = con.sql("SELECT DISTINCT interval_start, interval_end FROM quality_checks "
                          "WHERE stage = 'files'").fetchall()
    assert checked == [(datetime(2026, 10, 1), datetime(2026, 10, 2))]
    # the day that ended, whole (its hours before 06:00 too), as `run` builds it
    api.run(caught_up, logs=[str(world.logs_dir / "dt=2026-10-01")], gold=str(world.gold_path),
            gold_version=world.gold_version, index=index)
    rows = _table(scheduled, "window_metrics")
    assert rows and rows == _table(caught_up, "window_metrics")

    with connect(scheduled, read_only=True) as con:
        before = snapshot(con)
    (hour,) = child(airflow_env, tmp_path, "recallwatch_monitor", "2026-10-02T12:00:00+00:00",
                    RECALLWATCH_SCHEDULE="0 * * * *", **env)
    assert hour["state"] == "success", hour
    assert hour["tasks"].pop("logs")[0] == "success"
    assert {state for state, _ in hour["tasks"].values()} == {"skipped"}, hour
    with connect(scheduled, read_only=True) as con:
        assert snapshot(con) == before


class _Hook(BaseHTTPRequestHandler):
    """A webhook alert channel on loopback that records what it is sent."""

    received: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append({"path": self.path, "body": json.loads(body)})
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def webhook():
    _Hook.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", _Hook.received
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_duplicate_request_ids_fail_the_gate_publish_nothing_and_tell_the_channels(
        airflow_env, tmp_path, webhook):
    world = generate_demo_world(tmp_path / "world", days=1, requests_per_day=50)
    warehouse = tmp_path / "scheduled.duckdb"
    api.run(warehouse, logs=[str(world.logs_dir)], gold=str(world.gold_path),
            gold_version=world.gold_version,
            index=[(str(p), v) for v, p in world.index_manifests.items()])
    day = "2026-10-02T{}:00:00Z"
    write_jsonl(world.logs_dir / "dt=2026-10-02" / "requests.jsonl", [
        request("r-1", ["c-1"], ts=day.format(10), gold_id="g-001", index_version="idx-v1"),
        request("r-2", ["c-2"], ts=day.format(11), gold_id="g-002", index_version="idx-v1"),
        request("r-2", ["c-3"], ts=day.format(12), gold_id="g-003", index_version="idx-v1"),
    ])
    with connect(warehouse, read_only=True) as con:
        before = {t: d for t, d in snapshot(con).items() if t != "quality_checks"}
    url, received = webhook

    (run,) = child(airflow_env, tmp_path, "recallwatch_monitor", "2026-10-03T00:00:00+00:00",
                   RECALLWATCH_WEBHOOK_URL=url,
                   **_monitor_env(tmp_path, warehouse, world.logs_dir))
    assert run["state"] == "failed"
    assert run["tasks"]["logs"][0] == "success"
    assert run["tasks"]["check"] == ["failed", 1]   # failed at once, not retried
    assert {run["tasks"][t][0] for t in run["tasks"] if t not in ("logs", "check")} == {
        "upstream_failed"}
    with connect(warehouse, read_only=True) as con:
        after = {t: d for t, d in snapshot(con).items() if t != "quality_checks"}
        failed = con.sql("SELECT check_name, observed FROM quality_checks WHERE blocking "
                         "AND NOT success AND interval_start = '2026-10-02'").fetchall()
    assert after == before   # nothing loaded, scored or published: window_metrics included
    assert [name for name, _ in failed] == ["request_id unique"]

    assert [m["path"] for m in received] == ["/hook"]
    notice = received[0]["body"]
    assert notice["event"] == "task_failed"
    assert notice["title"] == "recallwatch: task check of DAG recallwatch_monitor failed"
    assert notice["interval_start"].startswith("2026-10-02T00:00:00")
    assert "request_id unique" in notice["text"]


@pytest.mark.slow
def test_backfill_triggered_by_hand_does_what_rebuild_and_drift_do(airflow_env, tmp_path):
    world = generate_demo_world(tmp_path / "world", days=3, requests_per_day=50)
    scheduled, direct = tmp_path / "scheduled.duckdb", tmp_path / "direct.duckdb"
    for warehouse in (scheduled, direct):
        api.run(warehouse, logs=[str(world.logs_dir)], gold=str(world.gold_path),
                gold_version=world.gold_version,
                index=[(str(p), v) for v, p in world.index_manifests.items()])
    # the rebuilt index holds the same chunks under a new version
    manifest = tmp_path / "idx-v2.parquet"
    with connect(":memory:") as con:
        con.execute(f"COPY (SELECT * REPLACE ('idx-v2' AS index_version) FROM "
                    f"'{world.index_manifests['idx-v1']}') TO '{manifest}'")
    rebuild = {"index_version": "idx-v2", "manifest": str(manifest), "live_from": "2026-10-02"}

    (run,) = child(airflow_env, tmp_path, "recallwatch_backfill", json.dumps(rebuild),
                   RECALLWATCH_WAREHOUSE=str(scheduled),
                   RECALLWATCH_REPORT_DIR=str(tmp_path / "report"))
    assert run["state"] == "success", run
    assert (run["start"], run["end"]) == (None, None)   # a manual run: no data interval
    assert (tmp_path / "report" / "report.html").exists()

    api.rebuild(direct, **rebuild)
    api.drift(direct)
    for table in ("index_chunks", "window_metrics", "drift_events"):
        rows = _table(scheduled, table)
        assert rows and rows == _table(direct, table), table


@pytest.mark.slow
def test_late_logs_before_a_rebuild_rescore_its_days_as_run_does(airflow_env, tmp_path):
    # zeta served day 1, alpha (late logs) day 2, the rebuilt index `new` from day 3; the gold
    # chunk c-1 is "alpha text" in alpha (n-1 in new), "zeta text" in zeta (n-2). Day 2's
    # logs arrive after the rebuild: the monitor re-run for day 2 scored day 2 only, so day 3
    # stayed carried from zeta (r3 recall 0) where `run` carries from alpha (recall 1)
    logs = tmp_path / "logs"
    files = {"gold": [golden("g-1", ["c-1"])],
             "zeta": [{"chunk_id": "c-1", "text": "zeta text"}],
             "alpha": [{"chunk_id": "c-1", "text": "alpha text"}],
             "new": [{"chunk_id": "n-1", "text": "alpha text"},
                     {"chunk_id": "n-2", "text": "zeta text"}]}
    for name, records in files.items():
        write_jsonl(tmp_path / f"{name}.jsonl", records)
    days = {1: request("r1", ["c-1"], ts="2026-11-01T10:00:00Z", index_version="zeta"),
            2: request("r2", ["c-1"], ts="2026-11-02T10:00:00Z", index_version="alpha"),
            3: request("r3", ["n-1"], ts="2026-11-03T10:00:00Z", index_version="new")}
    scheduled, caught_up = tmp_path / "scheduled.duckdb", tmp_path / "run.duckdb"
    for warehouse in (scheduled, caught_up):
        api.ingest_gold(warehouse, str(tmp_path / "gold.jsonl"), "v1")
        for version in ("zeta", "alpha"):
            api.ingest_index(warehouse, str(tmp_path / f"{version}.jsonl"), version)
    env = _monitor_env(tmp_path, scheduled, logs)
    for n in (1, 3):
        write_jsonl(logs / f"dt=2026-11-0{n}" / "requests.jsonl", [days[n]])
    runs = child(airflow_env, tmp_path, "recallwatch_monitor", "2026-11-02T00:00:00+00:00",
                 "2026-11-04T00:00:00+00:00", **env)
    assert [r["state"] for r in runs] == ["success", "success"], runs
    api.rebuild(scheduled, "new", str(tmp_path / "new.jsonl"), "2026-11-03")
    write_jsonl(logs / "dt=2026-11-02" / "requests.jsonl", [days[2]])   # late
    (late,) = child(airflow_env, tmp_path, "recallwatch_monitor", "2026-11-03T00:00:00+00:00",
                    **env)
    assert late["state"] == "success", late

    api.rebuild(caught_up, "new", str(tmp_path / "new.jsonl"), "2026-11-03")
    api.run(caught_up, logs=[str(logs)])
    with connect(scheduled, read_only=True) as con:
        assert con.sql("SELECT request_id, recall FROM request_scores WHERE route = 'ids' "
                       "ORDER BY 1").fetchall() == [("r1", 1.0), ("r2", 1.0), ("r3", 1.0)]
    for table in ("carried_gold_ids", "request_scores", "window_metrics", "drift_events"):
        rows = _table(scheduled, table)
        assert rows and rows == _table(caught_up, table), table


@pytest.mark.slow
def test_a_monitor_run_given_start_and_end_does_that_day(airflow_env, tmp_path):
    # dags/README's way to re-run a past day: both params shared one Param, so the run saw
    # start = end (the last written), found no day in it and skipped everything, a success
    world, index, scheduled, caught_up, env = _scheduled_world(tmp_path, days=2, per_day=40)
    (run,) = child(airflow_env, tmp_path, "recallwatch_monitor",
                   json.dumps({"start": "2026-10-02", "end": "2026-10-03"}), **env)
    assert run["state"] == "success", run
    assert {state for state, _ in run["tasks"].values()} == {"success"}, run
    api.run(caught_up, logs=[str(world.logs_dir / "dt=2026-10-02")], gold=str(world.gold_path),
            gold_version=world.gold_version, index=index)
    rows = _table(scheduled, "window_metrics")
    assert rows and rows == _table(caught_up, "window_metrics")
    with connect(scheduled, read_only=True) as con:
        assert con.sql("SELECT DISTINCT window_start::DATE::VARCHAR FROM window_metrics"
                       ).fetchall() == [("2026-10-02",)]


@pytest.mark.slow
@pytest.mark.parametrize("conf", [{"start": "2026-10-02"}, {"start": "2026-10-02",
                                                            "end": "the day after"},
                                  # reversed, or no whole day: every task skipped, a success
                                  {"start": "2026-10-03", "end": "2026-10-02"},
                                  {"start": "2026-10-02", "end": "2026-10-02T12:00"}])
def test_a_monitor_run_without_a_whole_interval_fails_at_once_not_after_its_retries(
        airflow_env, tmp_path, conf):
    # a run triggered by hand with start alone, or an end that is no date: the logs task's
    # one sentence was retried twice, 5 minutes apart, before the run failed
    world, index, scheduled, caught_up, env = _scheduled_world(tmp_path, days=1, per_day=10)
    (run,) = child(airflow_env, tmp_path, "recallwatch_monitor", json.dumps(conf), **env)
    assert run["state"] == "failed"
    assert run["tasks"]["logs"] == ["failed", 1], run


def test_the_monitors_first_interval_is_its_start_date_in_utc(airflow_env, tmp_path):
    # a naive start date was read in Airflow's default time zone: in America/New_York it was
    # 10-01 04:00 UTC, the first interval of the UTC cron began on 10-02, and 10-01 never ran
    for zone in ("America/New_York", "UTC"):
        described = child(airflow_env, tmp_path, "describe",
                          AIRFLOW__CORE__DEFAULT_TIMEZONE=zone,
                          RECALLWATCH_START_DATE="2026-10-01")
        start = datetime.fromisoformat(described["dags"]["recallwatch_monitor"]["start_date"])
        assert start == datetime(2026, 10, 1, tzinfo=UTC), (zone, start)


@pytest.mark.slow
def test_a_backfill_without_its_params_fails_at_once_not_after_its_retries(airflow_env,
                                                                           tmp_path):
    # a hand trigger (or an event) without index_version, manifest, live_from: the same
    # sentence came back twice, 5 minutes apart, before the run failed
    warehouse = tmp_path / "scheduled.duckdb"
    with connect(warehouse):
        pass
    (run,) = child(airflow_env, tmp_path, "recallwatch_backfill", json.dumps({}),
                   RECALLWATCH_WAREHOUSE=str(warehouse),
                   RECALLWATCH_REPORT_DIR=str(tmp_path / "report"))
    assert run["state"] == "failed"
    assert run["tasks"]["rebuild"] == ["failed", 1], run


def test_an_empty_setting_is_its_default_not_an_import_error(airflow_env, tmp_path):
    # `KEY: ${KEY:-}` in compose (empty = not configured) made the monitor an import error
    described = child(airflow_env, tmp_path, "describe", RECALLWATCH_SCHEDULE="",
                      RECALLWATCH_START_DATE="", RECALLWATCH_WAREHOUSE="")
    assert described["errors"] == {}
    monitor = described["dags"]["recallwatch_monitor"]
    assert "expression='0 0 * * *'" in monitor["schedule"]
    assert monitor["start_date"] == "2026-10-01T00:00:00+00:00"


def test_a_failure_notice_names_the_days_a_run_was_given(monkeypatch):
    # a re-run triggered with params start/end has no data interval: the notice said "a run
    # without a data interval", its interval fields empty, whichever day had failed
    from pipeline import announce

    sent = []
    monkeypatch.setattr(announce, "announce_failure", lambda *a, **k: sent.append(a))

    class TI:
        dag_id, task_id, run_id = "recallwatch_monitor", "score", "manual__1"

    announce.on_task_failure({"task_instance": TI(), "data_interval_start": None,
                              "data_interval_end": None,
                              "params": {"start": "2026-10-02", "end": "2026-10-03"}})
    announce.on_task_failure({"task_instance": TI(), "params": {"start": None, "end": None},
                              "data_interval_start": "2026-10-01T00:00:00+00:00",
                              "data_interval_end": "2026-10-02T00:00:00+00:00"})
    assert [a[2:] for a in sent] == [("2026-10-02", "2026-10-03"),
                                     ("2026-10-01T00:00:00+00:00", "2026-10-02T00:00:00+00:00")]


FIRST_RUNS = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
from airflow.serialization.serialized_objects import decode_timetable, encode_timetable
from airflow.timetables.base import TimeRestriction
from pipeline import api

dag = DagBag(dag_folder=sys.argv[1]).dags["recallwatch_monitor"]
restriction = TimeRestriction(earliest=dag.start_date, latest=None, catchup=True)
timetable = decode_timetable(encode_timetable(dag.timetable))  # the scheduler's own
first = timetable.next_dagrun_info(last_automated_data_interval=None, restriction=restriction)
interval = first.data_interval
json.dump(api.days_ended(interval.start, interval.end), open(sys.argv[2], "w"))
"""


@pytest.mark.parametrize(("schedule", "start", "first_day"), [
    ("0 0 * * *", "2026-10-01", "2026-10-01"),
    ("0 6 * * *", "2026-10-01", "2026-10-01"),
    ("0 0 * * 1", "2026-10-01", "2026-10-01"),   # weekly, the start date a Thursday
    ("0 0 1 * *", "2026-10-15", "2026-10-15"),   # monthly, from mid-month
])
def test_the_monitors_first_run_does_the_start_date_whatever_the_schedule(
        airflow_env, tmp_path, schedule, start, first_day):
    # a weekly schedule from a Thursday began its first interval on the Monday after: the
    # logs of the start date and the days after it up to that Monday were never read
    out = tmp_path / "first.json"
    done = subprocess.run([sys.executable, "-c", FIRST_RUNS, str(DAGS), str(out)],
                          env={**airflow_env, "RECALLWATCH_SCHEDULE": schedule,
                               "RECALLWATCH_START_DATE": start},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    days = json.loads(out.read_text())
    assert days is not None and days["start"] <= f"{first_day}T00:00:00" < days["end"], days
