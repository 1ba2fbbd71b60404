"""Drift: compare every window of every slice with its baseline and write `drift_events`.

A series is one grain x slice x route x cutoff k x gold version x metric (mean recall, pass
rate, full-coverage rate). Its windows are judged in time order, because a window's baseline and
the sequential test depend on the windows before it, and all series of a window are judged
together, because false discoveries are controlled across the slices of a window.

- Baselines (`pipeline.config.Baseline`, per slice): by default the first 7 windows of each
  index version, frozen. While a new version's baseline forms, its windows are compared with
  the previous version's, so a rebuild that hurts recall is caught at once and an episode can
  end because the rebuild fixed it. A window in an open episode never joins a baseline, so a
  lasting drop stays flagged until recall recovers or a person re-baselines (`first:N@DAY`:
  the baseline restarts on that day, and open episodes end there).
- Fixed-look mode (`drift_mode = fixed`): the interval of (window - baseline) at level 1 -
  alpha: cluster-robust Welch for mean recall, Newcombe's hybrid of (cluster-)Wilson intervals
  for the rates. A drop needs the whole interval below -margin, after Benjamini-Hochberg
  across the slices of the window.
- Anytime-valid mode (the default): per series, an empirical-Bernstein e-value per window on
  the session means, mixed over every possible change start (`stats.mixture_update`), against
  the boundary baseline-lower-bound - margin (drops) and baseline-upper-bound + margin (rises).
  Alpha is split: alpha/2 for the baseline's interval, alpha/4 per direction for the detector,
  with e-BH across the slices of the window. Under independent sessions and a fixed baseline
  the chance of ever raising a false drop or rise, over unlimited re-checks, is at most alpha.
  The row's interval is the set of differences the detector has not ruled out.
- An episode opens at a drop (or rise) and ends at the first window with enough data whose
  difference is back within half the margin (hysteresis); the detector then restarts.
- Power: every row carries the smallest drop its data would detect with 80 % power; a window
  that could not detect `detectable_drop` is `insufficient`, never `stable`, with the requests
  it would need."""

from __future__ import annotations

import hashlib
import math
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import pyarrow as pa
from scipy import stats as sp

from pipeline import state
from pipeline.config import DEFAULT_ALPHA, DRIFT_METRICS, Baseline, Config, given_or_resolved
from pipeline.progress import Progress
from pipeline.stats import (
    Interval,
    benjamini_hochberg,
    bernstein_bet,
    bernstein_log_evalue,
    bernstein_shift_needed,
    cluster_difference_interval,
    cluster_t_interval,
    cluster_wilson_interval,
    e_benjamini_hochberg,
    hybrid_difference_interval,
    mixture_update,
    wilson_interval,
)
from pipeline.warehouse import run_script, transaction

POWER = 0.8
Z_POWER = float(sp.norm.ppf(POWER))
GRID = np.round(np.linspace(-1.0, 1.0, 401), 6)   # differences the anytime interval resolves
# the column prefix of window_sums for each metric
SUMS_OF = {"mean_recall": "recall", "pass_rate": "pass", "full_coverage_rate": "full"}
# order of the pooled sums: n, G, total, sum S_g^2, sum S_g n_g, sum n_g^2, sum of session
# means, sum of their squares
N, G, TOTAL, CSQ, CROSS, SIZE_SQ, MSUM, MSQ = range(8)


@dataclass(frozen=True)
class DriftSummary:
    rows: int
    opened: int
    resolved: int
    changed: bool


@dataclass
class _Pool:
    """The pooled sums of a baseline's windows."""

    key: tuple
    sums: np.ndarray = field(default_factory=lambda: np.zeros(8))
    windows: list[datetime] = field(default_factory=list)
    ends: list[datetime] = field(default_factory=list)
    any_session: bool = False

    def add(self, sums: np.ndarray, start: datetime, end: datetime, any_session: bool) -> None:
        self.sums = self.sums + sums
        self.windows.append(start)
        self.ends.append(end)
        self.any_session = self.any_session or any_session


@dataclass
class _Series:
    """What one series carries from window to window."""

    key: tuple            # (slice, route, k, gold_version, metric)
    baseline: Baseline
    pools: dict = field(default_factory=dict)      # first: (epoch, version) -> _Pool
    complete: _Pool | None = None                  # the last complete baseline (carry-over)
    trailing: deque = field(default_factory=deque)
    pinned: _Pool | None = None
    detector_key: tuple | None = None
    detector_t: int = 0
    log_s: dict = field(default_factory=dict)      # side -> log S (scalar) ; grid side -> array
    sessions: float = 0.0                          # sessions judged since the detector started
    episode: str | None = None                     # 'drop' | 'rise' while one is open
    episode_id: str | None = None
    last_version: str | None = None


def drift(con, config: Config | None = None, *, start: datetime | None = None,
          end: datetime | None = None, progress: Progress | None = None,
          **settings) -> DriftSummary:
    """Judge every window of every grain kept against its baseline and write `drift_events`
    for the windows in [start, end) (all windows when not given), in one transaction. The
    history before `start` is read, since baselines and the sequential test depend on it.
    Idempotent: re-running over the same window metrics changes no row."""
    config = given_or_resolved(con, config, settings)
    state.check_window(start, end)
    tables = []
    for grain in config.grains:
        windows = run_script(con, "drift_windows", {"grain": grain}, as_arrow=True)
        first_seen = dict(con.execute(
            "SELECT index_version, min(timestamp) FROM requests GROUP BY ALL").fetchall())
        tables.append(judge(windows, config, grain, first_seen, progress=progress))
    table = pa.concat_tables(tables) if tables else None
    if start is not None or end is not None:
        starts = table.column("window_start").to_pylist()
        keep = [(start is None or s >= start) and (end is None or s < end) for s in starts]
        table = table.filter(pa.array(keep))
    with transaction(con):
        con.register("drift_batch", table)
        bounds = {"start": start, "end": end}
        where = ("($start IS NULL OR window_start >= $start) "
                 "AND ($end IS NULL OR window_start < $end)")
        differs = con.execute(
            f"SELECT count(*) FROM ((SELECT * FROM drift_events WHERE {where}) "
            "EXCEPT ALL (SELECT * FROM drift_batch)) UNION ALL SELECT count(*) FROM "
            f"((SELECT * FROM drift_batch) EXCEPT ALL (SELECT * FROM drift_events WHERE {where}))",
            bounds).fetchall()
        changed = any(row[0] for row in differs)
        if changed:
            con.execute(f"DELETE FROM drift_events WHERE {where}", bounds)
            con.execute("INSERT INTO drift_events BY NAME SELECT * FROM drift_batch")
        con.unregister("drift_batch")
    column = table.column("state").to_pylist()
    return DriftSummary(table.num_rows, column.count("opened"), column.count("resolved"),
                        changed)


def built_with(config: Config, baseline: Baseline) -> str:
    return (f"mode={config.drift_mode};margin={config.drift_margin};"
            f"detectable={config.detectable_drop};baseline={baseline.text};"
            f"alpha={DEFAULT_ALPHA};pass_mark={config.pass_mark}")


# ------------------------------------------------------------------------------------ judging

def judge(windows: pa.Table, config: Config, grain: str, first_seen: dict,
          *, progress: Progress | None = None) -> pa.Table:
    """drift_events rows for every window of `windows` (sql/drift_windows.sql rows of one
    grain); `first_seen` maps each index version to its first request, so that a window
    served by several versions belongs to the newest."""
    cols = windows.to_pydict()
    rows_at: dict[datetime, list[int]] = {}
    for i, start in enumerate(cols["window_start"]):
        rows_at.setdefault(start, []).append(i)
    series: dict[tuple, _Series] = {}
    out: list[dict] = []
    times = sorted(rows_at)
    for step, when in enumerate(times):
        if progress:
            progress(f"drift by {grain}", step, len(times))
        work = []
        for i in rows_at[when]:
            for metric in DRIFT_METRICS:
                key = (cols["slice"][i], cols["route"][i], cols["k"][i],
                       cols["gold_version"][i], metric)
                if key not in series:
                    series[key] = _Series(key, config.baseline_for(key[0]))
                work.append((series[key], i, metric))
        out.extend(_judge_window(work, cols, config, grain, first_seen))
    if progress:
        progress(f"drift by {grain}", len(times), len(times))
    return _as_table(out)


def _sums(cols: dict, i: int, metric: str) -> np.ndarray:
    prefix = SUMS_OF[metric]
    return np.array([cols["n"][i], cols["n_clusters"][i], cols[f"{prefix}_sum"][i],
                     cols[f"{prefix}_cluster_sq"][i], cols[f"{prefix}_cluster_cross"][i],
                     cols["size_sq"][i], cols[f"{prefix}_mean_sum"][i],
                     cols[f"{prefix}_mean_sq"][i]], dtype=float)


def _version(cols: dict, i: int, first_seen: dict) -> str | None:
    versions = cols["index_versions"][i] or []
    if not versions:
        return None
    return max(versions, key=lambda v: (first_seen.get(v) or datetime.min, v))


def _comparator(s: _Series, cols: dict, i: int, version: str | None,
                all_rows: dict | None = None) -> tuple[_Pool | None, tuple | None]:
    """The baseline window i is compared with (None while none exists) and the detector it
    belongs to."""
    b = s.baseline
    start = cols["window_start"][i]
    if b.kind == "first":
        epoch = 1 if b.since is not None and start.date() >= b.since else 0
        own = s.pools.get((epoch, version))
        if own is not None and len(own.windows) >= b.windows:
            return own, own.key
        carry = s.complete if s.complete is not None and s.complete.key[0] == epoch else None
        return carry, (carry.key if carry else None)
    if b.kind == "trailing":
        if len(s.trailing) < b.windows or any(v != version for v, _ in s.trailing):
            return None, None
        pool = _Pool(("trailing", version))
        for _, (sums, w_start, w_end, session) in s.trailing:
            pool.add(sums, w_start, w_end, session)
        return pool, pool.key
    return s.pinned, ("pinned",) if s.pinned is not None else None


def _is_pinned_member(b: Baseline, cols: dict, i: int) -> bool:
    if b.kind == "dates":
        return b.since <= cols["window_start"][i].date() < b.until
    if b.kind == "index":
        return list(cols["index_versions"][i] or []) == [b.version]
    return False


def _judge_window(work: list, cols: dict, config: Config, grain: str,
                  first_seen: dict) -> list[dict]:
    alpha = DEFAULT_ALPHA
    # pinned baselines pool every member window up front
    for s, _, metric in work:
        if s.baseline.kind in ("dates", "index") and s.pinned is None:
            s.pinned = _Pool(("pinned",))
            for j in range(len(cols["window_start"])):
                if ((cols["slice"][j], cols["route"][j], cols["k"][j], cols["gold_version"][j])
                        == s.key[:4] and cols["n"][j] > 0
                        and _is_pinned_member(s.baseline, cols, j)):
                    s.pinned.add(_sums(cols, j, metric), cols["window_start"][j],
                                 cols["window_end"][j], bool(cols["any_session"][j]))
            if not s.pinned.windows:
                s.pinned = None

    items = []
    for s, i, metric in work:
        version = _version(cols, i, first_seen)
        pool, detector_key = _comparator(s, cols, i, version)
        member_only = (s.baseline.kind in ("dates", "index")
                       and _is_pinned_member(s.baseline, cols, i))
        if member_only:
            pool, detector_key = None, None
        if detector_key != s.detector_key and detector_key is not None:
            s.detector_key, s.detector_t, s.log_s, s.sessions = detector_key, 0, {}, 0.0
        items.append((s, i, metric, version, pool))

    judged = [it for it in items if it[4] is not None and cols["n"][it[1]] > 0]
    results = _test(judged, cols, config, alpha) if judged else {}

    # many slices: control false discoveries within each window x route x k x gold x metric
    families: dict[tuple, list[int]] = {}
    for idx, (s, _, _, _, _) in enumerate(judged):
        families.setdefault((s.key[1], s.key[2], s.key[3], s.key[4]), []).append(idx)
    drop = np.zeros(len(judged), dtype=bool)
    rise = np.zeros(len(judged), dtype=bool)
    if judged:
        for members in families.values():
            m = np.array(members)
            if config.drift_mode == "fixed":
                drop[m] = benjamini_hochberg(2.0 * results["p_drop"][m], alpha)
                rise[m] = benjamini_hochberg(2.0 * results["p_rise"][m], alpha)
            else:
                drop[m] = e_benjamini_hochberg(results["e_drop"][m], alpha / 4)
                rise[m] = e_benjamini_hochberg(results["e_rise"][m], alpha / 4)

    rows = []
    position = {id(it[0]): idx for idx, it in enumerate(judged)}
    for s, i, metric, version, pool in items:
        idx = position.get(id(s))
        rows.append(_row(s, i, metric, version, pool, idx, results, drop, rise, cols, config,
                         grain))
    return rows


def _interval_of(sums: np.ndarray, metric: str, any_session: bool, alpha) -> Interval:
    n, g, total, csq, cross, size_sq = (sums[..., j] for j in range(6))
    if metric == "mean_recall":
        return cluster_t_interval(n, g, total, csq, cross, size_sq, alpha)
    plain = wilson_interval(total, n, alpha)
    clustered = cluster_wilson_interval(n, g, total, csq, cross, size_sq, alpha)
    return Interval(np.where(any_session, clustered.low, plain.low),
                    np.where(any_session, clustered.high, plain.high))


def _session_var(sums: np.ndarray) -> np.ndarray:
    g = np.maximum(sums[..., G], 1.0)
    return np.maximum(sums[..., MSQ] / g - (sums[..., MSUM] / g) ** 2, 0.0)


def _test(judged: list, cols: dict, config: Config, alpha: float) -> dict:
    """Vectorized over the series judged at this window: values, the fixed-look interval and
    p-values, the anytime detector's e-values and interval, and the power figures."""
    margin = config.drift_margin
    base = np.array([it[4].sums for it in judged])
    win = np.array([_sums(cols, it[1], it[2]) for it in judged])
    base_session = np.array([it[4].any_session for it in judged])
    win_session = np.array([bool(cols["any_session"][it[1]]) for it in judged])
    is_mean = np.array([it[2] == "mean_recall" for it in judged])
    value = win[:, TOTAL] / win[:, N]
    base_value = base[:, TOTAL] / np.where(base[:, N] > 0, base[:, N], np.nan)
    delta = value - base_value
    m = len(judged)

    # fixed look: the interval of the difference and one-sided p-values against the margin
    diff = cluster_difference_interval(tuple(base[:, :6].T), tuple(win[:, :6].T), alpha)
    se_mean = np.asarray(diff.se, dtype=float)
    df = np.asarray(diff.df, dtype=float)
    z = float(sp.norm.isf(alpha / 2))

    def rate_interval(a):
        return hybrid_difference_interval(
            base_value, _interval_of(base, "pass_rate", base_session, a),
            value, _interval_of(win, "pass_rate", win_session, a))

    rates = rate_interval(alpha)
    low = np.where(is_mean, diff.low, rates.low)
    high = np.where(is_mean, diff.high, rates.high)
    with np.errstate(divide="ignore", invalid="ignore"):
        df_ok = np.where(np.isnan(df), 1e6, df)
        t_drop = (delta + margin) / se_mean
        t_rise = (delta - margin) / se_mean
        p_drop_mean = np.where(se_mean > 0, sp.t.cdf(t_drop, df_ok),
                               np.where(delta < -margin, 0.0, 1.0))
        p_rise_mean = np.where(se_mean > 0, sp.t.sf(t_rise, df_ok),
                               np.where(delta > margin, 0.0, 1.0))
    p_drop_rate = _one_sided_p(rate_interval, delta, -margin, "high")
    p_rise_rate = _one_sided_p(rate_interval, delta, margin, "low")
    p_drop = np.where(is_mean, p_drop_mean, p_drop_rate)
    p_rise = np.where(is_mean, p_rise_mean, p_rise_rate)
    p_drop = np.where(np.isnan(low), np.nan, p_drop)
    p_rise = np.where(np.isnan(low), np.nan, p_rise)
    se_fixed = np.where(is_mean, se_mean, (rates.high - rates.low) / (2 * z))
    q_fixed = np.where(is_mean, sp.t.isf(alpha / 2, df_ok), z)
    mdd_fixed = margin + (q_fixed + Z_POWER) * se_fixed
    # the window's own share of the variance, for the requests it would need
    win_alone = _interval_of(win, "pass_rate", win_session, alpha)
    win_mean_alone = _interval_of(win, "mean_recall", win_session, alpha)
    base_mean_alone = _interval_of(base, "mean_recall", base_session, alpha)
    base_rate_alone = _interval_of(base, "pass_rate", base_session, alpha)
    v_win = (np.where(is_mean, win_mean_alone.high - win_mean_alone.low,
                      win_alone.high - win_alone.low) / (2 * z)) ** 2
    v_base = (np.where(is_mean, base_mean_alone.high - base_mean_alone.low,
                       base_rate_alone.high - base_rate_alone.low) / (2 * z)) ** 2
    se_needed = (config.detectable_drop - margin) / (q_fixed + Z_POWER)
    with np.errstate(divide="ignore", invalid="ignore"):
        room = se_needed ** 2 - v_base
        need_fixed = np.where(room > 0, np.ceil(win[:, N] * v_win / room), np.nan)

    result = {"value": value, "base_value": base_value, "delta": delta, "p_drop": p_drop,
              "p_rise": p_rise, "fixed_low": low, "fixed_high": high}
    if config.drift_mode == "fixed":
        result.update(low=low, high=high, mdd=mdd_fixed, need=need_fixed,
                      method=np.where(is_mean, "welch_cluster", "newcombe_cluster_wilson"),
                      evidence=np.where(delta < 0, p_drop, p_rise))
        return result

    # anytime: the detector, restarted whenever the baseline changes
    t = np.array([it[0].detector_t + 1 for it in judged], dtype=float)
    trailing = np.array([it[0].baseline.kind == "trailing" for it in judged])
    base_alpha = np.where(trailing, alpha / 2 / (t * (t + 1)), alpha / 2)
    bounds = _interval_of(base, "mean_recall", base_session, base_alpha)
    rate_bounds = _interval_of(base, "pass_rate", base_session, base_alpha)
    lower = np.where(is_mean, bounds.low, rate_bounds.low)
    upper = np.where(is_mean, bounds.high, rate_bounds.high)
    lower = np.where(np.isnan(lower), 0.0, lower)
    upper = np.where(np.isnan(upper), 1.0, upper)
    base_var = _session_var(base)
    target = np.maximum(config.detectable_drop - margin - (base_value - lower), 0.01)
    lam = bernstein_bet(target, base_var)
    log_threshold = math.log(4.0 / alpha)
    grid = np.union1d(GRID, [-margin, margin])
    e_drop = np.empty(m)
    e_rise = np.empty(m)
    # per side: the detector carried on, and restarted at this window (used when the window
    # ends an episode in that direction, so its interval no longer carries the old evidence)
    bounds_of = {"drop": (np.empty(m), np.empty(m)), "rise": (np.empty(m), np.empty(m))}
    pending = []
    for j, it in enumerate(judged):
        s = it[0]
        g_w, a_w, b_w = win[j, G], win[j, MSUM], win[j, MSQ]
        states = {}
        for side, bound, sign in (("drop", lower[j], -1.0), ("rise", upper[j], 1.0)):
            exact = bernstein_log_evalue(bound + sign * margin, g_w, a_w, b_w, lam[j], side)
            log_s, log_m = mixture_update(s.log_s.get(side, -np.inf), exact, t[j])
            fresh_s, _ = mixture_update(-np.inf, exact, t[j])
            (e_drop if side == "drop" else e_rise)[j] = math.exp(min(float(log_m), 700.0))
            on_grid = bernstein_log_evalue(bound + grid, g_w, a_w, b_w, lam[j], side)
            carried = s.log_s.get(side + "_grid", np.full(grid.size, -np.inf))
            for which, start_from in enumerate((carried, np.full(grid.size, -np.inf))):
                log_sg, log_mg = mixture_update(start_from, on_grid, t[j])
                ruled_out = log_mg >= log_threshold
                if side == "drop":
                    edge = grid[ruled_out].min() if ruled_out.any() else 1.0
                    edge = min(edge, 1.0 - lower[j])
                else:
                    edge = grid[ruled_out].max() if ruled_out.any() else -1.0
                    edge = max(edge, -upper[j])
                bounds_of[side][which][j] = edge
                states[(side, which)] = (float(log_s) if which == 0 else float(fresh_s), log_sg)
        pending.append(states)
        s.detector_t += 1
    d_high, fresh_high = bounds_of["drop"]
    d_low, fresh_low = bounds_of["rise"]
    # power: a drop this large, present since the detector started, has reached the threshold
    # by now with 80 % probability (the change-at-start term alone, weight 1/2, with the worst
    # e-BH rank; the other terms only add evidence)
    families = {}
    for it in judged:
        families[it[0].key[1:]] = families.get(it[0].key[1:], 0) + 1
    m_family = np.array([families[it[0].key[1:]] for it in judged], dtype=float)
    log_level = math.log(4.0 / alpha) + np.log(m_family) + math.log(2.0)
    sessions = np.array([it[0].sessions for it in judged]) + win[:, G]
    for it, g_w in zip(judged, win[:, G], strict=True):
        it[0].sessions += g_w
    win_var = np.where(win[:, G] >= 2, _session_var(win), base_var)
    shift = bernstein_shift_needed(lam, win_var, sessions, log_level)
    noise = Z_POWER * np.sqrt(win_var / np.maximum(sessions, 1.0))
    slack = margin + (base_value - lower)
    mdd = slack + shift + noise
    total = _sessions_needed(lam, win_var, log_level, config.detectable_drop - slack)
    need = np.ceil(np.maximum(total - sessions, 0.0) * win[:, N] / np.maximum(win[:, G], 1.0))
    result.update(low=d_low, high=d_high, mdd=mdd, need=need, pending=pending,
                  fresh_low=fresh_low, fresh_high=fresh_high,
                  method=np.where(is_mean, "e_detector_bernstein_cluster_t",
                                  "e_detector_bernstein_cluster_wilson"),
                  e_drop=e_drop, e_rise=e_rise, evidence=np.where(delta < 0, e_drop, e_rise))
    return result


def _sessions_needed(lam, var, log_level, room) -> np.ndarray:
    """The sessions a window would need so that a drop `room` beyond the boundary is detected
    with 80 % power (bisection on log G); NaN where no size would do."""
    room = np.asarray(room, dtype=float)
    lo = np.zeros_like(room)
    hi = np.full_like(room, math.log(1e10))

    def enough(log_g):
        g = np.exp(log_g)
        shift = bernstein_shift_needed(lam, var, g, log_level)
        return np.nan_to_num(shift + Z_POWER * np.sqrt(var / g), nan=np.inf) <= room

    possible = enough(hi) & (room > 0)
    for _ in range(50):
        mid = (lo + hi) / 2
        ok = enough(mid)
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    return np.where(possible, np.ceil(np.exp(hi)), np.nan)


def _one_sided_p(interval_at, delta: np.ndarray, target: float, bound: str) -> np.ndarray:
    """The one-sided p-value of `delta` against `target` from a family of intervals: half the
    alpha at which the interval's `bound` reaches `target` (bisection on log alpha). 1 where the
    estimate lies on the other side."""
    beyond = delta < target if bound == "high" else delta > target
    lo = np.full(delta.shape, math.log(1e-15))
    hi = np.zeros(delta.shape)
    for _ in range(45):
        mid = (lo + hi) / 2
        with np.errstate(all="ignore"):   # tiny alphas: infinite quantiles, NaN bounds
            iv = interval_at(np.exp(mid))
        edge = np.asarray(iv.high if bound == "high" else iv.low)
        reached = edge < target if bound == "high" else edge > target
        hi = np.where(reached, mid, hi)
        lo = np.where(reached, lo, mid)
    return np.where(beyond, np.exp(hi) / 2, 1.0)


def _episode_id(key: tuple, grain: str, start: datetime, kind: str) -> str:
    text = "\x1f".join(map(str, (*key, grain, start.isoformat(), kind)))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _row(s: _Series, i: int, metric: str, version, pool, idx, results, drop, rise, cols,
         config: Config, grain: str) -> dict:
    margin = config.drift_margin
    start = cols["window_start"][i]
    n = cols["n"][i]
    row = {
        "window_start": start, "window_end": cols["window_end"][i], "grain": grain,
        "slice": s.key[0], "route": s.key[1], "k": s.key[2], "gold_version": s.key[3],
        "metric": metric, "index_version": version, "change_point": False, "n": n,
        "baseline_start": None, "baseline_end": None, "baseline_n": None, "value": None,
        "baseline_value": None, "delta": None, "delta_low": None, "delta_high": None,
        "margin": margin, "method": "none", "evidence": None, "decision": "baseline",
        "state": "none", "episode_id": None, "min_detectable_delta": None, "n_needed": None,
        "built_with": built_with(config, s.baseline),
    }
    row["change_point"] = s.last_version is not None and version != s.last_version
    s.last_version = version
    if n > 0:
        sums = _sums(cols, i, metric)
        row["value"] = float(sums[TOTAL] / sums[N])
    resolved_by_rebaseline = False
    if pool is not None:
        row.update(baseline_start=pool.windows[0], baseline_end=max(pool.ends),
                   baseline_n=int(pool.sums[N]),
                   baseline_value=float(pool.sums[TOTAL] / pool.sums[N]))
        if idx is None:   # nothing scored in the window
            row.update(decision="insufficient", method=_method(config, metric))
        else:
            delta = float(results["delta"][idx])
            low, high = float(results["low"][idx]), float(results["high"][idx])
            mdd = float(results["mdd"][idx])
            need = float(results["need"][idx])
            evidence = float(results["evidence"][idx])
            row.update(delta=delta, delta_low=_finite(low), delta_high=_finite(high),
                       method=str(results["method"][idx]), evidence=_finite(evidence),
                       min_detectable_delta=_finite(mdd))
            if bool(drop[idx]) and delta < 0:
                decision = "drop"
            elif bool(rise[idx]) and delta > 0:
                decision = "rise"
            elif math.isnan(mdd) or mdd > config.detectable_drop or math.isnan(low):
                decision = "insufficient"
            else:
                decision = "stable"
            if decision == "insufficient" and not math.isnan(need):
                row["n_needed"] = int(need)
            row["decision"] = decision
    elif s.episode is not None:
        resolved_by_rebaseline = True

    # episodes: open on a drop or rise, end when the window alone shows the difference back
    # within the margin
    decision = row["decision"]
    restart = None
    if s.episode is None:
        if decision in ("drop", "rise"):
            s.episode = decision
            s.episode_id = _episode_id(s.key, grain, start, decision)
            row.update(state="opened", episode_id=s.episode_id)
    else:
        # back: the window alone shows, at level 1 - alpha, a difference within the margin
        back = False
        if idx is not None and pool is not None:
            fixed_low = float(results["fixed_low"][idx])
            fixed_high = float(results["fixed_high"][idx])
            back = fixed_low > -margin if s.episode == "drop" else fixed_high < margin
        if back or resolved_by_rebaseline:
            row.update(state="resolved", episode_id=s.episode_id)
            if decision == s.episode:   # the detector's old evidence, not this window's
                row["decision"] = "stable"
            restart = s.episode   # the detector restarts for that direction at this window
            if idx is not None and "pending" in results:
                if restart == "drop":
                    row["delta_high"] = _finite(float(results["fresh_high"][idx]))
                else:
                    row["delta_low"] = _finite(float(results["fresh_low"][idx]))
            s.episode, s.episode_id = None, None
        else:
            row.update(state="ongoing", episode_id=s.episode_id)
    if idx is not None and "pending" in results:
        for side in ("drop", "rise"):
            which = 1 if row["state"] == "resolved" and side == restart else 0
            s.log_s[side], s.log_s[side + "_grid"] = results["pending"][idx][(side, which)]
    _grow_baseline(s, cols, i, metric, version, row)
    return row


def _method(config: Config, metric: str) -> str:
    if config.drift_mode == "fixed":
        return "welch_cluster" if metric == "mean_recall" else "newcombe_cluster_wilson"
    return ("e_detector_bernstein_cluster_t" if metric == "mean_recall"
            else "e_detector_bernstein_cluster_wilson")


def _grow_baseline(s: _Series, cols: dict, i: int, metric: str, version, row: dict) -> None:
    """A window with data, served by one index version and outside any open episode, joins
    the baseline being formed."""
    eligible = (cols["n"][i] > 0 and len(cols["index_versions"][i] or []) == 1
                and row["state"] not in ("opened", "ongoing"))
    if not eligible:
        return
    b = s.baseline
    entry = (_sums(cols, i, metric), cols["window_start"][i], cols["window_end"][i],
             bool(cols["any_session"][i]))
    if b.kind == "first":
        epoch = 1 if b.since is not None and cols["window_start"][i].date() >= b.since else 0
        pool = s.pools.setdefault((epoch, version), _Pool((epoch, version)))
        if len(pool.windows) < b.windows:
            pool.add(*entry)
            if len(pool.windows) == b.windows:
                s.complete = pool
    elif b.kind == "trailing":
        s.trailing.append((version, entry))
        while len(s.trailing) > b.windows:
            s.trailing.popleft()


def _finite(x: float) -> float | None:
    return None if x is None or math.isnan(x) or math.isinf(x) else x


_SCHEMA = pa.schema([
    ("window_start", pa.timestamp("us")), ("window_end", pa.timestamp("us")),
    ("grain", pa.string()), ("slice", pa.string()), ("route", pa.string()), ("k", pa.int32()),
    ("gold_version", pa.string()), ("metric", pa.string()), ("index_version", pa.string()),
    ("change_point", pa.bool_()), ("n", pa.int64()), ("baseline_start", pa.timestamp("us")),
    ("baseline_end", pa.timestamp("us")), ("baseline_n", pa.int64()), ("value", pa.float64()),
    ("baseline_value", pa.float64()), ("delta", pa.float64()), ("delta_low", pa.float64()),
    ("delta_high", pa.float64()), ("margin", pa.float64()), ("method", pa.string()),
    ("evidence", pa.float64()), ("decision", pa.string()), ("state", pa.string()),
    ("episode_id", pa.string()), ("min_detectable_delta", pa.float64()),
    ("n_needed", pa.int64()), ("built_with", pa.string()),
])


def _as_table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=_SCHEMA)
