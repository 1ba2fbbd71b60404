"""The Airflow deployment end to end, on real processes: the ones docker-compose.yml runs, started
natively by deploy/standalone.py with deploy/airflow.env (there is no Docker engine here).

Each test gets a fresh PostgreSQL database as the metadata DB, runs deploy/init.sh (migrate,
the one-slot writer pool, the admin's password), starts api-server, scheduler, dag-processor and
triggerer, loads a 7-day demo world's gold set and index manifest, and backfills
recallwatch_monitor over the 7 days with `airflow backfill create`. The warehouse must then hold
what `recallwatch run` builds from the same logs. The LocalExecutor test then announces an index
rebuild (`recallwatch announce-rebuild`), which starts recallwatch_backfill; the days the rebuilt
index served score as if its chunks had kept their IDs. The Celery test runs the backfill on two
workers with hostnames of their own (Airflow's task_instance.hostname says which ran what) and
Redis as the broker, and no task may fail or be retried: the writer pool lets one process at a
time open the DuckDB file.

Finalizers stop every process group (and any process still carrying the test's AIRFLOW_HOME),
drop the database and empty the Redis database, also when a test fails."""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import api
from pipeline.demo import generate_demo_world
from pipeline.warehouse import connect, quote_identifier

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
POSTGRES = "postgresql+psycopg2://postgres@127.0.0.1:5432"
REDIS = "redis://127.0.0.1:6379"
DAYS, PER_DAY = 7, 600
LIVE_DAY = 5                        # the rebuilt index serves from the 6th day on
REBUILT = "idx-v1-rebuilt"          # ... under new chunk IDs: PREFIX + the old ID
PREFIX = "rb-"
MONITOR, BACKFILL = "recallwatch_monitor", "recallwatch_backfill"
COMPARED = ("request_scores", "window_metrics", "drift_events", "miss_causes", "quarantine")
TEST_BUDGET = 9 * 60                # seconds; each test stays under 10 minutes
WORKERS = ("recallwatch-worker-1", "recallwatch-worker-2")


def load_standalone():
    """deploy/standalone.py, which is a script beside the deployment files, not a package."""
    if "recallwatch_standalone" not in sys.modules:
        spec = importlib.util.spec_from_file_location("recallwatch_standalone",
                                                      ROOT / "deploy" / "standalone.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules["recallwatch_standalone"]


standalone = load_standalone()


class Deadline:
    """One time budget for a whole test, shared by its waits."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self, at_most: float) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            pytest.fail("the test ran out of its time budget")
        return min(left, at_most)


# --------------------------------------------------------------------------- the demo world

def serve_from_rebuilt_index(world, live: date) -> Path:
    """From `live` on, the world's requests were served by a rebuilt index holding the same
    chunks under new IDs: rewrite those days' logs (JSON Lines textually, so the deliberately
    broken records stay broken as they were; Parquet row by row) and write the rebuilt index's
    manifest. Returns the manifest's path."""
    for day in range((world.end - live).days):
        folder = world.logs_dir / f"dt={live + timedelta(days=day)}"
        for path in folder.glob("*.jsonl"):
            text = path.read_text(encoding="utf-8")
            text = text.replace('"chunk_id":"', f'"chunk_id":"{PREFIX}')
            text = text.replace('"index_version":"idx-v1"', f'"index_version":"{REBUILT}"')
            path.write_text(text, encoding="utf-8")
        for path in folder.glob("*.parquet"):
            table = pq.read_table(path)
            rows = table.to_pylist()
            for row in rows:
                row["index_version"] = REBUILT
                for chunk in [*(row["retrieved"] or []),
                              *(c for step in row["retrieval_steps"] or [] for c in step or [])]:
                    chunk["chunk_id"] = PREFIX + chunk["chunk_id"]
            pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    old = pq.read_table(world.index_manifests["idx-v1"]).to_pylist()
    for row in old:
        row["chunk_id"], row["index_version"] = PREFIX + row["chunk_id"], REBUILT
    manifest = world.root / "index" / f"{REBUILT}.parquet"
    pq.write_table(pa.Table.from_pylist(old), manifest)
    return manifest


def gate_passes(line: str) -> bool:
    """Whether recallwatch_monitor's quality gate lets a JSON line through: it parses and has
    a readable timestamp (pipeline.quality blocks the whole day otherwise)."""
    try:
        record = json.loads(line)
        datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return False
    return True


def drop_what_the_gate_stops(world) -> None:
    """The demo slips unparsable and timestamp-less records into its logs, and the gate stops
    such a day by design; drop those lines. Its other broken records stay, and ingest
    quarantines them in every warehouse alike."""
    for path in world.logs_dir.glob("dt=*/*.jsonl"):
        lines = path.read_text(encoding="utf-8").splitlines()
        path.write_text("".join(f"{line}\n" for line in lines if gate_passes(line)),
                        encoding="utf-8")


def load_references(warehouse: Path, world) -> None:
    """What the deployment needs before the first run: the gold set and the index manifest."""
    api.ingest_gold(warehouse, str(world.gold_path), world.gold_version)
    api.ingest_index(warehouse, str(world.index_manifests["idx-v1"]), "idx-v1")


def tables(warehouse: Path, names=COMPARED) -> dict[str, list[tuple]]:
    with connect(warehouse, read_only=True) as con:
        return {name: sorted(con.sql(f"SELECT * FROM {quote_identifier(name)}").fetchall(),
                             key=repr) for name in names}


def scores_by_day(rows: list[tuple], columns: list[str]) -> dict[date, list[tuple]]:
    """request_scores rows by UTC day, without index_version (a rebuild renames the index)."""
    at, keep = columns.index("timestamp"), [i for i, c in enumerate(columns)
                                            if c != "index_version"]
    days: dict[date, list[tuple]] = {}
    for row in rows:
        days.setdefault(row[at].date(), []).append(tuple(row[i] for i in keep))
    return {day: sorted(found, key=repr) for day, found in days.items()}


def request_score_columns(warehouse: Path) -> list[str]:
    with connect(warehouse, read_only=True) as con:
        return [c[0] for c in con.sql("SELECT * FROM request_scores LIMIT 0").description]


def assert_same_tables(got: dict, want: dict, what: str) -> None:
    for name in want:
        if got[name] != want[name]:
            extra = [r for r in got[name] if r not in want[name]][:3]
            missing = [r for r in want[name] if r not in got[name]][:3]
            pytest.fail(f"{what}: {name} differs ({len(got[name])} rows, expected "
                        f"{len(want[name])}); unexpected {extra}; missing {missing}")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A 7-day demo world ending yesterday (so recallwatch_monitor, unpaused with catchup,
    has nothing to schedule beyond the backfill), whose last two days were served by a rebuilt
    index; and the warehouses `recallwatch run` builds from it, before and after the rebuild,
    plus the scores of the same world had the chunks kept their IDs."""
    root = tmp_path_factory.mktemp("world")
    start = datetime.now(UTC).date() - timedelta(days=DAYS)
    demo = generate_demo_world(root / "world", days=DAYS, requests_per_day=PER_DAY, start=start)
    unchanged = generate_demo_world(root / "unchanged", days=DAYS, requests_per_day=PER_DAY,
                                    start=start)
    live = start + timedelta(days=LIVE_DAY)
    for one in (demo, unchanged):
        drop_what_the_gate_stops(one)
    manifest = serve_from_rebuilt_index(demo, live)

    before = root / "reference" / "before.duckdb"
    load_references(before, demo)
    api.run(before, logs=[str(demo.logs_dir)])
    after = root / "reference" / "after.duckdb"
    shutil.copy(before, after)
    api.rebuild(after, REBUILT, str(manifest), live.isoformat())  # as recallwatch_backfill
    api.drift(after, None, None)
    same_ids = root / "reference" / "same_ids.duckdb"
    load_references(same_ids, unchanged)
    api.run(same_ids, logs=[str(unchanged.logs_dir)])
    found = {"before": tables(before), "after": tables(after)}
    for table in ("request_scores", "window_metrics", "drift_events", "quarantine"):
        assert found["before"][table], f"the reference {table} is empty: nothing to compare"
    return {"demo": demo, "start": start, "live": live, "manifest": manifest, **found,
            "same_ids": tables(same_ids, ["request_scores"])["request_scores"],
            "columns": request_score_columns(before)}


# --------------------------------------------------------------------------- the deployment

def empty_redis_database() -> str:
    """The URL of a Redis database holding no key, for this test's broker alone."""
    import redis

    for number in secrets.SystemRandom().sample(range(1, 16), 15):
        if redis.Redis.from_url(f"{REDIS}/{number}").dbsize() == 0:
            return f"{REDIS}/{number}"
    pytest.fail("every Redis database 1-15 holds keys; none is free for the broker")


def empty(broker: str) -> None:
    import redis

    redis.Redis.from_url(broker).flushdb()


class Airflow:
    """A running deployment and the calls the tests make to it."""

    def __init__(self, deployment, database: str, password: str):
        self.deployment, self.database, self.password = deployment, database, password
        self.token = None

    @property
    def url(self) -> str:
        return self.deployment.url

    def cli(self, *args: str, timeout: float = 120) -> str:
        return self.deployment.airflow(*args, timeout=timeout).stdout

    def rest(self, path: str) -> dict:
        if self.token is None:
            login = urllib.request.Request(
                f"{self.url}/auth/token", method="POST",
                data=json.dumps({"username": "admin", "password": self.password}).encode(),
                headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(login, timeout=30) as answer:
                self.token = json.loads(answer.read())["access_token"]
        call = urllib.request.Request(f"{self.url}{path}",
                                      headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(call, timeout=30) as answer:
            return json.loads(answer.read())

    def metadata(self, query: str, *params) -> list[tuple]:
        """Rows of Airflow's own records (the metadata database)."""
        import psycopg2

        with psycopg2.connect(self.database.replace("+psycopg2", "")) as con, \
                con.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchall()

    def wait_for_dags(self, dag_ids: set[str], deadline: Deadline) -> None:
        end = time.monotonic() + deadline.left(180)
        while time.monotonic() < end:
            self.deployment.check_alive()
            errors = self.rest("/api/v2/importErrors")["import_errors"]
            assert not errors, errors
            found = {d["dag_id"] for d in self.rest("/api/v2/dags?limit=100")["dags"]}
            if dag_ids <= found:
                return
            time.sleep(2)
        pytest.fail(f"the dag-processor did not parse {dag_ids}\n{self.deployment.tail()}")

    def wait_for_runs(self, dag_id: str, count: int, deadline: Deadline,
                      at_most: float) -> list[dict]:
        """Until `count` runs of `dag_id` succeeded; a failed run, or a task that failed or
        waits for a retry, ends the wait at once with its log."""
        end = time.monotonic() + deadline.left(at_most)
        runs: list[dict] = []
        while time.monotonic() < end:
            self.deployment.check_alive()
            runs = self.rest(f"/api/v2/dags/{dag_id}/dagRuns?limit=100")["dag_runs"]
            troubled = self.metadata(
                "SELECT task_id, run_id, state FROM task_instance WHERE dag_id = %s AND state "
                "IN ('failed', 'up_for_retry', 'upstream_failed')", dag_id)
            if troubled or any(r["state"] == "failed" for r in runs):
                pytest.fail(f"{dag_id}: {troubled or runs}\n{self.task_logs(dag_id)}")
            if len(runs) >= count and all(r["state"] == "success" for r in runs):
                return runs
            time.sleep(3)
        pytest.fail(f"{dag_id}: not {count} successful runs in time: "
                    f"{[(r['run_id'], r['state']) for r in runs]}\n{self.deployment.tail()}")

    def task_logs(self, dag_id: str, lines: int = 60) -> str:
        """The end of every task log of `dag_id` that mentions an error."""
        out = []
        for path in sorted((self.deployment.home / "logs").glob(f"dag_id={dag_id}/**/*.log")):
            text = path.read_text(errors="replace")
            if "error" in text.lower():
                out.append(f"--- {path}\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(out[:4]) or self.deployment.tail()


@pytest.fixture
def airflow(request, tmp_path):
    """Start the deployment: `airflow("local"|"celery", warehouse=, logs=, first_day=,
    deadline=)`. Finalizers stop its processes, drop its database and empty its Redis
    database."""

    def start(executor: str, *, warehouse: Path, logs: Path, first_day: date,
              deadline: Deadline) -> Airflow:
        name = f"recallwatch_test_{os.getpid()}_{secrets.token_hex(4)}"
        database = f"{POSTGRES}/{name}"
        broker = empty_redis_database() if executor == "celery" else None
        if broker:
            request.addfinalizer(lambda: empty(broker))
        home = tmp_path / "airflow-home"
        api_port = standalone.free_port()
        native = standalone.native_settings(
            home, database=database, api_port=api_port, executor=executor, broker=broker,
            data={"RECALLWATCH_WAREHOUSE": str(warehouse), "RECALLWATCH_LOG_SOURCE": str(logs),
                  "RECALLWATCH_REPORT_DIR": str(tmp_path / "reports")},
            ports={"AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT":
                   standalone.free_port(),
                   "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": standalone.free_port(),
                   "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": standalone.free_port()})
        # no alert channel or Airflow of the caller's; the DAG catches up from the first day
        inherit = {k: v for k, v in os.environ.items() if not k.startswith("RECALLWATCH_")}
        env = standalone.process_environment(native, inherit=inherit)
        env["RECALLWATCH_START_DATE"] = first_day.isoformat()
        deployment = standalone.Deployment(home=home, env=env, api_port=api_port)
        password = secrets.token_urlsafe(12)

        def stop():
            killed = deployment.stop()
            left = standalone.processes_with_home(home)
            standalone.drop_database(database)
            assert not left, f"processes of {home} survived the stop: {left}"
            print(f"stopped {home}" + (f" (killed {killed})" if killed else ""))

        request.addfinalizer(stop)
        deployment.initialize(env={"AIRFLOW_PASSWORD": password},
                              timeout=deadline.left(300))
        deployment.start_components()
        if executor == "celery":
            for worker in WORKERS:
                deployment.start_worker(worker)
        deployment.wait_healthy(timeout=deadline.left(180))
        return Airflow(deployment, database, password)

    return start


def backfill_the_week(airflow: Airflow, world, deadline: Deadline) -> list[dict]:
    """What an operator types: backfill recallwatch_monitor over the 7 days, unpause it."""
    first, last = world["start"], world["start"] + timedelta(days=DAYS - 1)
    airflow.wait_for_dags({MONITOR, BACKFILL}, deadline)
    airflow.cli("backfill", "create", "--dag-id", MONITOR, "--from-date", first.isoformat(),
                "--to-date", last.isoformat())
    airflow.cli("dags", "unpause", MONITOR)
    return airflow.wait_for_runs(MONITOR, DAYS, deadline, at_most=420)


def task_records(airflow: Airflow, dag_id: str) -> list[tuple]:
    return airflow.metadata(
        "SELECT task_id, run_id, state, try_number, hostname, pool FROM task_instance "
        "WHERE dag_id = %s ORDER BY run_id, task_id", dag_id)


def assert_ran_once_each_in_the_writer_pool(airflow: Airflow, dag_id: str) -> list[tuple]:
    records = task_records(airflow, dag_id)
    pool = standalone.settings()["RECALLWATCH_WRITER_POOL"]
    assert airflow.metadata("SELECT slots FROM slot_pool WHERE pool = %s", pool) == [(1,)]
    assert records and all(r[2] == "success" and r[3] == 1 for r in records), records
    # no earlier try of any task (a failed attempt, e.g. a DuckDB lock error, would be here)
    assert airflow.metadata("SELECT task_id, run_id, state FROM task_instance_history "
                            "WHERE dag_id = %s", dag_id) == []
    # every task opens the warehouse, and so holds the one writer slot, but finding the files
    outside = {r[0] for r in records if r[5] != pool}
    assert outside <= {"logs"}, f"tasks outside the pool {pool}: {outside}"
    return records


# --------------------------------------------------------------------------- the tests

def test_local_executor_backfill_builds_what_run_builds_and_a_rebuild_rescores_its_days(
        world, airflow, tmp_path):
    deadline, began = Deadline(TEST_BUDGET), time.monotonic()
    warehouse = tmp_path / "warehouse" / "recallwatch.duckdb"
    load_references(warehouse, world["demo"])
    deployment = airflow("local", warehouse=warehouse, logs=world["demo"].logs_dir,
                         first_day=world["start"], deadline=deadline)
    up = time.monotonic()

    runs = backfill_the_week(deployment, world, deadline)
    assert sorted(r["run_type"] for r in runs) == ["backfill"] * DAYS
    assert sorted(r["data_interval_start"][:10] for r in runs) == [
        (world["start"] + timedelta(days=d)).isoformat() for d in range(DAYS)]
    assert_ran_once_each_in_the_writer_pool(deployment, MONITOR)
    backfilled = time.monotonic()
    before = tables(warehouse)
    assert_same_tables(before, world["before"], "after the backfill, vs recallwatch run")

    # An index rebuild went live on the 6th day: announce it as an operator would.
    deployment.cli("dags", "unpause", BACKFILL)
    announced = subprocess.run(
        [str(standalone.BIN / "recallwatch"), "announce-rebuild", "--airflow-url",
         deployment.url, "--index-version", REBUILT, "--manifest", str(world["manifest"]),
         "--live-from", world["live"].isoformat()],
        env={**os.environ, "AIRFLOW_USER": "admin", "AIRFLOW_PASSWORD": deployment.password},
        capture_output=True, text=True, timeout=120, check=False)
    assert announced.returncode == 0, announced.stdout + announced.stderr
    (run,) = deployment.wait_for_runs(BACKFILL, 1, deadline, at_most=300)
    assert run["run_type"] == "asset_triggered"
    assert_ran_once_each_in_the_writer_pool(deployment, BACKFILL)
    after = tables(warehouse)
    assert_same_tables(after, world["after"], "after the rebuild, vs recallwatch rebuild")

    # The rebuilt days were re-scored, to what they would score had no ID changed; the days
    # before were left alone.
    columns = world["columns"]
    old = scores_by_day(before["request_scores"], columns)
    new = scores_by_day(after["request_scores"], columns)
    same_ids = scores_by_day(world["same_ids"], columns)
    assert set(new) == set(old) == set(same_ids)
    for day in sorted(new):
        if day < world["live"]:
            assert new[day] == old[day], day
        else:
            assert new[day] != old[day], f"{day} was not re-scored"
            assert new[day] == same_ids[day], day
    print(f"\nLocalExecutor: healthy in {up - began:.0f} s, backfill of {DAYS} days in "
          f"{backfilled - up:.0f} s, rebuild in {time.monotonic() - backfilled:.0f} s")


def test_two_celery_workers_share_the_backfill_and_build_the_same_warehouse(
        world, airflow, tmp_path):
    if not standalone.can_set_hostname():
        pytest.skip("unshare --uts is not permitted here (needs root): the two workers would "
                    "share one hostname, and task_instance.hostname could not tell them apart")
    deadline, began = Deadline(TEST_BUDGET), time.monotonic()
    warehouse = tmp_path / "warehouse" / "recallwatch.duckdb"
    load_references(warehouse, world["demo"])
    deployment = airflow("celery", warehouse=warehouse, logs=world["demo"].logs_dir,
                         first_day=world["start"], deadline=deadline)
    up = time.monotonic()

    runs = backfill_the_week(deployment, world, deadline)
    assert len(runs) == DAYS
    records = assert_ran_once_each_in_the_writer_pool(deployment, MONITOR)
    hosts = {r[4] for r in records}
    assert hosts == set(WORKERS), f"tasks ran on {hosts}"
    # the same warehouse as recallwatch run, and so as the LocalExecutor deployment
    assert_same_tables(tables(warehouse), world["before"], "Celery backfill vs recallwatch run")
    per_host = {h: sum(r[4] == h for r in records) for h in sorted(hosts)}
    print(f"\nCeleryExecutor: healthy in {up - began:.0f} s, backfill of {DAYS} days in "
          f"{time.monotonic() - up:.0f} s, tasks per worker {per_host}")
