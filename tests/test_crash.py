"""Crash safety of `recallwatch run`: a run killed with SIGKILL at any point and then run again
leaves every table, public and internal, and the report exactly as one clean run does.

The world is the demo generator's, cut to six days (three JSON Lines and three Parquet log
files, one per day, with five broken records; a gold set with passages; one index manifest),
scored on the ids and passages routes so that scoring is a real share of the run. One clean
`run` builds warehouse A and gives the timeline of its phases, read from the progress bar it
draws on a terminal (here a pseudo-terminal). Each kill point then starts `run` on a warehouse
of its own and kills it (SIGKILL: no handler, no rollback, no flush) when its progress first
shows a phase — the ingest of a given file, scoring, aggregation, drift — or a delay later that
a seeded RNG draws from how long the clean run spent in that phase; some points kill a second
run too. The warehouse must open after every kill, and the run after the last kill must finish
with A's rows, counts that reconcile, A's report and no file left over. A second test kills
`run` inside DuckDB's creation of a new warehouse file, at a given write.

Tables are compared as digests of all their rows sorted, each row as DuckDB's text of it, in
which a double is its shortest round-trip decimal: nothing is rounded. No column is left out.
The only wall-clock columns of the public tables are quality_checks.checked_at (written by
`recallwatch check`, not by `run`) and alerts.first_tried / last_tried (written only when
alert channels are configured; the runs here get none, so `alerts` is compared, empty); of the
internal ones, judge_verdicts.created_at (written only with a judge) and
audit_labels.labelled_at (written by `recallwatch audit score`)."""

from __future__ import annotations

import os
import pty
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from pipeline.config import put_in_force, resolve
from pipeline.demo import generate_demo_world
from pipeline.errors import RecallwatchError
from pipeline.warehouse import INTERNAL_TABLES, PUBLIC_TABLES, connect, quote_identifier
from tests.conftest import golden, request, write_jsonl

pytestmark = pytest.mark.slow

DAYS = 6
PER_DAY = 1500
ROUTES = ("ids", "passages")
SEED = 20261201
# kill points recovered side by side (the machine has two cores)
WORKERS = 2
# The run's progress descriptions in the order the run reaches them; a kill "at" a phase lands
# right after `run` first draws it (the bar is redrawn ten times a second).
PHASES = [f"ingest dt=2026-10-0{d}" for d in range(1, DAYS + 1)] + [
    "score", "aggregate by", "drift by"]
_PHASE = re.compile("|".join(re.escape(p) for p in reversed(PHASES)))
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# Nothing from the caller's environment reaches the runs: no alert channels (their rows carry
# the wall clock and would need a server), no judge, no other warehouse or memory limit.
_ENV = {name: value for name, value in os.environ.items()
        if not name.startswith(("RECALLWATCH_", "OPENAI_"))}
TABLES = PUBLIC_TABLES + INTERNAL_TABLES


@dataclass(frozen=True)
class Kill:
    """Where one run is killed: when its progress first shows `phase` (or from its start),
    `after` seconds later."""

    phase: str | None
    after: float = 0.0


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return generate_demo_world(tmp_path_factory.mktemp("world"), days=DAYS,
                               requests_per_day=PER_DAY)


def run_args(world, warehouse: Path) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", "run", "--warehouse", str(warehouse),
            "--logs", str(world.logs_dir), "--gold", str(world.gold_path),
            "--gold-version", world.gold_version,
            *[f"--index={version}={path}" for version, path in world.index_manifests.items()],
            "--out", str(warehouse.parent / "report")]


def new_warehouse(directory: Path) -> Path:
    """A warehouse with the routes in force before the first run (the demo's own setting)."""
    warehouse = directory / "wh" / "recallwatch.duckdb"
    with connect(warehouse) as con:
        put_in_force(con, resolve(con, routes=ROUTES))
    return warehouse


def run_to_end(world, warehouse: Path) -> None:
    done = subprocess.run(run_args(world, warehouse), capture_output=True, text=True,
                          env=_ENV, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error" not in done.stderr, done.stderr


@dataclass
class Watched:
    """One `run` watched on a pseudo-terminal: whether it was killed, when (seconds from its
    start) it first drew each phase, and how long it lasted."""

    killed: bool
    seen: dict[str, float]
    seconds: float

    @property
    def last_phase(self) -> str:
        return max(self.seen, key=PHASES.index, default="start")


def watch(world, warehouse: Path, kill: Kill | None = None) -> Watched:
    """Start `run` on a pseudo-terminal, so that it draws its progress, and SIGKILL it at
    `kill` (never with None)."""
    master, slave = pty.openpty()
    env = {**_ENV, "TERM": "xterm", "COLUMNS": "120", "LINES": "30"}
    started = time.monotonic()
    proc = subprocess.Popen(run_args(world, warehouse), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    seen: dict[str, float] = {}
    tail = ""
    deadline = None if kill is None or kill.phase else started + kill.after
    try:
        while proc.poll() is None and (deadline is None or time.monotonic() < deadline):
            wait = 0.02 if deadline is None else min(0.02, deadline - time.monotonic())
            if not select.select([master], [], [], max(wait, 0.0))[0]:
                continue
            try:
                text = tail + _ESCAPE.sub("", os.read(master, 65536).decode(errors="replace"))
            except OSError:   # the run closed its terminal: it is ending
                break
            for phase in _PHASE.findall(text):
                seen.setdefault(phase, time.monotonic() - started)
            tail = text[-64:]   # a description split between two reads
            if (deadline is None and kill is not None
                    and any(PHASES.index(p) >= PHASES.index(kill.phase) for p in seen)):
                deadline = time.monotonic() + kill.after
        if kill is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=300)
    finally:
        os.close(master)
    if kill is None:
        assert proc.returncode == 0, f"run ended with {proc.returncode}"
    return Watched(proc.returncode == -signal.SIGKILL, seen, time.monotonic() - started)


def digests(warehouse: Path) -> dict[str, tuple[int, str]]:
    """Per table: the row count and the md5 of all rows' text, sorted."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return {table: tuple(con.execute(
            "SELECT count(*), md5(coalesce(string_agg(row_text, chr(10) ORDER BY row_text), '')) "
            f"FROM (SELECT r::VARCHAR AS row_text FROM {quote_identifier(table)} r)").fetchall()[0])
            for table in TABLES}
    finally:
        con.close()


def rows_of(warehouse: Path, table: str) -> list[str]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return [r[0] for r in con.execute(
            f"SELECT r::VARCHAR AS t FROM {quote_identifier(table)} r ORDER BY t").fetchall()]
    finally:
        con.close()


def differences(clean: Path, recovered: Path) -> str:
    """Which tables differ, with a few rows of each side, for the failure message."""
    a, b = digests(clean), digests(recovered)
    lines = []
    for table in TABLES:
        if a[table] != b[table]:
            left, right = rows_of(clean, table), rows_of(recovered, table)
            only_a = sorted(set(left) - set(right))[:3]
            only_b = sorted(set(right) - set(left))[:3]
            lines.append(f"{table}: {a[table][0]} clean rows, {b[table][0]} recovered; "
                         f"only clean {only_a}; only recovered {only_b}")
    return "\n".join(lines)


def assert_opens(warehouse: Path) -> None:
    """The killed run's warehouse opens (DuckDB replays its write-ahead log) and reads."""
    con = connect(warehouse, read_only=True)
    try:
        for table in TABLES:
            con.execute(f"SELECT count(*) FROM {quote_identifier(table)}").fetchall()
    finally:
        con.close()


def assert_counts_reconcile(warehouse: Path, n_files: int) -> None:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        files = con.execute(
            "SELECT f.source, f.n_read, f.n_loaded, f.n_quarantined, "
            "(SELECT count(*) FROM quarantine q WHERE q.source = f.source), "
            "(SELECT count(*) FROM requests r WHERE r.source = f.source) "
            "+ (SELECT count(*) FROM request_copies c WHERE c.source = f.source) "
            "FROM ingest_files f WHERE kind = 'logs'").fetchall()
    finally:
        con.close()
    assert len(files) == n_files
    for source, read, loaded, quarantined, in_quarantine, in_requests in files:
        assert read == loaded + quarantined, source
        assert (quarantined, loaded) == (in_quarantine, in_requests), source


def kill_points(clean: Watched) -> list[tuple[Kill, ...]]:
    """Points at the first sight of a phase (inside the ingest of JSON Lines and Parquet
    files, scoring, aggregation, drift), and points a seeded RNG draws inside a phase, uniformly
    over how long the clean run spent in it (before the first phase: loading the gold set and
    the manifest; after the last: drift, the report, the summary). Some kill twice."""
    rng = random.Random(SEED)
    starts = sorted(clean.seen.values()) + [clean.seconds]
    spans = {phase: starts[starts.index(at) + 1] - at for phase, at in clean.seen.items()}

    def inside(phase: str | None) -> Kill:
        if phase is None:
            return Kill(None, rng.uniform(0.5, 1.0) * starts[0])
        return Kill(phase, rng.uniform(0.0, spans.get(phase, 0.0)))

    return [
        (Kill("ingest dt=2026-10-01"),),
        (Kill("ingest dt=2026-10-03"), Kill("score")),
        (Kill("ingest dt=2026-10-06"),),
        (Kill("score"),),
        (Kill("aggregate by"),),
        (Kill("drift by"),),
        (inside(None),),
        (inside("ingest dt=2026-10-02"),),
        (inside("ingest dt=2026-10-05"), inside("aggregate by")),
        (inside("score"),),
        (inside("score"),),
        (inside("drift by"),),
    ]


def recover(world, directory: Path, kills: tuple[Kill, ...]) -> tuple[Path, list[Watched]]:
    """A new warehouse: `run` killed at each of `kills` in turn (the warehouse must open after
    each), then run to the end."""
    warehouse = new_warehouse(directory)
    watched = []
    for kill in kills:
        watched.append(watch(world, warehouse, kill))
        assert_opens(warehouse)
    run_to_end(world, warehouse)
    return warehouse, watched


def test_a_run_killed_anywhere_then_run_again_equals_a_clean_run(world, tmp_path):
    clean = new_warehouse(tmp_path / "clean")
    timeline = watch(world, clean)
    expected = digests(clean)
    report = (clean.parent / "report" / "report.html").read_bytes()
    n_files = len(list(world.logs_dir.rglob("requests.*")))
    assert_counts_reconcile(clean, n_files)
    points = kill_points(timeline)
    with ThreadPoolExecutor(WORKERS) as pool:
        outcomes = list(pool.map(recover, [world] * len(points),
                                 [tmp_path / f"point{n}" for n in range(len(points))], points))
    landed = []
    for number, (kills, (warehouse, watched)) in enumerate(zip(points, outcomes, strict=True)):
        where = f"kill point {number}: " + ", ".join(
            f"{kill} (killed after {w.last_phase})" if w.killed else f"{kill} (ended first)"
            for kill, w in zip(kills, watched, strict=True))
        landed += [w.last_phase for w in watched if w.killed]
        assert digests(warehouse) == expected, f"{where}\n{differences(clean, warehouse)}"
        assert_counts_reconcile(warehouse, n_files)
        assert (warehouse.parent / "report" / "report.html").read_bytes() == report, where
        # nothing half-done is left behind: no write-ahead log, no temporary report
        assert sorted(p.name for p in warehouse.parent.iterdir()) == sorted(
            p.name for p in clean.parent.iterdir()), where
        assert [p.name for p in (warehouse.parent / "report").iterdir()] == ["report.html"], where
    # the kills landed inside the run, spread over ingest, scoring and what follows
    assert len(landed) >= 10, landed
    reached = {p.split(" ")[0] for p in landed}
    assert {"ingest", "score"} <= reached and reached & {"aggregate", "drift"}, landed


@pytest.mark.skipif(shutil.which("strace") is None,
                    reason="strace is not installed (apt-get install strace; `make test` installs "
                           "it as root): only strace can stop the run at DuckDB's header writes")
def test_a_run_killed_while_creating_the_warehouse_leaves_one_the_next_run_creates(tmp_path):
    """DuckDB creates the file, then writes its three 4 KiB headers: a kill in between leaves
    0, 4 or 8 KiB that DuckDB alone refuses to open ever after. strace delivers the SIGKILL as
    a run enters its first, second, third write to the file; then a run goes to the end."""
    logs = write_jsonl(tmp_path / "logs" / "dt=2026-11-01" / "requests.jsonl",
                       [request("r-1", ["a", "b"]), request("r-2", ["c"], gold_id="g-2")])
    gold = write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"]), golden("g-2", ["b"])])

    def args(warehouse: Path) -> list[str]:
        return [sys.executable, "-m", "pipeline.cli", "run", "--warehouse", str(warehouse),
                "--logs", str(logs), "--gold", str(gold), "--gold-version", "v1",
                "--out", str(warehouse.parent / "report")]

    def run_to_end(warehouse: Path) -> None:
        done = subprocess.run(args(warehouse), capture_output=True, text=True, env=_ENV,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr

    clean = tmp_path / "clean" / "recallwatch.duckdb"
    run_to_end(clean)
    warehouse = (tmp_path / "killed" / "recallwatch.duckdb").resolve()
    for write in (1, 2, 3):   # each run starts from the file the one before was killed on
        killed = subprocess.run(
            ["strace", "-f", "-qq", "-o", os.devnull, "-P", str(warehouse),
             "-e", "trace=pwrite64", "-e", f"inject=pwrite64:signal=KILL:when={write}",
             *args(warehouse)], capture_output=True, text=True, env=_ENV, timeout=120,
            check=False)
        # strace ends the way its child did: killed by the same signal
        assert killed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), killed.stderr
        assert warehouse.stat().st_size == (write - 1) * 4096
        with pytest.raises(RecallwatchError, match="holds nothing"):
            connect(warehouse, read_only=True)
    run_to_end(warehouse)
    assert digests(warehouse) == digests(clean)


def test_a_small_file_that_is_no_database_is_left_alone(tmp_path):
    """Only DuckDB's own cut-short headers are taken for a creation that was killed."""
    notes = tmp_path / "notes.txt"
    notes.write_text("not a warehouse\n")
    with pytest.raises(RecallwatchError, match="is not a DuckDB database"):
        connect(notes)
    assert notes.read_text() == "not a warehouse\n"


@pytest.mark.skipif(shutil.which("strace") is None,
                    reason="strace is not installed (apt-get install strace; `make test` installs "
                           "it as root): only strace can hold a run inside DuckDB's "
                           "creation of the file")
def test_a_warehouse_another_process_is_creating_is_in_use_not_a_data_file(tmp_path):
    """Two commands start on a new warehouse at once (a scheduled task and a person): while
    the first holds DuckDB's lock on a file whose headers are not written yet, the second is
    told the warehouse is in use, as it is once the headers are there, not that it is no
    DuckDB database (a data file) or that its creation was interrupted. strace holds the
    first at its first write to the file."""
    gold = write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    warehouse = (tmp_path / "new" / "recallwatch.duckdb").resolve()
    first = subprocess.Popen(
        ["strace", "-f", "-qq", "-o", os.devnull, "-P", str(warehouse), "-e", "trace=pwrite64",
         "-e", "inject=pwrite64:delay_enter=5000000:when=1",
         sys.executable, "-m", "pipeline.cli", "--warehouse", str(warehouse), "ingest", "gold",
         str(gold), "--version", "v1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=_ENV)
    try:
        deadline = time.monotonic() + 60
        while not warehouse.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert warehouse.exists() and warehouse.stat().st_size == 0
        for read_only in (False, True):
            with pytest.raises(RecallwatchError, match="is in use by another recallwatch"):
                connect(warehouse, read_only=read_only)
        assert warehouse.exists()   # still the first one's
        out, err = first.communicate(timeout=120)
    finally:
        first.kill()
        first.wait()
    assert first.returncode == 0, out + err
    assert "loaded 1" in out
    with connect(warehouse, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM goldens").fetchall() == [(1,)]
