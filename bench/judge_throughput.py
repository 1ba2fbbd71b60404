"""Benchmark: judge N distinct (claims, contexts) items against the loopback test server
(tests/judge_server.py, run in its own process so that it does not share this one's GIL)
answering every call after a fixed latency, with at most C calls in flight, and compare
calls/s with the bound C / latency (the most any client could do).

    .venv/bin/python bench/judge_throughput.py [--items 1000] [--concurrency 10] [--latency 0.05]
        [--warehouse :memory:|PATH]

A warm-up run over `concurrency` other items comes first and is not counted: it pays once for
importing the `openai` client (~0.5 s on 2 busy cores, a tenth of a 1,000-call run) and is
printed apart. Prints calls/s, the bound, their ratio, and that a second run over the same
items, answered from the warehouse cache, made 0 calls."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from pipeline.judge import JudgeConfig, judge_many  # noqa: E402
from pipeline.warehouse import connect  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--warehouse", default=":memory:",
                        help="where verdicts are written (a DuckDB file: new or existing)")
    args = parser.parse_args()
    work = [([f"Branch {i} opens at nine.", f"Branch {i} has a cash machine."],
             [f"Branch {i} opens at nine and closes at five."]) for i in range(args.items)]
    warm_up = [([f"Kiosk {i} opens at ten."], [f"Kiosk {i} opens at ten."])
               for i in range(args.concurrency)]
    con = connect(args.warehouse)
    now = datetime(2026, 11, 2)
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "judge_server.py"), "--latency", str(args.latency)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        config = JudgeConfig(model="bench-judge", base_url=url, api_key="sk-bench",
                             concurrency=args.concurrency, timeout=10.0)
        started = time.perf_counter()
        warm = judge_many(con, config, warm_up, now=now)
        warm_seconds = time.perf_counter() - started
        before = stats(url)
        started = time.perf_counter()
        first = judge_many(con, config, work, now=now)
        seconds = time.perf_counter() - started
        received = stats(url)
        rate, bound = first.calls / seconds, args.concurrency / args.latency
        print(f"items: {args.items:,} distinct, concurrency {args.concurrency}, "
              f"server latency {args.latency * 1000:g} ms, warehouse {args.warehouse}")
        print(f"warm-up (not counted): {warm.calls} calls in {warm_seconds:.2f} s")
        print(f"first run: {first.calls:,} calls "
              f"({received['calls'] - before['calls']:,} received by the server) "
              f"in {seconds:.2f} s, {first.failed} failed, {first.tokens:,} tokens; "
              f"max in flight {received['max_in_flight']}")
        print(f"calls/s: {rate:.1f}; bound {bound:.1f} ({args.concurrency} / "
              f"{args.latency:g} s); ratio {rate / bound:.2f}")
        started = time.perf_counter()
        second = judge_many(con, config, work, now=now)
        print(f"second run: {second.calls} calls ({stats(url)['calls'] - received['calls']} "
              f"received by the server), {second.cached:,} cached, in "
              f"{time.perf_counter() - started:.2f} s")
    finally:
        server.stdin.close()
        server.wait(timeout=10)
        con.close()


def stats(url: str) -> dict:
    """The server's own counts: calls received and the most in flight at once."""
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=5) as response:
        return json.loads(response.read())


if __name__ == "__main__":
    main()
