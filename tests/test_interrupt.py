"""Ctrl-C (SIGINT) and a warehouse directory the user cannot write: each ends a command with
one sentence and its own exit code, never an internal error or a file blamed for it.

The commands run as subprocesses, as a user runs them: SIGINT goes to the process while DuckDB
executes a query, which DuckDB turns into an error of its own; the unwritable directory needs a
user other than root (root writes anywhere), so as root the command runs as `nobody`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pytest

from tests.conftest import golden, request, write_jsonl

REPO = Path(__file__).resolve().parent.parent
_ENV = {name: value for name, value in os.environ.items()
        if not name.startswith(("RECALLWATCH_", "OPENAI_"))} | {"PYTHONPATH": str(REPO)}


def cli(*args) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", *map(str, args)]


def many_requests(path: Path, n: int) -> Path:
    """n requests of 20 chunks each over seven days, as one JSON Lines file written by DuckDB."""
    duckdb.sql(f"""
        COPY (SELECT 'r-' || i AS request_id,
                     strftime(TIMESTAMP '2026-11-01' + INTERVAL (i % 7) DAY,
                              '%Y-%m-%dT%H:%M:%SZ') AS timestamp,
                     'question ' || i % 500 AS query, 'idx-1' AS index_version,
                     [{{'chunk_id': 'c-' || i % 900 || '-' || j}} FOR j IN range(20)]
                         AS retrieved
              FROM range({n}) t(i)) TO '{path}' (FORMAT json)""")
    return path


def interrupted_at(args: list[str], seconds: float) -> subprocess.CompletedProcess:
    """Run args and press Ctrl-C `seconds` after the start (SIGINT as the terminal sends it;
    the test's own shell may have set it to be ignored)."""
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=_ENV, cwd=REPO,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(seconds)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    return subprocess.CompletedProcess(args, process.returncode, out, err)


@pytest.mark.slow
def test_ctrl_c_while_duckdb_runs_a_query_is_an_interrupt_not_a_bad_file(tmp_path):
    # DuckDB answers SIGINT in a query with "Query interrupted" (an internal error, exit 1) or
    # an aborted transaction, which ingest took for a file it cannot read ("Fix or move it")
    logs = many_requests(tmp_path / "logs.jsonl", 300_000)
    warehouse = tmp_path / "w.duckdb"
    started = time.monotonic()
    subprocess.run(cli("--warehouse", warehouse, "ingest", "logs", logs), env=_ENV, cwd=REPO,
                   check=True, capture_output=True)
    whole = time.monotonic() - started
    interrupts = 0
    for share in (0.3, 0.45, 0.6, 0.75, 0.9):
        for name in os.listdir(tmp_path):
            if name.startswith("w.duckdb"):
                os.remove(tmp_path / name)
        done = interrupted_at(cli("--warehouse", warehouse, "ingest", "logs", logs),
                              whole * share)
        assert "internal error" not in done.stderr and "cannot read" not in done.stderr, \
            (share, done.stderr)
        if done.returncode == 0:   # it ended before the interrupt came
            continue
        if done.returncode == -signal.SIGINT and not done.stderr:
            # it came as Python shut down, which gives SIGINT its default back first: the
            # process ends as a shell's Ctrl-C ends one, its work all committed
            with duckdb.connect(str(warehouse), read_only=True) as con:
                assert con.execute("SELECT count(*) FROM requests").fetchone() == (300_000,)
            continue
        assert (done.returncode, done.stderr.strip().splitlines()[-1:]) == (
            130, ["recallwatch: interrupted"]), (share, done.returncode, done.stderr)
        interrupts += 1
        # the interrupted file was kept whole or not at all (the interrupt may come after its
        # commit, as the command prints or closes): a second run loads all of it, or finds it
        # loaded
        again = subprocess.run(cli("--warehouse", warehouse, "ingest", "logs", logs), env=_ENV,
                               cwd=REPO, capture_output=True, text=True)
        assert again.returncode == 0, again.stderr
        assert "loaded 300000" in again.stdout or "1 unchanged" in again.stdout, again.stdout
        with duckdb.connect(str(warehouse), read_only=True) as con:
            assert con.execute("SELECT count(*) FROM requests").fetchone() == (300_000,)
    assert interrupts >= 3, "the interrupts came too late to test anything"


@pytest.mark.parametrize("after", [0.2, 0.4, 0.8, 1.2])
def test_ctrl_c_while_the_command_is_still_importing_is_one_line_and_130(tmp_path, after):
    # pipeline.cli's imports take a second or two (pyarrow, the routes): a Ctrl-C then was a
    # traceback of whatever module was importing. The child says when Python itself has
    # started (site imported, the interpreter's own startup is no part of the command) and
    # then runs `recallwatch run` as `python -m pipeline.cli` does
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    argv = ["recallwatch", "--warehouse", str(tmp_path / "w.duckdb"), "run", "--logs",
            str(tmp_path / "logs.jsonl"), "--gold", str(tmp_path / "gold.jsonl"),
            "--gold-version", "v1", "--out", str(tmp_path / "report")]
    started = ("import runpy, sys; print('started', file=sys.stderr, flush=True); "
               f"sys.argv = {argv!r}; runpy.run_module('pipeline.cli', run_name='__main__')")
    proc = subprocess.Popen([sys.executable, "-c", started], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_ENV)
    assert proc.stderr.readline() == "started\n"
    time.sleep(after)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (130, "recallwatch: interrupted\n")


def _as_another_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("run as root without setpriv (util-linux, to run the command as `nobody`): "
                    "root writes anywhere, so no directory it cannot write can be made")
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def test_a_warehouse_in_a_directory_that_cannot_be_written_is_one_sentence(tmp_path):
    # DuckDB writes its journal (w.duckdb.wal) beside the warehouse: with the file writable
    # and its directory not, the first commit ended in "internal error: TransactionException"
    as_user = _as_another_user()
    if as_user and any(not os.access(parent, os.X_OK, effective_ids=False)
                       for parent in (REPO, *REPO.parents)):
        pytest.skip(f"run as root, and the checkout {REPO} is in a directory other users cannot "
                    "enter: the command can only run as root, which writes anywhere, so no "
                    "directory it cannot write can be made")
    home = Path(tempfile.mkdtemp(prefix="recallwatch-"))
    try:
        home.chmod(0o755)
        directory = home / "warehouse"
        directory.mkdir()
        write_jsonl(home / "logs.jsonl", [request("r1", ["c1", "c2"])])
        write_jsonl(home / "gold.jsonl", [golden("g-1", ["c1"])])
        for name in ("logs.jsonl", "gold.jsonl"):
            (home / name).chmod(0o644)
        (home / "report").mkdir()
        warehouse = directory / "w.duckdb"
        if as_user:   # the file is the user's, the directory is not
            for owned in (directory, home / "report"):
                shutil.chown(owned, "nobody", "nogroup")
        created = subprocess.run(as_user + cli("--warehouse", warehouse, "run", "--logs",
                                               home / "logs.jsonl", "--gold",
                                               home / "gold.jsonl", "--gold-version", "v1",
                                               "--out", home / "report"),
                                 env=_ENV, cwd=home, capture_output=True, text=True)
        assert created.returncode == 0, created.stderr
        if as_user:
            shutil.chown(directory, "root", "root")
        directory.chmod(0o555)
        before = warehouse.read_bytes()
        for command in (["ingest", "logs", home / "logs.jsonl"], ["score"], ["aggregate"]):
            done = subprocess.run(as_user + cli("--warehouse", warehouse, *command),
                                  env=_ENV, cwd=home, capture_output=True, text=True)
            assert done.returncode == 2, (command, done.stderr)
            assert done.stderr.strip() == (
                f"recallwatch: error: cannot write in {directory}, the warehouse's directory "
                "(Permission denied): DuckDB keeps its journal (w.duckdb.wal) and spills "
                "there; make it writable, or move the warehouse to a directory that is."), \
                done.stderr
        assert warehouse.read_bytes() == before
        # reading needs no journal
        shown = subprocess.run(as_user + cli("--warehouse", warehouse, "metrics"),
                               env=_ENV, cwd=home, capture_output=True, text=True)
        assert shown.returncode == 0 and "recallwatch_" in shown.stdout, shown.stderr
    finally:
        (home / "warehouse").chmod(0o755)
        shutil.rmtree(home)
