"""The benchmark script keeps working (a small run; its figures are not asserted — speed is
measured by running bench/score_ids.py, never by timing tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb

BENCH = Path(__file__).resolve().parent.parent / "bench" / "score_ids.py"


def test_bench_script_prints_every_figure_and_ratio(tmp_path):
    result = subprocess.run(
        [sys.executable, str(BENCH), "--requests", "3000", "--days", "2", "--out", str(tmp_path)],
        capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "requests: 3,000 read, 3,000 loaded, 3,000 scored over 2 day windows" in out
    for figure in ("bare scan", "ingest:", "score:", "ingest + score:", "peak RSS:",
                   "score / bare scan:"):
        assert figure in out


def test_drift_simulation_prints_its_table(tmp_path):
    script = BENCH.parent / "drift_sim.py"
    result = subprocess.run([sys.executable, str(script), "--quick", "--worlds", "4"],
                            capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for line in ("null worlds", "shifted worlds", "margin 0.05  fixed", "margin 0.05  anytime",
                 "drop 0.10  margin 0.05  anytime  median"):
        assert line in out, out


def test_drift_over_many_slices_prints_both_steps_and_their_ratio(tmp_path):
    script = BENCH.parent / "drift_slices.py"
    result = subprocess.run([sys.executable, str(script), "--tags", "20", "--days", "9",
                             "--per-day", "2", "--out", str(tmp_path)],
                            capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "20 tag values x 9 days x 2 requests = 360 requests" in out, out
    # one row per window of each series: each day's window of a slice x route x k, per metric
    con = duckdb.connect(str(tmp_path / "drift.duckdb"), read_only=True)
    windows, slices = con.execute("SELECT count(*), count(DISTINCT slice) FROM window_metrics "
                                  "WHERE grain = 'day'").fetchall()[0]
    assert slices == 22   # all, idx-1 and the 20 tenants
    assert f"drift_events {3 * windows:,} rows" in out, out
    for line in ("aggregate", "drift", "drift / aggregate:"):
        assert line in out, out
