"""A small memory limit slows a run down but never changes it: ingest, score, aggregate, drift
and the report of 300k requests under RECALLWATCH_MEMORY_LIMIT=300MB complete (DuckDB spills
what does not fit to the warehouse's temp directory, and aggregate gathers fewer days at a time)
and leave exactly the rows of a run under the default limit, which holds everything in memory.
Each run is a subprocess, so the variable is read by a fresh DuckDB."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from pipeline.warehouse import quote_identifier

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
N_REQUESTS = 300_000
LIMIT = "300MB"

# one `recallwatch run` (pipeline.api.run) in a fresh process; prints the limit in force
RUN = """
import sys
from pipeline.api import run
from pipeline.warehouse import connect

warehouse, logs, gold, report = sys.argv[1:]
run(warehouse, logs=[logs], gold=gold, gold_version="bench", report_dir=report)
with connect(warehouse, read_only=True) as con:
    print(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
"""

# the public results, and the per-request counts behind recall_at_k
COMPARED = ("request_scores", "request_cutoffs", "recall_at_k", "miss_causes", "window_metrics",
            "drift_events")


def _generate(out: Path) -> tuple[Path, Path]:
    """The benchmark's synthetic world (bench/score_ids.py), written by DuckDB in seconds."""
    spec = importlib.util.spec_from_file_location("score_ids", ROOT / "bench" / "score_ids.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate(out, N_REQUESTS, 7)


def _run(warehouse: Path, logs: Path, gold: Path, memory_limit: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "RECALLWATCH_MEMORY_LIMIT"}
    if memory_limit:
        env["RECALLWATCH_MEMORY_LIMIT"] = memory_limit
    report = warehouse.with_suffix(".report")
    result = subprocess.run([sys.executable, "-c", RUN, str(warehouse), str(logs), str(gold),
                             str(report)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]   # after DuckDB's progress bars


@pytest.fixture(scope="module")
def warehouses(tmp_path_factory):
    out = tmp_path_factory.mktemp("memory_limit")
    logs, gold = _generate(out / "world")
    limited, free = out / "limited.duckdb", out / "free.duckdb"
    in_force = _run(limited, logs, gold, LIMIT)
    _run(free, logs, gold, None)
    return limited, free, in_force


def test_the_limit_is_in_force(warehouses):
    _, _, in_force = warehouses
    assert in_force == "286.1 MiB"   # 300MB as DuckDB states it


@pytest.mark.parametrize("table", COMPARED)
def test_a_run_under_300mb_equals_one_under_the_default_limit(warehouses, table):
    limited, free, _ = warehouses
    name = quote_identifier(table)
    con = duckdb.connect()
    con.execute("ATTACH $p AS limited (READ_ONLY)", {"p": str(limited)})
    con.execute("ATTACH $p AS free (READ_ONLY)", {"p": str(free)})
    rows = con.execute(f"SELECT count(*) FROM free.{name}").fetchall()[0][0]
    assert rows == N_REQUESTS if table == "request_scores" else rows > 0
    # EXCEPT ALL both ways: the same rows, each as often, every value bit for bit
    differing = [con.execute(f"SELECT count(*) FROM (SELECT * FROM {a}.{name} EXCEPT ALL "
                             f"SELECT * FROM {b}.{name})").fetchall()[0][0]
                 for a, b in (("limited", "free"), ("free", "limited"))]
    assert differing == [0, 0]


def test_the_report_under_300mb_is_the_report_under_the_default_limit(warehouses):
    limited, free, _ = warehouses
    pages = [(w.with_suffix(".report") / "report.html").read_bytes() for w in (limited, free)]
    assert pages[0] == pages[1] and b"churn" in pages[0].lower()
