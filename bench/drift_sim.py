"""Simulation: how often `pipeline.drift.judge` raises false alarms on a year of unchanged daily
recall, and how many days it takes to flag a real drop, in fixed-look and anytime-valid mode.

    .venv/bin/python bench/drift_sim.py [--worlds 200] [--quick]

A world is one series (slice 'all', route 'ids', k 10) of daily windows. Each day draws sessions
(sizes 1-6, mean 4; all 1 without sessions), a session recall level m ~ Beta(mu phi, (1 - mu)
phi) and per request X ~ Binomial(4, m) of 4 gold chunks found, recall = X / 4. The within-session
correlation of recall is then 4 / (4 + phi), 0.14 for phi = 4 * 0.86 / 0.14. Each day is reduced
with numpy to the sums of sql/drift_windows.sql. Many worlds are judged in one `judge` call,
each under its own gold version: false discoveries are controlled per window x route x k x
gold version x metric, so worlds in separate gold versions never share a BH/e-BH family and are
judged exactly as if alone (tests/test_drift_sim.py checks this)."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline import drift  # noqa: E402
from pipeline.config import DEFAULT_PASS_MARK, DRIFT_METRICS, Config  # noqa: E402

GOLD_CHUNKS = 4                 # recall takes the values 0, 1/4, ..., 1
ICC = 0.14                      # within-session correlation of recall
PHI = GOLD_CHUNKS * (1 - ICC) / ICC
START = datetime(2026, 1, 1)
PREFIXES = ("recall", "pass", "full")


def simulate_days(rng: np.random.Generator, means: np.ndarray, requests: int,
                  sessions: bool = True, pass_mark: float = DEFAULT_PASS_MARK,
                  chunks: int = GOLD_CHUNKS, session_sizes: list[int] | None = None) -> dict:
    """Per day (one entry of `means`, the day's mean recall) the window sums of
    sql/drift_windows.sql, as arrays of shape (days,), and the day's clusters by size
    (`size_hist`, a list per day, in an object array). About `requests` requests a day, each
    needing `chunks` gold chunks (1: every recall is 0 or 1). `session_sizes`: the same
    sessions every day, of these sizes (`requests` and `sessions` then unused)."""
    means = np.asarray(means, dtype=float)
    days = means.size
    if session_sizes is not None:
        per_day = len(session_sizes)
        sizes = np.tile(np.asarray(session_sizes, dtype=int), days)
        sessions = True
    else:
        per_day = max(round(requests / 4), 2) if sessions else requests
        sizes = (1 + rng.binomial(5, 0.6, per_day * days) if sessions
                 else np.ones(per_day * days, dtype=int))
    day = np.repeat(np.arange(days), per_day)
    mu = means[day]
    level = rng.beta(mu * PHI, (1 - mu) * PHI)
    session = np.repeat(np.arange(day.size), sizes)
    found = rng.binomial(chunks, level[session])
    recall = found / chunks
    metric = {"recall": recall, "pass": (recall >= pass_mark).astype(float),
              "full": (found == chunks).astype(float)}
    out = {"n": np.bincount(day, weights=sizes, minlength=days),
           "n_clusters": np.full(days, float(per_day)),
           "size_sq": np.bincount(day, weights=sizes * sizes, minlength=days),
           "max_size": np.maximum.reduceat(sizes, np.arange(0, day.size, per_day)),
           "any_session": np.full(days, sessions)}
    per_session = {}
    for prefix in PREFIXES:
        s = np.bincount(session, weights=metric[prefix], minlength=day.size)
        per_session[prefix] = s
        out[f"{prefix}_sum"] = np.bincount(day, weights=s, minlength=days)
        out[f"{prefix}_cluster_sq"] = np.bincount(day, weights=s * s, minlength=days)
        out[f"{prefix}_cluster_cross"] = np.bincount(day, weights=s * sizes, minlength=days)
    # window_sums.size_hist: per day and session size, the sessions and their S_g, S_g^2 sums
    out["size_hist"] = np.empty(days, dtype=object)   # an array, spliced as the others
    for d in range(days):
        rows = slice(d * per_day, (d + 1) * per_day)
        hist = []
        for size in np.unique(sizes[rows]):
            of = sizes[rows] == size
            entry = {"size": int(size), "clusters": int(of.sum())}
            for prefix in PREFIXES:
                s = per_session[prefix][rows][of]
                entry[f"{prefix}_s"], entry[f"{prefix}_sq"] = float(s.sum()), float(s @ s)
            hist.append(entry)
        out["size_hist"][d] = hist
    return out


HIST_TYPE = pa.list_(pa.struct(
    [("size", pa.int64()), ("clusters", pa.int64())]
    + [(f"{prefix}_{part}", pa.float64()) for prefix in PREFIXES for part in ("s", "sq")]))


def windows_table(series: list[tuple[str, str, dict]]) -> pa.Table:
    """The drift_windows rows of several series, each (slice, gold_version, day sums)."""
    columns: dict[str, list] = {name: [] for name in (
        "window_start", "window_end", "slice", "route", "k", "gold_version", "n",
        "index_versions", "n_clusters", "any_session", "size_sq", "max_size")}
    for prefix in PREFIXES:
        for part in ("sum", "cluster_sq", "cluster_cross"):
            columns[f"{prefix}_{part}"] = []
    hists: list = []
    for slice_, gold, sums in series:
        days = sums["n"].size
        starts = [START + timedelta(days=d) for d in range(days)]
        columns["window_start"] += starts
        columns["window_end"] += [s + timedelta(days=1) for s in starts]
        columns["slice"] += [slice_] * days
        columns["route"] += ["ids"] * days
        columns["k"] += [10] * days
        columns["gold_version"] += [gold] * days
        columns["index_versions"] += [["v1"]] * days
        for name, values in sums.items():
            if name != "size_hist":
                columns[name] += values.tolist()
        # a series without a histogram (sums made by hand) has none, as a row of an earlier
        # release
        hists += [h if isinstance(h, list) else None
                  for h in sums.get("size_hist", [None] * days)]
    columns["n"] = [int(v) for v in columns["n"]]
    # the requests each version served (one version here), as window_sums keeps them
    columns["version_counts"] = pa.array([[("v1", n)] for n in columns["n"]],
                                         pa.map_(pa.string(), pa.int64()))
    columns["n_clusters"] = [int(v) for v in columns["n_clusters"]]
    columns["max_size"] = [int(v) for v in columns["max_size"]]
    columns["any_session"] = [bool(v) for v in columns["any_session"]]
    columns["size_hist"] = pa.array(hists, HIST_TYPE)
    return pa.table(columns)


def judge_worlds(worlds: list[dict], config: Config, slices: list[str] | None = None,
                 metrics: tuple[str, ...] = DRIFT_METRICS) -> dict:
    """Judge many worlds in one call; each world's slices share gold version `w<i>`.
    `worlds[i]` is one day-sums dict, or a list of them (one per slice of `slices`).
    `metrics` narrows what judge computes: each metric is its own series and its own
    false-discovery family, so leaving some out changes nothing of the others' rows, and saves
    time. Returns {(world, slice, metric): drift_events rows as a dict of lists}."""
    series = []
    for i, world in enumerate(worlds):
        parts = world if isinstance(world, list) else [world]
        names = slices or ["all"]
        series += [(names[j], f"w{i}", sums) for j, sums in enumerate(parts)]
    events = drift.judge(windows_table(series), config, "day", {},
                         metrics=metrics).to_pydict()
    out: dict[tuple, dict] = {}
    for r in range(len(events["gold_version"])):
        key = (int(events["gold_version"][r][1:]), events["slice"][r], events["metric"][r])
        rows = out.setdefault(key, {name: [] for name in events})
        for name in events:
            rows[name].append(events[name][r])
    return out


def decisions(events: dict, metric: str = "mean_recall", slice_: str = "all") -> np.ndarray:
    """Decisions per world, shape (worlds, days)."""
    worlds = sorted({w for w, s, m in events if s == slice_ and m == metric})
    return np.array([events[(w, slice_, metric)]["decision"] for w in worlds])


def any_alarm(rng, worlds: int, days: int, requests: int, config: Config) -> np.ndarray:
    """Per null world (mean recall 0.80 throughout): any 'drop' or 'rise' on mean_recall."""
    sims = [simulate_days(rng, np.full(days, 0.8), requests) for _ in range(worlds)]
    d = decisions(judge_worlds(sims, config, metrics=("mean_recall",)))
    return np.any((d == "drop") | (d == "rise"), axis=1)


def detection_delays(rng, worlds: int, days: int, requests: int, drop: float, change: int,
                     config: Config) -> np.ndarray:
    """Per world: days from the change to the first 'drop' on or after it; inf where none."""
    means = np.where(np.arange(days) < change, 0.8, 0.8 - drop)
    sims = [simulate_days(rng, means, requests) for _ in range(worlds)]
    flagged = decisions(judge_worlds(sims, config, metrics=("mean_recall",)))[:, change:]
    flagged = flagged == "drop"
    return np.where(flagged.any(axis=1), flagged.argmax(axis=1), np.inf)


def _run(task: tuple) -> np.ndarray:
    kind, mode, margin, drop, seed, worlds, days, requests, change = task
    rng = np.random.default_rng(seed)
    config = Config(drift_mode=mode, drift_margin=margin, detectable_drop=0.10)
    if kind == "null":
        return any_alarm(rng, worlds, days, requests, config)
    return detection_delays(rng, worlds, days, requests, drop, change, config)


def _delay_text(delays: np.ndarray, horizon: int) -> str:
    def q(p):
        v = np.quantile(delays, p, method="higher")
        return f">{horizon}" if np.isinf(v) else f"{v:.0f}"
    missed = int(np.isinf(delays).sum())
    return f"median {q(0.5):>5}  p90 {q(0.9):>5}  not detected {missed}/{delays.size}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=200, help="worlds per setting")
    parser.add_argument("--quick", action="store_true", help="at most 20 worlds of 160 days")
    parser.add_argument("--requests", type=int, default=1000, help="requests a day")
    parser.add_argument("--seed", type=int, default=20261101)
    args = parser.parse_args(argv)
    worlds, days = (min(args.worlds, 20), 160) if args.quick else (args.worlds, 365)
    change, horizon = 100, days - 100
    began = time.perf_counter()
    cores = os.cpu_count() or 1
    print(f"cores: {cores}   worlds per setting: {worlds}   days: {days}   "
          f"requests/day: ~{args.requests} in sessions of 1-6 (mean 4), ICC {ICC}")
    null = [("null", mode, margin, None) for margin in (0.05, 0.0)
            for mode in ("fixed", "anytime")]
    shifted = [("shift", mode, margin, drop) for drop in (0.05, 0.10)
               for margin in (0.05, 0.02) for mode in ("fixed", "anytime")]
    tasks = [(*t, args.seed + i, worlds, days, args.requests, change)
             for i, t in enumerate(null + shifted)]
    with ProcessPoolExecutor(max_workers=cores) as pool:
        results = list(pool.map(_run, tasks))
    print(f"\nnull worlds (mean recall 0.80 throughout): share of worlds with any false drop or "
          f"rise on mean_recall in {days} days (detectable_drop 0.10)")
    for (_, mode, margin, _), alarms in zip(null, results, strict=False):
        share = float(alarms.mean())
        se = math.sqrt(max(share * (1 - share), 1e-12) / alarms.size)
        print(f"  margin {margin:.2f}  {mode:8s} {share:6.3f}  (+/- {se:.3f})")
    print(f"\nshifted worlds (mean recall 0.80, then 0.80 - drop from day {change}): days to the "
          f"first 'drop'; not detected counts as > {horizon} (the horizon)")
    for (_, mode, margin, drop), delays in zip(shifted, results[len(null):], strict=True):
        print(f"  drop {drop:.2f}  margin {margin:.2f}  {mode:8s} "
              f"{_delay_text(delays, horizon)}")
    print(f"\nrun time: {time.perf_counter() - began:.0f} s on {cores} cores")


if __name__ == "__main__":
    main()
