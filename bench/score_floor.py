"""Benchmark: the floor under score's time, what it writes, against the bare scan of
bench/ingest.py measured in the same run.

    .venv/bin/python bench/score_floor.py [--requests 1000000] [--days 7] [--repeat 3]
                                          [--out bench/out/ingest]

Scores a copy of the warehouse bench/ingest.py's Parquet step loaded (run that first with the
same --requests, --days and --out), then, --repeat times: the bare scan (unnest every chunk ID
of the Parquet file, count the distinct ones) and a copy of the rows score wrote
(request_scores, request_cutoffs, miss_causes) from the scored warehouse into a fresh file in
one transaction, as score writes them. Prints both and their ratio: score can be no faster
than the copy, which reads no request and computes nothing."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.ingest import ingest_gold  # noqa: E402
from pipeline.score import score  # noqa: E402
from pipeline.warehouse import connect  # noqa: E402

TABLES = ("request_scores", "request_cutoffs", "miss_causes")


def fresh(path: Path) -> Path:
    for stale in (path, Path(f"{path}.wal")):
        stale.unlink(missing_ok=True)
    return path


def bare_scan(parquet: Path) -> float:
    con = duckdb.connect()
    started = time.perf_counter()
    con.execute("SELECT count(DISTINCT chunk_id) FROM (SELECT unnest(retrieved).chunk_id "
                "AS chunk_id FROM read_parquet($p))", {"p": str(parquet)}).fetchall()
    return time.perf_counter() - started


def copy_writes(scored: Path, out: Path) -> dict[str, float]:
    con = duckdb.connect(fresh(out / "floor.duckdb"))
    con.execute("ATTACH $p AS scored (READ_ONLY)", {"p": str(scored)})
    con.execute("SET preserve_insertion_order = false")   # as score writes (unordered)
    seconds = {}
    started = time.perf_counter()
    con.execute("BEGIN TRANSACTION")
    for table in TABLES:
        began = time.perf_counter()
        con.execute(f"CREATE TABLE {table} AS SELECT * FROM scored.{table}")
        seconds[table] = time.perf_counter() - began
    con.execute("COMMIT")
    seconds["all"] = time.perf_counter() - started
    con.close()
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "ingest")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    loaded, parquet = args.out / "ingest-parquet.duckdb", args.out / "requests.parquet"
    if not loaded.exists():
        raise SystemExit(f"no {loaded}: run bench/ingest.py --requests {args.requests} "
                         f"--days {args.days} --steps parquet first")
    scored = fresh(args.out / "floor-scored.duckdb")
    shutil.copyfile(loaded, scored)
    con = connect(scored)
    ingest_gold(con, str(args.out / "gold.jsonl"), "bench")
    started = time.perf_counter()
    score(con)
    score_s = time.perf_counter() - started
    rows = {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in TABLES}
    con.close()

    print(f"machine: {os.cpu_count()} cores, duckdb {duckdb.__version__}; score {score_s:.2f} s "
          f"wrote " + ", ".join(f"{t} {n:,}" for t, n in rows.items()))
    print("run   bare scan s   writes alone s   ratio   " + "   ".join(TABLES))
    for run in range(1, args.repeat + 1):
        bare = bare_scan(parquet)
        writes = copy_writes(scored, args.out)
        print(f"{run:>3}   {bare:11.2f}   {writes['all']:14.2f}   {writes['all'] / bare:5.2f}x   "
              + "   ".join(f"{writes[t]:.2f}" for t in TABLES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
