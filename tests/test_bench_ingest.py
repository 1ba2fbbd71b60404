"""bench/ingest.py keeps working (a small run; its figures are not asserted: speed is measured
by running the script, never by timing tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "ingest.py"


def test_ingest_bench_prints_each_step_against_its_bare_duckdb_baseline(tmp_path):
    result = subprocess.run(
        [sys.executable, str(BENCH), "--requests", "2000", "--days", "2", "--repeat", "1",
         "--out", str(tmp_path)],
        capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "2,000 requests" in out
    for step in ("jsonl ingest", "parquet ingest", "score"):
        line = next(ln for ln in out.splitlines() if ln.startswith(step))
        assert line.rstrip().endswith(("ok", "OVER")), line
