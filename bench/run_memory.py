"""Benchmark: the peak RSS of the whole job, `recallwatch run` (ingest, score, aggregate, drift,
report), on the requests of bench/ingest.py, at the default memory limit and at any other.

    .venv/bin/python bench/run_memory.py [--requests 10000000] [--days 7]
                                         [--out bench/out/ingest-10m] [--formats jsonl,parquet]
                                         [--limits default,500MB]

Each run is a process of its own on a fresh warehouse (under --out/run-<format>-<limit>/,
removed after), and its peak RSS is that process's own (the kernel's count of the child, from
wait4). The input is bench/ingest.py's, cached under the same --out, so `make bench` reads the
files its ingest step wrote. Goal: peak RSS <= 2.5 GiB at the default limit; under any other
limit the run completes (DuckDB spills to disk beside the warehouse)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ingest import generate  # noqa: E402
from pipeline.warehouse import DEFAULT_MEMORY_LIMIT  # noqa: E402

GOAL_GIB = 2.5
RECALLWATCH = Path(sys.executable).parent / "recallwatch"


def run(fmt: str, limit: str, files: dict[str, Path], out: Path) -> tuple[int, float, float]:
    """(exit status, wall seconds, peak RSS in GiB) of one whole run."""
    work = out / f"run-{fmt}-{limit}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "RECALLWATCH_MEMORY_LIMIT"}
    if limit != "default":
        env["RECALLWATCH_MEMORY_LIMIT"] = limit
    command = [str(RECALLWATCH), "--warehouse", str(work / "w.duckdb"), "run",
               "--logs", str(files[fmt]), "--gold", str(files["gold"]),
               "--gold-version", "bench", "--out", str(work / "report")]
    started = time.perf_counter()
    with open(work / "run.log", "wb") as log:
        child = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        print((work / "run.log").read_text(errors="replace")[-2000:], file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return code, seconds, usage.ru_maxrss / 1024 / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000_000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "out" / "ingest-10m")
    parser.add_argument("--formats", default="jsonl,parquet")
    parser.add_argument("--limits", default="default",
                        help="comma-separated: default, or a RECALLWATCH_MEMORY_LIMIT "
                             "such as 500MB")
    args = parser.parse_args()

    files = generate(args.out, args.requests, args.days)
    print(f"machine: {os.cpu_count()} cores; {args.requests:,} requests; "
          f"default limit {DEFAULT_MEMORY_LIMIT}; goal at the default: <= {GOAL_GIB} GiB")
    print(f"{'format':<9}{'limit':>9}{'completed':>11}{'wall s':>9}{'peak RSS GiB':>14}"
          f"{'/ goal':>8}")
    failed = False
    for fmt in args.formats.split(","):
        for limit in args.limits.split(","):
            code, seconds, rss = run(fmt, limit, files, args.out)
            failed |= code != 0
            # the goal bounds the default limit; under another the run need only complete
            over = limit == "default" and rss > GOAL_GIB
            verdict = "FAILED" if code != 0 else "OVER" if over else "ok"
            print(f"{fmt:<9}{limit:>9}{'yes' if code == 0 else f'no ({code})':>11}"
                  f"{seconds:>9.0f}{rss:>14.2f}{rss / GOAL_GIB:>8.2f}   {verdict}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
