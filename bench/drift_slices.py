"""Benchmark: drift over many slices (a tag with thousands of values), against aggregate of the
same warehouse measured in the same run.

    .venv/bin/python bench/drift_slices.py [--tags 3000] [--days 30] [--per-day 3]
                                           [--out bench/out/drift-slices]

Every tag value is a slice, and drift judges every slice x route x cutoff x metric as a
series of its own: 3,000 tenants over 30 days are 63,000 series and 1.8M drift_events rows
from 270,000 requests. The world (requests of 10 ranked chunks, each tagged with one of
--tags tenants, --per-day requests per tenant a day on average) is written and scored once;
then `aggregate` runs on a copy of the scored warehouse and `drift` on a copy of the aggregated
one, each in a process of its own, so its peak RSS is its own. Prints both, their ratio, and the
rows drift wrote."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.ingest import fresh, peak_rss_kib  # noqa: E402

GOLDENS = 200


def build(out: Path, tags: int, days: int, per_day: int) -> Path:
    """The scored warehouse of the world (kept while the arguments stay the same)."""
    from pipeline.ingest import ingest_gold, ingest_logs
    from pipeline.score import score
    from pipeline.warehouse import connect

    out.mkdir(parents=True, exist_ok=True)
    scored, meta_file = out / "scored.duckdb", out / "meta.json"
    meta = {"tags": tags, "days": days, "per_day": per_day}
    if scored.exists() and meta_file.exists() and json.loads(meta_file.read_text()) == meta:
        return scored
    n = tags * days * per_day
    con = duckdb.connect()
    con.execute(f"""COPY (SELECT 'g-' || g AS gold_id, 'question ' || g AS question,
                          [ 'c-' || g || '-' || j FOR j IN range(3) ] AS gold_chunk_ids
                   FROM range({GOLDENS}) t(g)) TO '{out / "gold.jsonl"}' (FORMAT json)""")
    # two of a golden's three chunks land at hashed ranks 1..12 (beyond 10 not logged)
    con.execute(f"""COPY (
        SELECT 'r-' || i AS request_id,
               strftime(TIMESTAMP '2026-11-01' + INTERVAL (i * {days} * 86400 // {n}) SECOND,
                        '%Y-%m-%dT%H:%M:%SZ') AS timestamp,
               'question ' || (i % {GOLDENS}) AS query, 'g-' || (i % {GOLDENS}) AS gold_id,
               'idx-1' AS index_version, 10 AS k,
               [ {{'chunk_id': CASE
                       WHEN pos = 1 + hash(i, 0) % 12 THEN 'c-' || (i % {GOLDENS}) || '-0'
                       WHEN pos = 1 + hash(i, 1) % 12 THEN 'c-' || (i % {GOLDENS}) || '-1'
                       ELSE 'x' || hash(i, pos) % 5000 END,
                   'rank': pos::INTEGER}} FOR pos IN range(1, 11) ] AS retrieved,
               {{'tenant': 't' || (hash(i, 7) % {tags})}} AS tags
        FROM range({n}) t(i)) TO '{out / "logs.jsonl"}' (FORMAT json)""")
    store = connect(fresh(scored))
    ingest_gold(store, str(out / "gold.jsonl"), "bench")
    ingest_logs(store, [str(out / "logs.jsonl")])
    score(store)
    store.close()
    meta_file.write_text(json.dumps(meta))
    return scored


def run_step(step: str, out: Path) -> dict:
    """One step, timed, in this process (called in a child by `measure`)."""
    from pipeline.aggregate import aggregate
    from pipeline.drift import drift
    from pipeline.warehouse import connect

    source = out / ("scored.duckdb" if step == "aggregate" else "aggregated.duckdb")
    work = fresh(out / f"{step}.duckdb")
    shutil.copyfile(source, work)
    con = connect(work)
    started = time.perf_counter()
    if step == "aggregate":
        aggregate(con)
    else:
        summary = drift(con)
    seconds = time.perf_counter() - started
    rows = con.execute("SELECT count(*) FROM drift_events").fetchall()[0][0]
    con.close()
    if step == "aggregate":
        shutil.move(work, out / "aggregated.duckdb")
    elif summary.rows != rows:
        raise SystemExit(f"drift wrote {summary.rows} rows, the table holds {rows}")
    return {"seconds": seconds, "rss_gib": peak_rss_kib() / 1024 / 1024, "rows": rows}


def measure(step: str, args: argparse.Namespace) -> dict:
    result = subprocess.run(
        [sys.executable, __file__, "--tags", str(args.tags), "--days", str(args.days),
         "--per-day", str(args.per_day), "--out", str(args.out), "--child", step],
        capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"step {step!r} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tags", type=int, default=3000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--per-day", type=int, default=3)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "out" / "drift-slices")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_step(args.child, args.out)))
        return 0
    build(args.out, args.tags, args.days, args.per_day)
    figures = {step: measure(step, args) for step in ("aggregate", "drift")}
    agg, dr = figures["aggregate"], figures["drift"]
    print(f"machine: {os.cpu_count()} cores, duckdb {duckdb.__version__}; {args.tags:,} tag "
          f"values x {args.days} days x {args.per_day} requests = "
          f"{args.tags * args.days * args.per_day:,} requests; drift_events {dr['rows']:,} rows")
    print(f"{'step':<11}{'seconds':>9}{'peak RSS GiB':>14}")
    for step, f in figures.items():
        print(f"{step:<11}{f['seconds']:>9.1f}{f['rss_gib']:>14.2f}")
    print(f"drift / aggregate: {dr['seconds'] / agg['seconds']:.2f}x time, "
          f"{dr['rss_gib'] / agg['rss_gib']:.2f}x peak RSS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
