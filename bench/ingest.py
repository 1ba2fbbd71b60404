"""Benchmark: ingest of request logs (JSON Lines and Parquet) and scoring, each against the bare
DuckDB operation on the same file, measured in the same run.

    .venv/bin/python bench/ingest.py [--requests 1000000] [--days 7] [--out bench/out/ingest]
                                     [--steps jsonl,parquet,score] [--repeat 3]

The input (cached under --out, rebuilt when --requests or --days change) is one file of
requests in each format, the same records: 20 ranked chunks per request, a session on a third
of them, a response, two tags, IDs that join the gold set of bench/score_ids.py. Every step runs
in its own process, on a fresh warehouse, so its peak RSS is its own:

    jsonl ingest    recallwatch ingest of the .jsonl vs CREATE TABLE AS SELECT * FROM read_json
    parquet ingest  the same of the .parquet vs CREATE TABLE AS SELECT * FROM read_parquet
    score           score (ids route) of the loaded requests vs the bare scan of
                    bench/score_ids.py (unnest every chunk ID, count(distinct chunk_id))

Each step and its bare operation run --repeat times, alternately, and the fastest run of each
is the figure (times on a shared machine vary from run to run; the ratio of the fastest runs
compares the two at their best). Peak RSS is the largest of the runs.

Goals: each ingest <= 2x its bare load; score <= 1.5x the bare scan."""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.score_ids import N_CHUNKS, N_GOLDENS  # noqa: E402

GOALS = {"jsonl ingest": 2.0, "parquet ingest": 2.0, "score": 1.5}
GENERATOR = 1   # bump when the generated records change, so cached files are rebuilt


def generate(out: Path, n_requests: int, days: int) -> dict[str, Path]:
    """The same synthetic requests as JSON Lines and as Parquet, and the gold set they join;
    written by DuckDB (no Python loops), kept while --requests and --days stay the same."""
    out.mkdir(parents=True, exist_ok=True)
    files = {"jsonl": out / "requests.jsonl", "parquet": out / "requests.parquet",
             "gold": out / "gold.jsonl"}
    meta = {"requests": n_requests, "days": days, "generator": GENERATOR}
    meta_file = out / "meta.json"
    if (all(f.exists() for f in files.values()) and meta_file.exists()
            and json.loads(meta_file.read_text()) == meta):
        return files
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("""
        COPY (
            SELECT 'g-' || g AS gold_id, 'question ' || g AS question,
                   [ 'c-' || g || '-' || j FOR j IN range(2 + g % 3) ] AS gold_chunk_ids
            FROM range($n_goldens) t(g)
        ) TO $p (FORMAT json)""", {"p": str(files["gold"]), "n_goldens": N_GOLDENS})
    # as in bench/score_ids.py: each gold chunk of a request's golden lands at a hashed rank
    # 1..30 (beyond 20 it is not logged), the other places are distractors from a 500k index
    con.execute("""
        CREATE TABLE logs AS
        SELECT
            'r-' || i AS request_id,
            strftime(TIMESTAMP '2026-11-01' + INTERVAL (i * $days * 86400 // $n_requests)
                     SECOND, '%Y-%m-%dT%H:%M:%SZ') AS timestamp,
            'question ' || (i % $n_goldens) AS query,
            'g-' || (i % $n_goldens) AS gold_id,
            'idx-1' AS index_version,
            $n_chunks AS index_size,
            10 AS k,
            [ {'chunk_id': CASE
                    WHEN pos = 1 + hash(i, 0) % 30 THEN 'c-' || (i % $n_goldens) || '-0'
                    WHEN pos = 1 + hash(i, 1) % 30 THEN 'c-' || (i % $n_goldens) || '-1'
                    WHEN pos = 1 + hash(i, 2) % 30 AND i % $n_goldens % 3 >= 1
                        THEN 'c-' || (i % $n_goldens) || '-2'
                    WHEN pos = 1 + hash(i, 3) % 30 AND i % $n_goldens % 3 = 2
                        THEN 'c-' || (i % $n_goldens) || '-3'
                    ELSE 'c-x' || hash(i, pos) % $n_chunks END,
                'rank': pos::INTEGER, 'score': 1.0 / pos}
              FOR pos IN range(1, 21) ] AS retrieved,
            CASE WHEN i % 3 = 0 THEN 's-' || (i // 3) END AS session_id,
            (1 + i % 3)::INTEGER AS turn,
            'The answer to question ' || (i % $n_goldens) || ' is in the retrieved passages.'
                AS response,
            {'tenant': CASE WHEN i % 2 = 0 THEN 'acme' ELSE 'globex' END,
             'retriever': 'hybrid-v2'} AS tags
        FROM range($n_requests) t(i)""",
                {"n_goldens": N_GOLDENS, "n_chunks": N_CHUNKS, "days": days,
                 "n_requests": n_requests})
    con.execute("COPY logs TO $p (FORMAT json)", {"p": str(files["jsonl"])})
    con.execute("COPY logs TO $p (FORMAT parquet)", {"p": str(files["parquet"])})
    meta_file.write_text(json.dumps(meta))
    return files


def peak_rss_kib() -> int:
    """This process's peak resident set: VmHWM belongs to the process image, so unlike
    ru_maxrss it does not start from the parent's peak at fork."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def fresh(path: Path) -> Path:
    for stale in (path, Path(f"{path}.wal")):
        stale.unlink(missing_ok=True)
    return path


def run_step(step: str, files: dict[str, Path], out: Path) -> float:
    """One step, timed, in this process (called in a child by `measure`)."""
    from pipeline.ingest import ingest_gold, ingest_logs
    from pipeline.score import score
    from pipeline.warehouse import connect

    if step == "bare scan":
        # as bench/score_ids.py: hash every retrieved chunk ID once
        con = duckdb.connect()
        started = time.perf_counter()
        con.execute("SELECT count(DISTINCT chunk_id) FROM (SELECT unnest(retrieved).chunk_id "
                    "AS chunk_id FROM read_parquet($p))", {"p": str(files["parquet"])}).fetchall()
        return time.perf_counter() - started
    if step.startswith("bare "):
        fmt = step.split()[1]
        reader = "read_json" if fmt == "jsonl" else "read_parquet"
        con = duckdb.connect(fresh(out / f"bare-{fmt}.duckdb"))
        started = time.perf_counter()
        con.execute(f"CREATE TABLE t AS SELECT * FROM {reader}($p)", {"p": str(files[fmt])})
        seconds = time.perf_counter() - started
        con.close()
        return seconds
    if step.endswith(" ingest"):
        fmt = step.split()[0]
        con = connect(fresh(out / f"ingest-{fmt}.duckdb"))
        started = time.perf_counter()
        summary = ingest_logs(con, [str(files[fmt])])
        seconds = time.perf_counter() - started
        con.close()
        if summary.loaded != summary.read:
            raise SystemExit(f"{step}: {summary.read} read, only {summary.loaded} loaded")
        return seconds
    if step == "score":
        # scores a copy of what the Parquet ingest step loaded: a scored warehouse has nothing
        # left to score
        scored = fresh(out / "score.duckdb")
        shutil.copyfile(out / "ingest-parquet.duckdb", scored)
        con = connect(scored)
        ingest_gold(con, str(files["gold"]), "bench")
        started = time.perf_counter()
        score(con)
        seconds = time.perf_counter() - started
        con.close()
        return seconds
    raise SystemExit(f"unknown step {step!r}")


def measure(step: str, args: argparse.Namespace) -> tuple[float, float]:
    """(seconds, peak RSS in GiB) of one step, run in a child process of its own."""
    result = subprocess.run(
        [sys.executable, __file__, "--requests", str(args.requests), "--days", str(args.days),
         "--out", str(args.out), "--child", step],
        capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"step {step!r} failed:\n{result.stderr}")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    return figures["seconds"], figures["rss_gib"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "ingest")
    parser.add_argument("--steps", default="jsonl,parquet,score",
                        help="comma-separated: jsonl, parquet, score (score needs parquet)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each step and of its bare operation (fastest counts)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()

    files = generate(args.out, args.requests, args.days)
    if args.child:
        seconds = run_step(args.child, files, args.out)
        rss = peak_rss_kib() / 1024 / 1024
        print(json.dumps({"seconds": seconds, "rss_gib": rss}))
        return 0

    steps = args.steps.split(",")
    pairs = [(f"{s} ingest", f"bare {s}") for s in ("jsonl", "parquet") if s in steps]
    if "score" in steps:
        if "parquet" not in steps:
            raise SystemExit("--steps score needs parquet (it scores what that step loaded)")
        pairs.append(("score", "bare scan"))
    size = {fmt: files[fmt].stat().st_size / 1e9 for fmt in ("jsonl", "parquet")}
    print(f"machine: {os.cpu_count()} cores, duckdb {duckdb.__version__}; "
          f"{args.requests:,} requests: jsonl {size['jsonl']:.2f} GB, "
          f"parquet {size['parquet']:.2f} GB")
    print(f"{'step':<16}{'recallwatch s':>14}{'bare s':>9}{'ratio':>8}{'goal':>7}"
          f"{'peak RSS GiB':>14}{'bare RSS':>10}")
    for step, bare in pairs:
        bare_runs, ours_runs = [], []
        for _ in range(max(args.repeat, 1)):
            bare_runs.append(measure(bare, args))
            ours_runs.append(measure(step, args))
        bare_s, bare_rss = min(s for s, _ in bare_runs), max(r for _, r in bare_runs)
        ours_s, ours_rss = min(s for s, _ in ours_runs), max(r for _, r in ours_runs)
        ratio = ours_s / bare_s
        goal = GOALS[step]
        print(f"{step:<16}{ours_s:>14.2f}{bare_s:>9.2f}{ratio:>7.2f}x{goal:>6.1f}x"
              f"{ours_rss:>14.2f}{bare_rss:>10.2f}   {'ok' if ratio <= goal else 'OVER'}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
