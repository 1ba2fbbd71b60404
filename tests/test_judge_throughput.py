"""bench/judge_throughput.py keeps working (a small run against the loopback judge server; its
figures are not asserted, only printed: speed is measured by running the benchmark)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "judge_throughput.py"


def test_judge_bench_prints_the_rate_its_bound_and_a_second_run_without_calls():
    result = subprocess.run(
        [sys.executable, str(BENCH), "--items", "40", "--concurrency", "4", "--latency", "0.01"],
        capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "first run: 40 calls (40 received by the server)" in out, out
    assert re.search(r"calls/s: [\d.]+; bound 400\.0 \(4 / 0\.01 s\); ratio \d\.\d\d", out), out
    assert "second run: 0 calls (0 received by the server), 40 cached" in out, out
