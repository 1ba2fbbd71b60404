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
  the baseline restarts on that day, and open episodes end there; every such day is kept,
  `first:N@DAY1@DAY2`, each holding until the next). A trailing baseline (`trailing:N`) is
  the N windows before the window judged, in anytime mode the N before the last N
  (`trailing_gap`).
- Fixed-look mode (`drift_mode = fixed`): the interval of (window - baseline) at level 1 -
  alpha: cluster-robust Welch for mean recall, each side with 0s and 1s added in proportion
  to its size (`stats.adjusted_difference_interval`), Newcombe's hybrid of (cluster-)Wilson
  intervals for the rates, and the same combination (MOVER) when a side of mean recall has
  recalls all 0 or 1 (a proportion). A side whose sessions hold more than one request gets the
  bias-reduced (CR2) variance and Bell-McCaffrey degrees of freedom of its pooled windows,
  from their clusters by size (window_sums.size_hist, `cr2_sums`). A drop needs the whole
  interval below -margin, after Benjamini-Hochberg across the slices of the window.
- Anytime-valid mode (the default): per series, an empirical-Bernstein e-value per window on
  its sessions (`stats.bernstein_log_evalue`), mixed over every possible change start
  (`stats.mixture_update`), against the boundary baseline-lower-bound - margin (drops) and
  baseline-upper-bound + margin (rises).
  The baseline's interval is window_metrics' (`adjusted_t`; Wilson when its recalls are
  all 0 or 1).
  Alpha is split: alpha/2 for the baseline's interval, alpha/4 per direction for the detector,
  with e-BH across the slices of the window. Under independent sessions and a fixed baseline
  the chance of ever raising a false drop or rise, over unlimited re-checks, is at most alpha.
  The row's interval is the set of differences the detector has not ruled out.
- An episode opens at a drop (or rise) and ends at the first window whose own interval at level
  1 - alpha lies above -margin (below +margin for a rise), or whose recovered stretch's does:
  the episode's windows since the last one whose own difference lay beyond the margin, pooled
  (a slice too small for one window's interval to lie within the margin would otherwise stay
  in its episode for ever once recall is back) — or on the day a person re-baselined the
  slice; the detector then restarts for that direction. A window with nothing to compare
  keeps the episode open.
- Power: every row carries the smallest drop its data would detect with 80 % power (fixed: in
  this window alone; anytime: a drop present since the drop detector started); a window that
  could not detect `detectable_drop` is `insufficient`, never `stable`, and `n_needed` says how
  many requests that would take (fixed: in one window; anytime: more, pooled from now on).
- The anytime e-values weigh requests, not sessions: each session's sum enters scaled by the
  largest session of the window, so the test is about the same request-weighted mean the row
  reports, whatever the sessions' own means, given the session sizes."""

from __future__ import annotations

import hashlib
import itertools
import math
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import stats as sp

from pipeline import state
from pipeline.config import DEFAULT_ALPHA, DRIFT_METRICS, Baseline, Config, given_or_resolved
from pipeline.progress import Progress
from pipeline.stats import (
    Interval,
    adjusted_difference_interval,
    adjusted_t_interval,
    all_binary,
    benjamini_hochberg,
    bernstein_bet,
    bernstein_log_evalue,
    bernstein_shift_needed,
    bias_reduced_t_interval,
    change_weight,
    cluster_wilson_interval,
    e_benjamini_hochberg,
    hybrid_difference_interval,
    mixture_update,
    no_spread,
    wilson_interval,
)
from pipeline.warehouse import run_script, transaction

POWER = 0.8
Z_POWER = float(sp.norm.ppf(POWER))
GRID = np.round(np.linspace(-1.0, 1.0, 401), 6)   # differences the anytime interval resolves
# the column prefix of window_sums for each metric
SUMS_OF = {"mean_recall": "recall", "pass_rate": "pass", "full_coverage_rate": "full"}
LABEL_SHARE = 0.1   # of a window's requests a version serves to label it (see _label)
# order of a window's sums: n, sessions G, total, sum S_g^2, sum S_g n_g, sum n_g^2 (summed
# when windows pool) and the largest session (the largest of them when windows pool)
N, G, TOTAL, CSQ, CROSS, SIZE_SQ, MAX_SIZE = range(7)
# columns of a window's or pool's clusters by size (window_sums.size_hist, one metric): size
# n_g, clusters of that size, their sum of S_g and of S_g^2
HIST_COLUMNS = ("size", "clusters", "s", "s_sq")
METHODS = {
    ("fixed", True): "welch_adjusted_cluster", ("fixed", False): "newcombe_cluster_wilson",
    ("anytime", True): "e_detector_bernstein_adjusted_t",
    ("anytime", False): "e_detector_bernstein_cluster_wilson",
}


@dataclass(frozen=True)
class DriftSummary:
    rows: int
    opened: int
    resolved: int
    changed: bool
    judged: int = 0   # windows (starts) judged, before keeping those of [start, end)


@dataclass
class _Pool:
    """The pooled sums of a baseline's windows."""

    key: tuple
    sums: np.ndarray = field(default_factory=lambda: np.zeros(7))
    starts: list[datetime] = field(default_factory=list)
    ends: list[datetime] = field(default_factory=list)
    any_session: bool = False
    binary: bool = True   # every recall of every window 0 or 1
    # the clusters by size (HIST_COLUMNS), merged by size; None once a window without one
    # (aggregated by an earlier release) joined
    hist: np.ndarray | None = field(default_factory=lambda: np.zeros((0, 4)))

    def add(self, window: _Window) -> None:
        self.sums = np.append(self.sums[:MAX_SIZE] + window.sums[:MAX_SIZE],
                              max(self.sums[MAX_SIZE], window.sums[MAX_SIZE]))
        self.hist = (None if self.hist is None or window.hist is None
                     else merge_histograms(self.hist, window.hist))
        self.starts.append(window.start)
        self.ends.append(window.end)
        self.any_session = self.any_session or window.any_session
        self.binary = self.binary and window.binary


@dataclass
class _Detector:
    """One direction of the anytime detector: log S at the decision boundary and on the grid
    of differences, the window it (re)started at, and what it has judged since, as the sums
    `stats.bernstein_shift_needed` takes (for the power figure)."""

    log_s: float = -math.inf
    log_s_grid: np.ndarray | None = None   # None: nothing judged yet
    start_t: int = 1
    n: float = 0.0          # requests
    linear: float = 0.0     # sum n / scale
    quadratic: float = 0.0  # sum size_sq / scale^2
    residual: float = 0.0   # sum_g (S_g - n_g mean)^2 / scale^2
    variance: float = 0.0   # sum_g (S_g - n_g mean)^2
    size_sq: float = 0.0    # sum n_g^2


@dataclass
class _Series:
    """What one series carries from window to window."""

    key: tuple            # (slice, route, k, gold_version, metric)
    baseline: Baseline
    pools: dict = field(default_factory=dict)      # first: (epoch, version) -> _Pool
    complete: _Pool | None = None                  # the last complete baseline (carry-over)
    trailing: deque = field(default_factory=deque)
    lag: int = 0                                   # trailing: windows between it and the window
                                                   # judged (trailing_gap)
    pinned: _Pool | None = None
    segment: tuple | None = None                   # the baseline the detector runs against
    t: int = 0                                     # windows judged in this segment
    drop: _Detector = field(default_factory=_Detector)
    rise: _Detector = field(default_factory=_Detector)
    episode: str | None = None                     # 'drop' | 'rise' while one is open
    episode_id: str | None = None
    episode_opened: datetime | None = None
    # the open episode's windows since the last whose own difference lay beyond the margin,
    # keyed by the baseline they were compared with
    recovered: _Pool | None = None
    last_version: str | None = None
    built_with: str = ""                           # of every row of the series (built_with)


@dataclass(frozen=True)
class _Window:
    """One row of sql/drift_windows.sql for one metric."""

    start: datetime
    end: datetime
    n: int
    versions: tuple[str, ...]
    version: str | None   # the newest version serving the window
    any_session: bool
    sums: np.ndarray
    binary: bool = False   # every recall 0 or 1: mean recall is then a proportion
    hist: np.ndarray | None = None   # the clusters by size (HIST_COLUMNS); None: not kept


@dataclass
class _Item:
    """A series' window being judged, and what it is compared with."""

    series: _Series
    window: _Window
    pool: _Pool | None


def drift(con, config: Config | None = None, *, start: datetime | None = None,
          end: datetime | None = None, progress: Progress | None = None,
          **settings) -> DriftSummary:
    """Judge every window of every grain kept against its baseline and write `drift_events`
    for the windows in [start, end) (all windows when not given), in one transaction. The
    history before `start` is read, since baselines and the sequential test depend on it.
    Idempotent: re-running over the same window metrics changes no row."""
    config = given_or_resolved(con, config, settings)
    state.check_window(start, end)
    first_seen = dict(con.execute(
        "SELECT index_version, min(timestamp) FROM requests GROUP BY ALL").fetchall())
    table = pa.concat_tables([
        judge(run_script(con, "drift_windows", {"grain": grain}, as_arrow=True), config, grain,
              first_seen, progress=progress)
        for grain in config.grains])
    # counted and kept column-wise: a list of the 1.8M starts of 3,000 slices over 30 days
    # held another few hundred MB at drift's peak
    judged = pc.count_distinct(table.column("window_start")).as_py()
    if start is not None or end is not None:
        keep = pa.array(np.ones(table.num_rows, dtype=bool))
        if start is not None:
            keep = pc.and_(keep, pc.greater_equal(table.column("window_start"),
                                                  pa.scalar(start, pa.timestamp("us"))))
        if end is not None:
            keep = pc.and_(keep, pc.less(table.column("window_start"),
                                         pa.scalar(end, pa.timestamp("us"))))
        table = table.filter(keep)
    bounds = {"start": start, "end": end}
    where = "($start IS NULL OR window_start >= $start) AND ($end IS NULL OR window_start < $end)"
    with transaction(con):
        con.register("drift_batch", table)
        differs = con.execute(
            f"SELECT count(*) FROM ((SELECT * FROM drift_events WHERE {where}) "
            "EXCEPT ALL (SELECT * FROM drift_batch)) UNION ALL SELECT count(*) FROM "
            f"((SELECT * FROM drift_batch) EXCEPT ALL (SELECT * FROM drift_events WHERE {where}))",
            bounds).fetchall()
        changed = any(row[0] for row in differs)
        if changed:   # rows are replaced only when they differ: a re-run touches nothing
            con.execute(f"DELETE FROM drift_events WHERE {where}", bounds)
            con.execute("INSERT INTO drift_events BY NAME SELECT * FROM drift_batch")
        con.unregister("drift_batch")
    states = table.column("state")
    return DriftSummary(table.num_rows, pc.sum(pc.equal(states, "opened")).as_py() or 0,
                        pc.sum(pc.equal(states, "resolved")).as_py() or 0, changed, judged)


# How drift is judged beyond its settings, stored in built_with so that `run` judges a
# warehouse's series again once when it changes. 2: a rise no longer keeps windows out of a
# forming baseline (_grow_baseline); 3: nor takes a window judged a drop in.
RULES = 3


def built_with(config: Config, baseline: Baseline) -> str:
    """The settings a drift row depends on, stored with it so that `run` re-judges when one
    changes."""
    gap = trailing_gap(config, baseline)
    return (f"mode={config.drift_mode};margin={config.drift_margin};"
            f"detectable={config.detectable_drop};baseline={baseline.text};"
            f"alpha={DEFAULT_ALPHA};pass_mark={config.pass_mark}"
            + (f";gap={gap}" if gap else "") + f";rules={RULES}")


def trailing_gap(config: Config, baseline: Baseline) -> int:
    """Windows between a trailing baseline and the window it is compared with: none in a
    fixed look; anytime, as many as the baseline holds. The detector gathers its evidence
    over several windows, and a baseline of the windows just before took the first windows
    of a drop in while it did, followed the drop down and never flagged it (bench/drift_sim:
    0 of 100 worlds, even a drop of 0.5 at 80 requests a day; tests/test_drift_sim.py)."""
    return baseline.windows if baseline.kind == "trailing" and config.drift_mode == "anytime" \
        else 0


# ------------------------------------------------------------------------------------ judging

def judge(windows: pa.Table, config: Config, grain: str, first_seen: dict,
          *, metrics: tuple[str, ...] = DRIFT_METRICS,
          progress: Progress | None = None) -> pa.Table:
    """drift_events rows for every window of `windows` (sql/drift_windows.sql rows of one
    grain) and each of `metrics`; `first_seen` maps each index version to its first request,
    so that a window served by several versions belongs to the newest of those serving at
    least LABEL_SHARE of it (a smoke test of the next index is no change point). Windows are
    judged in time order, all series of a window together. Each metric is its own series and
    its own false-discovery family, so leaving some out changes nothing in the others' rows."""
    # one window's rows at a time become Python values: every window of the history at once
    # held ~1.4 KB a row (3,000 tag values x 7 cutoffs x 30 days: 0.9 GB) until the end
    starts = windows.column("window_start")
    if windows.num_rows > 1 and not pc.all(pc.greater_equal(
            starts.slice(1), starts.slice(0, windows.num_rows - 1))).as_py():
        # sql/drift_windows.sql gives them in order; a table made otherwise is put in order
        windows = windows.take(pc.sort_indices(windows, [("window_start", "ascending")]))
    starts = windows.column("window_start").to_pylist()
    bounds = [i for i in range(len(starts) + 1)
              if i in (0, len(starts)) or starts[i] != starts[i - 1]]
    del starts
    history = _History(windows)
    series: dict[tuple, _Series] = {}
    # each window's rows become columns at once: a dict per row of every window of the
    # history held ~4 KB a row until the end (many slices x many days)
    batches: list[pa.Table] = []
    times = len(bounds) - 1
    for step, (first, stop) in enumerate(itertools.pairwise(bounds)):
        if progress:
            progress(f"drift by {grain}", step, times)
        cols = _columns(windows.slice(first, stop - first))
        items = []
        for i in range(stop - first):
            for metric in metrics:
                key = (*_series_key(cols, i), metric)
                if key not in series:
                    series[key] = _new_series(key, config, history, first_seen)
                items.append(_prepare(series[key], _window(cols, i, metric, first_seen)))
        batches.append(pa.Table.from_pylist(_judge_window(items, config, grain), schema=_SCHEMA))
    if progress:
        progress(f"drift by {grain}", times, times)
    return pa.concat_tables(batches) if batches else _SCHEMA.empty_table()


def _columns(windows: pa.Table) -> dict:
    cols = windows.to_pydict()
    # rows of an earlier release (or a hand-built table) may have no histogram
    cols.setdefault("size_hist", [None] * windows.num_rows)
    return cols


class _History:
    """Every window of every series, as Python values, made only when a pinned baseline
    (dates, index) first pools its member windows: the default baselines never read it."""

    def __init__(self, windows: pa.Table):
        self.windows = windows
        self.cols: dict | None = None
        self.by_series: dict[tuple, list[int]] = {}

    def of(self, key: tuple) -> tuple[dict, list[int]]:
        if self.cols is None:
            self.cols = _columns(self.windows)
            for i in range(self.windows.num_rows):
                self.by_series.setdefault(_series_key(self.cols, i), []).append(i)
        return self.cols, self.by_series[key]


def _series_key(cols: dict, i: int) -> tuple:
    return cols["slice"][i], cols["route"][i], cols["k"][i], cols["gold_version"][i]


def _label(cols: dict, i: int, versions: tuple[str, ...], first_seen: dict) -> str | None:
    """The index version a window is labelled with: the newest (by first request) of those
    serving at least LABEL_SHARE of the requests of the window and slice measured at its k
    (a tag slice's own: a canary by tenant changes that tenant's index before the whole
    window's); the newest serving it when none was measured."""
    counts = dict(cols["version_counts"][i] or ())
    total = sum(counts.values())
    serving = [v for v in versions if total and counts.get(v, 0) >= LABEL_SHARE * total]
    return max(serving or versions,
               key=lambda v: (first_seen.get(v) or datetime.min, v), default=None)


def _window(cols: dict, i: int, metric: str, first_seen: dict) -> _Window:
    prefix = SUMS_OF[metric]
    versions = tuple(cols["index_versions"][i] or ())
    newest = _label(cols, i, versions, first_seen)
    sums = np.array([cols["n"][i], cols["n_clusters"][i], cols[f"{prefix}_sum"][i],
                     cols[f"{prefix}_cluster_sq"][i], cols[f"{prefix}_cluster_cross"][i],
                     cols["size_sq"][i], cols["max_size"][i]], dtype=float)
    return _Window(cols["window_start"][i], cols["window_end"][i], cols["n"][i], versions,
                   newest, bool(cols["any_session"][i]), sums,
                   bool(all_binary(cols["n"][i], cols["recall_sum"][i], cols["full_sum"][i])),
                   size_histogram(cols["size_hist"][i], prefix, sums))


def size_histogram(rows: list[dict] | None, prefix: str,
                   sums: np.ndarray) -> np.ndarray | None:
    """A window's clusters by size for one metric (HIST_COLUMNS) from window_sums.size_hist;
    a window without it whose clusters are all single requests (or that has none) has them
    from its sums; None when it has sessions of more than one request but no histogram (a row
    of an earlier release: its pools fall back on CR1)."""
    if rows is None:
        if sums[N] == 0:
            return np.zeros((0, 4))
        if sums[MAX_SIZE] <= 1:
            return np.array([[1.0, sums[G], sums[TOTAL], sums[CSQ]]])
        return None
    return np.array([[r["size"], r["clusters"], r[f"{prefix}_s"], r[f"{prefix}_sq"]]
                     for r in rows], dtype=float).reshape(-1, 4)


def merge_histograms(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two histograms of clusters by size summed size by size."""
    if a.shape[0] <= 1 and b.shape[0] == 1 and (a.shape[0] == 0 or a[0, 0] == b[0, 0]):
        # one size on both sides (most windows): the sum below without sorting
        summed = np.zeros(3) + b[0, 1:] if a.shape[0] == 0 else np.zeros(3) + a[0, 1:] + b[0, 1:]
        return np.concatenate([b[0, :1], summed]).reshape(1, 4)
    both = np.concatenate([a, b])
    sizes, where = np.unique(both[:, 0], return_inverse=True)
    out = np.zeros((sizes.size, 4))
    out[:, 0] = sizes
    np.add.at(out[:, 1:], where, both[:, 1:])
    return out


def cr2_sums(hist: np.ndarray | None, n: float) -> np.ndarray:
    """The CR2 sums of `pipeline.stats.bias_reduced_t_interval` (and of
    `cluster_wilson_interval(cr2=...)`) over clusters by size, for a pooled total of `n`
    requests: (sum S_g^2 / (n - n_g), sum S_g n_g / (n - n_g), sum n_g^2 / (n - n_g),
    sum (n_g^2 / (n (n - n_g)))^2, max n_g), a cluster of all n requests weighing 0, as
    sql/window_metrics.sql sums them for one window. All NaN without a histogram."""
    if hist is None or not hist.size:
        return np.full(5, np.nan)
    if hist.shape[0] == 1 and n > 0:
        # one size of cluster (most windows: no sessions): the same sums without numpy's
        # per-call cost, which across thousands of slices was a fifth of drift's time
        size, clusters, s, s_sq = (float(x) for x in hist[0])
        w = 1.0 / max(n - size, 1.0) if size < n else 0.0
        q = size * size * w / n
        return np.array([s_sq * w, s * size * w, clusters * size * size * w,
                         clusters * (q * q), size])
    size, clusters, s, s_sq = hist.T
    with np.errstate(divide="ignore"):
        w = np.where(size < n, 1.0 / np.maximum(n - size, 1.0), 0.0)
    return np.array([np.sum(s_sq * w), np.sum(s * size * w), np.sum(clusters * size * size * w),
                     np.sum(clusters * (size * size * w / n) ** 2), size.max()])


def _new_series(key: tuple, config: Config, history: _History, first_seen: dict) -> _Series:
    """A series seen for the first time; a pinned baseline pools its member windows now."""
    series = _Series(key, config.baseline_for(key[0]))
    series.lag = trailing_gap(config, series.baseline)
    series.built_with = built_with(config, series.baseline)
    if series.baseline.kind in ("dates", "index"):
        pool = _Pool(("pinned",))
        cols, rows = history.of(key[:4])
        for i in rows:
            window = _window(cols, i, key[4], first_seen)
            if window.n > 0 and _pinned_member(series.baseline, window):
                pool.add(window)
        series.pinned = pool if pool.starts else None
    return series


def _pinned_member(b: Baseline, window: _Window) -> bool:
    if b.kind == "dates":
        return b.since <= window.start.date() < b.until
    return b.kind == "index" and window.versions == (b.version,)


def _epoch(b: Baseline, window: _Window) -> int:
    """How many days a person re-baselined the slice on are on or before the window's day:
    baselines never reach across such a day."""
    return sum(1 for day in b.restarts if day <= window.start.date())


def _prepare(s: _Series, window: _Window) -> _Item:
    """The baseline `window` is compared with (None while none exists); restarts the detector
    when that baseline differs from the one it ran against."""
    b = s.baseline
    pool: _Pool | None = None
    if b.kind == "first":
        epoch = _epoch(b, window)
        own = s.pools.get((epoch, window.version))
        if own is not None and len(own.starts) >= b.windows:
            pool = own
        elif s.complete is not None and s.complete.key[0] == epoch:
            pool = s.complete   # the previous version's, until this one's has formed
    elif b.kind == "trailing":
        recent = list(s.trailing)[:b.windows]
        if len(s.trailing) == b.windows + s.lag and all(v == window.version
                                                        for v, _ in s.trailing):
            pool = _Pool(("trailing", window.version))
            for _, member in recent:
                pool.add(member)
            s.complete = pool
        else:   # a new index version: the last full trailing baseline until its own fills
            pool = s.complete
    elif not _pinned_member(b, window):
        pool = s.pinned
    if pool is not None and pool.key != s.segment:
        s.segment, s.t, s.drop, s.rise = pool.key, 0, _Detector(), _Detector()
    return _Item(s, window, pool)


def _judge_window(items: list[_Item], config: Config, grain: str) -> list[dict]:
    """Rows for every series of one window: test those with a baseline and data, control false
    discoveries across slices, then update each series' episode and baseline."""
    judged = [it for it in items if it.pool is not None and it.window.n > 0]
    tests = _Tests.of(judged, config) if judged else None
    where = {id(it): j for j, it in enumerate(judged)}
    return [_row(it, where.get(id(it)), tests, config, grain) for it in items]


def _interval_of(sums: np.ndarray, is_mean: np.ndarray, any_session: np.ndarray,
                 alpha, cr2: np.ndarray | None = None) -> Interval:
    """Each group's own interval: for mean recall the cluster-robust t-interval with a 0 and a 1
    added (`adjusted_t_interval`), (cluster-)Wilson for a rate, as in window_metrics. With
    `cr2` (`cr2_sums` per group, NaN where none), a group whose sessions hold more than one
    request gets the bias-reduced (CR2) variance and Bell-McCaffrey degrees of freedom, as
    window_metrics gives one window (`bias_reduced_t_interval`)."""
    n, g, total, csq, cross, size_sq = (sums[:, j] for j in range(6))
    low = np.full(len(sums), np.nan)
    high = np.full(len(sums), np.nan)
    extra = None if cr2 is None else tuple(np.nan_to_num(cr2[:, j]) for j in range(5))
    if is_mean.any():
        with np.errstate(all="ignore"):
            mean = (adjusted_t_interval(n, g, total, csq, cross, size_sq, alpha) if extra is None
                    else bias_reduced_t_interval(n, g, total, csq, cross, size_sq, *extra,
                                                 alpha))
        low = np.where(is_mean, mean.low, low)
        high = np.where(is_mean, mean.high, high)
    if not is_mean.all():
        with np.errstate(all="ignore"):
            plain = wilson_interval(total, n, alpha)
            clustered = (cluster_wilson_interval(n, g, total, csq, cross, size_sq, alpha,
                                                 cr2=extra)
                         if any_session.any() else plain)
        low = np.where(is_mean, low, np.where(any_session, clustered.low, plain.low))
        high = np.where(is_mean, high, np.where(any_session, clustered.high, plain.high))
    return Interval(low, high)


def _residual(sums: np.ndarray) -> np.ndarray:
    """sum_g (S_g - n_g mean)^2: the spread of the session sums around the window's mean."""
    mean = sums[:, TOTAL] / np.maximum(sums[:, N], 1.0)
    return np.maximum(sums[:, CSQ] - 2.0 * mean * sums[:, CROSS] + mean * mean * sums[:, SIZE_SQ],
                      0.0)


@dataclass
class _Tests:
    """Everything tested at one window, one entry per judged series (vectorized)."""

    delta: np.ndarray
    fixed_low: np.ndarray     # the window alone vs its baseline, level 1 - alpha
    fixed_high: np.ndarray
    low: np.ndarray           # the row's interval (fixed, or the anytime detector's)
    high: np.ndarray
    drop: np.ndarray          # discoveries after BH / e-BH across slices
    rise: np.ndarray
    evidence: np.ndarray
    mdd: np.ndarray
    need: np.ndarray
    method: list[str]
    # anytime only: per series and direction, the detector carried on and restarted here
    carried: list = field(default_factory=list)
    restarted: list = field(default_factory=list)
    restarted_low: np.ndarray | None = None
    restarted_high: np.ndarray | None = None
    # series in an episode: the window with the episode's recovered windows before it, and the
    # interval of that stretch against the baseline (None when no series is in one)
    recovering: list | None = None
    back_low: np.ndarray | None = None
    back_high: np.ndarray | None = None

    @classmethod
    def of(cls, judged: list[_Item], config: Config) -> _Tests:
        alpha = DEFAULT_ALPHA
        base = np.array([it.pool.sums for it in judged])
        win = np.array([it.window.sums for it in judged])
        base_session = np.array([it.pool.any_session for it in judged])
        win_session = np.array([it.window.any_session for it in judged])
        # mean recall whose values are all 0 or 1 is a proportion, and its interval the
        # rates' (cluster-)Wilson: for the baseline's bound, and for a side of the fixed look
        base_mean = np.array([_as_mean(it.series.key[4], it.pool) for it in judged])
        win_mean = np.array([_as_mean(it.series.key[4], it.window) for it in judged])
        base_cr2 = np.array([cr2_sums(it.pool.hist, it.pool.sums[N]) for it in judged])
        win_cr2 = np.array([cr2_sums(it.window.hist, it.window.sums[N]) for it in judged])
        families: dict[tuple, list[int]] = {}
        for j, it in enumerate(judged):   # the slices of one route x k x gold x metric
            families.setdefault(it.series.key[1:], []).append(j)
        fixed = _fixed_look(base, win, base_session, win_session, base_mean, win_mean, config,
                            alpha, base_cr2, win_cr2)
        back: dict = {}
        if any(it.series.episode for it in judged):
            stretch = [_recovering(it) for it in judged]
            stretch_mean = np.array([_as_mean(it.series.key[4], p)
                                     for it, p in zip(judged, stretch, strict=True)])
            pooled = _fixed_look(base, np.array([p.sums for p in stretch]), base_session,
                                 np.array([p.any_session for p in stretch]), base_mean,
                                 stretch_mean, config, alpha, base_cr2,
                                 np.array([cr2_sums(p.hist, p.sums[N]) for p in stretch]))
            back = {"recovering": stretch, "back_low": pooled["low"],
                    "back_high": pooled["high"]}
        mode = config.drift_mode
        method = [_method(mode, it.series.key[4], it.pool, it.window) for it in judged]
        # the row's interval is built at the share of alpha its family's discoveries leave it
        # (_selected_share), so that it lies beyond the margin exactly when the day is flagged
        if mode == "fixed":
            drop = _per_family(families, lambda m: benjamini_hochberg(2 * fixed["p_drop"][m],
                                                                      alpha))
            rise = _per_family(families, lambda m: benjamini_hochberg(2 * fixed["p_rise"][m],
                                                                      alpha))
            share_rise, share_drop = (_selected_share(families, found, fixed[p])
                                      for found, p in ((rise, "p_rise"), (drop, "p_drop")))
            # one slice: the interval as computed; several: read at the level BH leaves it
            low = np.where(share_rise < 1.0, _fixed_bound(fixed, alpha * share_rise, "low"),
                           fixed["low"])
            high = np.where(share_drop < 1.0, _fixed_bound(fixed, alpha * share_drop, "high"),
                            fixed["high"])
            return cls(fixed["delta"], fixed["low"], fixed["high"], low, high,
                       drop, rise, np.where(fixed["delta"] < 0, fixed["p_drop"],
                                            fixed["p_rise"]),
                       fixed["mdd"], fixed["need"], method, **back)
        seq = _anytime(judged, base, win, base_session, base_mean, families, config, alpha)
        drop = _per_family(families, lambda m: e_benjamini_hochberg(seq["e_drop"][m], alpha / 4))
        rise = _per_family(families, lambda m: e_benjamini_hochberg(seq["e_rise"][m], alpha / 4))
        thresholds = {side: seq["log_threshold"]
                      - np.log(_selected_share(families, found, seq["e_" + side]))
                      for side, found in (("drop", drop), ("rise", rise))}
        edges, carried, restarted = _anytime_grids(judged, seq, thresholds)
        return cls(fixed["delta"], fixed["low"], fixed["high"], edges["grid_rise"],
                   edges["grid_drop"], drop, rise,
                   np.where(fixed["delta"] < 0, seq["e_drop"], seq["e_rise"]), seq["mdd"],
                   seq["need"], method, carried, restarted,
                   edges["restarted_grid_rise"], edges["restarted_grid_drop"], **back)


def _recovering(it: _Item) -> _Pool:
    """The window pooled with its series' recovered windows before it (those of the open
    episode since the last whose own difference lay beyond the margin), when they were compared
    with the same baseline."""
    stretch = _Pool(it.pool.key)
    before = it.series.recovered
    if it.series.episode and before is not None and before.key == it.pool.key:
        stretch.sums, stretch.any_session, stretch.binary, stretch.hist = (
            before.sums.copy(), before.any_session, before.binary, before.hist)
        stretch.starts, stretch.ends = list(before.starts), list(before.ends)
    stretch.add(it.window)
    return stretch


def _as_mean(metric: str, group: _Pool | _Window) -> bool:
    """Whether a baseline's or window's interval is (cluster-robust) t rather than
    (cluster-)Wilson: for mean recall, unless every recall in it is 0 or 1 or its recalls show
    no spread (all equal: a t-interval would be a point), as in window_metrics."""
    sums = group.sums
    return metric == "mean_recall" and not group.binary and not bool(
        no_spread(sums[N], sums[TOTAL], sums[CSQ], sums[CROSS], sums[SIZE_SQ]))


def _method(mode: str, metric: str, pool: _Pool, window: _Window) -> str:
    """drift_events.method: what the row's interval and test were built with."""
    if mode == "anytime":
        return METHODS[(mode, _as_mean(metric, pool))]
    base_mean = _as_mean(metric, pool)
    # a window without data is tested with nothing: its row names the baseline's kind
    win_mean = _as_mean(metric, window) if window.n else base_mean
    if base_mean and win_mean:
        return METHODS[(mode, True)]
    if base_mean or win_mean:   # one side a mean, the other a proportion
        return "mover_adjusted_t_wilson"
    return METHODS[(mode, False)]


def _per_family(families: dict, decide) -> np.ndarray:
    size = sum(len(members) for members in families.values())
    out = np.zeros(size, dtype=bool)
    for members in families.values():
        m = np.array(members)
        out[m] = decide(m)
    return out


def _fixed_look(base, win, base_session, win_session, base_mean, win_mean, config: Config,
                alpha: float, base_cr2: np.ndarray | None = None,
                win_cr2: np.ndarray | None = None) -> dict:
    """The interval of (window - baseline) at level 1 - alpha, one-sided p-values against the
    margin, and the drop a window like this one detects with 80 % power. Two means (t-based
    sides, `base_mean` and `win_mean`) are compared by cluster-robust Welch with 0s and 1s
    added to each side by its size (`adjusted_difference_interval`); otherwise the
    sides' own intervals are combined (Newcombe's hybrid for two proportions, the same MOVER
    construction for a mean and a proportion): a side whose recalls are all 0 or 1 has no
    spread for Welch to see (five requests that all found everything are not a certainty).
    With `base_cr2` and `win_cr2` (`cr2_sums` of each side's pooled clusters by size), a side
    whose sessions hold more than one request gets the bias-reduced (CR2) variance and
    Bell-McCaffrey degrees of freedom, Welch-Satterthwaite combining the two sides' (CR1 with
    G - 1 read a baseline or window one session dominates as far too certain)."""
    margin = config.drift_margin
    value = win[:, TOTAL] / win[:, N]
    base_value = base[:, TOTAL] / base[:, N]
    delta = value - base_value
    # two means: the difference of the sides with 0s and 1s added to each by its size
    # (after Agresti-Caffo), whose centre the p-values read too
    cr2 = None if base_cr2 is None else (tuple(base_cr2.T), tuple(win_cr2.T))
    mean_diff = adjusted_difference_interval(tuple(base[:, :6].T), tuple(win[:, :6].T), alpha,
                                             cr2=cr2)
    t_delta = np.asarray(mean_diff.delta, dtype=float)

    is_mean = base_mean & win_mean   # Welch
    rates = hybrid_difference_interval(
        base_value, _interval_of(base, base_mean, base_session, alpha, base_cr2),
        value, _interval_of(win, win_mean, win_session, alpha, win_cr2))
    # a difference of two values in [0, 1] lies in [-1, 1], as _fixed_bound clips it: a side of
    # two requests (t on 1 degree of freedom) reached [-2.2, 1.9] for a family of one slice
    low = np.clip(np.where(is_mean, mean_diff.low, rates.low), -1.0, 1.0)
    high = np.clip(np.where(is_mean, mean_diff.high, rates.high), -1.0, 1.0)
    se = np.asarray(mean_diff.se, dtype=float)
    df = np.where(np.isnan(np.asarray(mean_diff.df, dtype=float)), 1e6, mean_diff.df)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_drop = np.where(se > 0, sp.t.cdf((t_delta + margin) / se, df),
                          np.where(t_delta < -margin, 0.0, 1.0))
        p_rise = np.where(se > 0, sp.t.sf((t_delta - margin) / se, df),
                          np.where(t_delta > margin, 0.0, 1.0))
    # a rate's p-value reads the hybrid interval's own half-widths as standard errors: exact
    # where the bound meets the margin (so one slice's decision is the interval rule), close
    # elsewhere, and enough to rank slices for Benjamini-Hochberg
    z = float(sp.norm.isf(alpha / 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        rate_drop = sp.norm.cdf((delta + margin) / ((rates.high - delta) / z))
        rate_rise = sp.norm.sf((delta - margin) / ((delta - rates.low) / z))
    p_drop = np.where(is_mean, p_drop, np.where(rates.high - delta > 0, rate_drop,
                                                np.where(delta < -margin, 0.0, 1.0)))
    p_rise = np.where(is_mean, p_rise, np.where(delta - rates.low > 0, rate_rise,
                                                np.where(delta > margin, 0.0, 1.0)))
    undefined = np.isnan(low)
    quantile = np.where(is_mean, sp.t.isf(alpha / 2, df), z)
    se = np.where(is_mean, se, (rates.high - rates.low) / (2 * z))
    # the window's and the baseline's shares of the variance; the window's grows under a drop
    v_win = _half_width(_interval_of(win, win_mean, win_session, alpha, win_cr2), z) ** 2
    v_base = np.maximum(se * se - v_win, 0.0)
    mdd = margin + (quantile + Z_POWER) * se
    most = win[:, SIZE_SQ] / (win[:, N] * win[:, N])   # the mean's variance at most, per mu(1-mu)
    for _ in range(3):
        mdd = margin + (quantile + Z_POWER) * np.sqrt(
            v_base + _widened(v_win, mdd, base_value, most))
    with np.errstate(divide="ignore", invalid="ignore"):
        room = ((config.detectable_drop - margin) / (quantile + Z_POWER)) ** 2 - v_base
        need = np.where(room > 0, np.ceil(win[:, N] * v_win / room), np.nan)
    return {"delta": delta, "low": low, "high": high, "mdd": mdd, "need": need,
            "p_drop": np.where(undefined, np.nan, p_drop),
            "p_rise": np.where(undefined, np.nan, p_rise),
            # what the p-values read, for the interval at another level (_fixed_bound)
            "is_mean": is_mean, "t_delta": t_delta,
            "t_se": np.asarray(mean_diff.se, dtype=float), "df": df,
            "rate_up": rates.high - delta, "rate_down": delta - rates.low, "z": z}


def _fixed_bound(fixed: dict, alpha: np.ndarray, side: str) -> np.ndarray:
    """One side of the fixed look's interval at two-sided level 1 - alpha (per series), read
    as its p-value reads it: Welch's t with the same standard error and degrees of freedom,
    a rate's hybrid interval with its half-width scaled to the level's quantile. So the bound
    passes the margin exactly when the one-sided p-value falls below alpha / 2."""
    delta, sign = fixed["delta"], (1.0 if side == "high" else -1.0)
    half = fixed["rate_up"] if side == "high" else fixed["rate_down"]
    with np.errstate(divide="ignore", invalid="ignore"):
        welch = fixed["t_delta"] + sign * sp.t.isf(alpha / 2, fixed["df"]) * fixed["t_se"]
        rate = delta + sign * half * sp.norm.isf(alpha / 2) / fixed["z"]
    bound = np.where(fixed["is_mean"], welch, rate)
    return np.where(np.isnan(fixed[side]), np.nan, np.clip(bound, -1.0, 1.0))


def _edge(side: str, grid: np.ndarray, log_m_grid: np.ndarray, log_threshold: np.ndarray,
          lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """One side of the anytime interval: the differences of `grid` whose e-value reaches each
    series' `log_threshold` are ruled out; the smallest of them bounds the difference from
    above (drop side), the largest from below (rise side)."""
    ruled_out = log_m_grid >= log_threshold[:, None]
    if side == "drop":
        return np.minimum(np.where(ruled_out, grid, np.inf).min(axis=1), 1.0 - lower)
    return np.maximum(np.where(ruled_out, grid, -np.inf).max(axis=1), -upper)


def _selected_share(families: dict, found: np.ndarray, evidence: np.ndarray) -> np.ndarray:
    """Per series, R/m of its family (m slices with evidence — a p- or e-value, which BH and
    e-BH count —, R of them discoveries in one direction; R + 1 for a series not among them,
    at most m): the share of alpha its interval is built at, as false-coverage-rate intervals
    after selection (Benjamini and Yekutieli 2005; with e-values, Xu, Wang and Ramdas 2022).
    Then a series' interval lies beyond the margin exactly when it is a discovery: BH and e-BH
    reject at R/m of alpha, and a series they do not reject falls short of (R + 1)/m. One
    slice with evidence (m = 1), or none: 1, the unadjusted interval."""
    share = np.ones(len(found))
    counted = ~np.isnan(np.asarray(evidence, dtype=float))
    for members in families.values():
        idx = np.array(members)
        m = int(counted[idx].sum())
        if m == 0:
            continue
        r = int(found[idx].sum())
        share[idx] = np.where(counted[idx],
                              np.where(found[idx], r, min(r + 1, m)) / m, 1.0)
    return share


def _half_width(interval: Interval, z: float) -> np.ndarray:
    return (np.asarray(interval.high) - np.asarray(interval.low)) / (2 * z)


def _anytime(judged: list[_Item], base, win, base_session, is_mean, families: dict,
             config: Config, alpha: float) -> dict:
    """The detector's e-values against baseline-lower-bound - margin (drops) and
    baseline-upper-bound + margin (rises), and the drop it detects with 80 % power; with what
    `_anytime_grids` needs to run the detectors over the grid of differences, once the
    family's discoveries are known. Detector states are proposed there and committed by
    `_row`."""
    margin = config.drift_margin
    t = np.array([it.series.t + 1 for it in judged], dtype=float)
    trailing = np.array([it.series.baseline.kind == "trailing" for it in judged])
    # a frozen baseline's interval is one look; a trailing one moves every window and spends
    # alpha/2 over them
    base_alpha = np.where(trailing, alpha / 2 / (t * (t + 1)), alpha / 2)
    bounds = _interval_of(base, is_mean, base_session, base_alpha)
    lower = np.nan_to_num(np.asarray(bounds.low, dtype=float), nan=0.0)
    upper = np.nan_to_num(np.asarray(bounds.high, dtype=float), nan=1.0)
    base_value = base[:, TOTAL] / base[:, N]
    slack = margin + (base_value - lower)   # how far below the estimate the drop boundary is
    # the bet, sized before the window's values are seen: a drop `detectable_drop` past the
    # estimate, with the baseline's spread per request, on this window's session sizes
    scale = np.maximum(win[:, MAX_SIZE], 1.0)
    target = np.maximum(config.detectable_drop - slack, 0.01)
    expected_residual = _residual(base) * win[:, N] / base[:, N]
    lam = bernstein_bet(win[:, N] * target / scale,
                        (win[:, SIZE_SQ] * target * target + expected_residual) / scale ** 2)
    log_threshold = math.log(4.0 / alpha)
    grid = np.union1d(GRID, [-margin, margin])
    m = len(judged)
    window_sums = (win[:, N], win[:, TOTAL], win[:, SIZE_SQ], win[:, CROSS], win[:, CSQ], scale)
    residual = _residual(win)
    # what this window adds to a detector's pooled sums, in _Detector's order
    added = np.stack([win[:, N], win[:, N] / scale, win[:, SIZE_SQ] / scale ** 2,
                      residual / scale ** 2, residual, win[:, SIZE_SQ]], axis=1)
    out: dict = {}
    for side, bound, sign in (("drop", lower, -1.0), ("rise", upper, 1.0)):
        detectors = [getattr(it.series, side) for it in judged]
        exact = bernstein_log_evalue(bound + sign * margin, *window_sums, lam, side)
        new_s, log_m = mixture_update(np.array([d.log_s for d in detectors]), exact, t)
        out["e_" + side] = np.exp(np.minimum(log_m, 700.0))
        out["new_s_" + side] = new_s
        out["restarted_s_" + side] = mixture_update(np.full(m, -math.inf), exact, t)[0]
        out["before_" + side] = np.array([[d.n, d.linear, d.quadratic, d.residual, d.variance,
                                           d.size_sq] for d in detectors]).reshape(m, 6)
        out["start_" + side] = [d.start_t for d in detectors]
    out.update(grid=grid, lower=lower, upper=upper, log_threshold=log_threshold, t=t, lam=lam,
               window_sums=window_sums, added=added)
    # power: a drop this large, present since the drop detector (re)started, has reached the
    # threshold by now with 80 % probability — from the change-at-start term alone (weight
    # w_start) at the worst e-BH rank; every other term only adds evidence
    family_size = np.array([len(families[it.series.key[1:]]) for it in judged], dtype=float)
    pooled = np.column_stack([np.array(out["start_drop"], dtype=float).reshape(m),
                              out["before_drop"] + added]).T
    log_level = log_threshold + np.log(family_size) - np.log(change_weight(pooled[0]))

    def detectable(more: np.ndarray) -> np.ndarray:
        # the drop found with 80 % power once the pooled data are `more` times what they are;
        # the spread is taken at the lower level the drop would bring
        _, n, linear, quadratic, resid, variance, size_sq = pooled * more
        drop = np.full(m, config.detectable_drop)
        for _ in range(3):
            wide_resid = _widened(resid, drop, base_value, quadratic)
            wide_var = _widened(variance, drop, base_value, size_sq)
            shift = bernstein_shift_needed(lam, linear, quadratic, wide_resid, log_level)
            drop = slack + shift + Z_POWER * np.sqrt(wide_var) / np.maximum(n, 1.0)
            drop = np.where(np.isnan(drop), np.inf, drop)
        return drop

    mdd = detectable(np.ones(m))
    # requests still needed: bisection on how many times today's pooled data would do
    lo, hi = np.zeros(m), np.full(m, math.log(1e6))
    reachable = detectable(np.exp(hi)) <= config.detectable_drop
    for _ in range(40):
        mid = (lo + hi) / 2
        ok = detectable(np.exp(mid)) <= config.detectable_drop
        hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid)
    need = np.where(reachable, np.ceil((np.exp(hi) - 1.0) * pooled[1]), np.nan)
    return {**out, "mdd": np.where(np.isinf(mdd), np.nan, mdd), "need": need}


# series whose detectors run over the grid together: a (series x grid) array of them is 3 MB,
# where a window of many slices at once (63,000 series: 3,000 tag values x 7 cutoffs x 3
# metrics) made arrays of 200 MB, a dozen of them alive together
GRID_ROWS = 1024


def _anytime_grids(judged: list[_Item], seq: dict, thresholds: dict) -> tuple[dict, list, list]:
    """The detectors run over the grid of differences: each side of the anytime interval
    (`_edge`, at each series' threshold in `thresholds`) and the proposed detector states,
    carried on for every series; restarted here only where `_row` may read them: the interval
    of a series in an open episode (its end restarts a detector, and its interval with it) or
    whose sides cross (`_one_interval`). Elsewhere the restarted bounds are NaN."""
    m, grid = len(judged), seq["grid"]
    edges = {name: np.full(m, np.nan) for name in ("grid_drop", "grid_rise",
                                                   "restarted_grid_drop",
                                                   "restarted_grid_rise")}
    carried: list[dict] = [{} for _ in range(m)]
    restarted: list[dict] = [{} for _ in range(m)]

    def on_grid(rows, side: str) -> np.ndarray:
        bound = seq["lower"] if side == "drop" else seq["upper"]
        return bernstein_log_evalue(bound[rows, None] + grid,
                                    *(x[rows, None] for x in seq["window_sums"]),
                                    seq["lam"][rows, None], side)

    def edge(name: str, side: str, rows, log_m: np.ndarray) -> None:
        # the e-values of the grid's differences: those reaching the threshold its family's
        # discoveries set are ruled out, bounding the difference
        edges[name + side][rows] = _edge(side, grid, log_m, thresholds[side][rows],
                                         seq["lower"][rows], seq["upper"][rows])

    for first in range(0, m, GRID_ROWS):
        rows = np.arange(first, min(first + GRID_ROWS, m))
        for side in ("drop", "rise"):
            grids = [getattr(judged[j].series, side).log_s_grid for j in rows]
            carried_grid = np.array([np.full(grid.size, -math.inf) if g is None else g
                                     for g in grids])
            new_grid, log_m = mixture_update(carried_grid, on_grid(rows, side),
                                             seq["t"][rows, None])
            edge("grid_", side, rows, log_m)
            # each detector keeps a copy of its own row: a view would keep the chunk's whole
            # (series x grid) array alive for as long as any series of it is not judged again
            # (a slice absent on later days)
            for offset, j in enumerate(rows):
                carried[j][side] = _Detector(
                    float(seq["new_s_" + side][j]), new_grid[offset].copy(),
                    int(seq["start_" + side][j]),
                    *(seq["before_" + side][j] + seq["added"][j]))
    episode = np.array([it.series.episode is not None for it in judged])
    low, high = edges["grid_rise"], edges["grid_drop"]
    with np.errstate(invalid="ignore"):
        crossed = np.isfinite(low) & np.isfinite(high) & (low > high)
    needed = np.flatnonzero(episode | crossed)
    for first in range(0, needed.size, GRID_ROWS):
        rows = needed[first:first + GRID_ROWS]
        for side in ("drop", "rise"):
            fresh = np.full((rows.size, grid.size), -math.inf)
            new_grid, log_m = mixture_update(fresh, on_grid(rows, side), seq["t"][rows, None])
            edge("restarted_grid_", side, rows, log_m)
            for offset, j in enumerate(rows):
                if judged[j].series.episode == side:
                    restarted[j][side] = _Detector(
                        float(seq["restarted_s_" + side][j]), new_grid[offset].copy(),
                        int(seq["t"][j]), *(np.zeros(6) + seq["added"][j]))
    return edges, carried, restarted


def _widened(var, drop, level, most) -> np.ndarray:
    """A variance `var` measured at mean `level`, as it would be after a drop of `drop`: scaled
    by mu (1 - mu), the shape of the variance of data in [0, 1], never below `var` and never
    above `most` times the lower mean's mu (1 - mu), the largest it can be there."""
    level = np.asarray(level, dtype=float)
    lowered = np.clip(level - np.asarray(drop, dtype=float), 0.0, 1.0)
    ceiling = lowered * (1.0 - lowered) * np.asarray(most, dtype=float)
    shape = level * (1.0 - level)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.where(shape > 1e-9, var * lowered * (1.0 - lowered) / shape, ceiling)
    return np.maximum(var, np.minimum(scaled, np.maximum(ceiling, var)))


def _episode_id(key: tuple, grain: str, start: datetime, kind: str) -> str:
    text = "\x1f".join(map(str, (*key, grain, start.isoformat(), kind)))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _row(it: _Item, j: int | None, tests: _Tests | None, config: Config, grain: str) -> dict:
    """The drift_events row of one series' window; moves the series' episode, detector and
    baseline on."""
    s, window, pool = it.series, it.window, it.pool
    margin = config.drift_margin
    metric = s.key[4]
    row = {
        "window_start": window.start, "window_end": window.end, "grain": grain,
        "slice": s.key[0], "route": s.key[1], "k": s.key[2], "gold_version": s.key[3],
        "metric": metric, "index_version": window.version,
        "change_point": s.last_version is not None and window.version != s.last_version,
        "n": window.n, "baseline_start": None, "baseline_end": None, "baseline_n": None,
        "value": float(window.sums[TOTAL] / window.n) if window.n else None,
        "baseline_value": None, "delta": None, "delta_low": None, "delta_high": None,
        "margin": margin, "method": "none", "evidence": None, "decision": "baseline",
        "state": "none", "episode_id": None, "min_detectable_delta": None, "n_needed": None,
        "built_with": s.built_with,
    }
    s.last_version = window.version
    if window.n == 0:
        row["decision"] = "insufficient"   # nothing scored: it forms no baseline either
    if pool is not None:
        row.update(baseline_start=pool.starts[0], baseline_end=max(pool.ends),
                   baseline_n=int(pool.sums[N]),
                   baseline_value=float(pool.sums[TOTAL] / pool.sums[N]),
                   decision="insufficient",   # unless the window has data to judge
                   method=_method(config.drift_mode, metric, pool, window))
    if j is not None:
        _decide(row, j, tests, config)
    _follow_episode(s, row, j, tests, pool, margin, grain)
    if j is not None and tests.carried:
        _one_interval(row, j, tests)
        s.t += 1
        for side in ("drop", "rise"):
            restart = row["state"] == "resolved" and side == row["episode_kind"]
            setattr(s, side, (tests.restarted if restart else tests.carried)[j][side])
    row.pop("episode_kind", None)
    _grow_baseline(s, window, row)
    return row


def _decide(row: dict, j: int, tests: _Tests, config: Config) -> None:
    delta = float(tests.delta[j])
    low, high = float(tests.low[j]), float(tests.high[j])
    mdd, need = float(tests.mdd[j]), float(tests.need[j])
    if tests.drop[j] and delta < 0:
        decision = "drop"
    elif tests.rise[j] and delta > 0:
        decision = "rise"
    elif math.isnan(mdd) or mdd > config.detectable_drop or math.isnan(tests.fixed_low[j]):
        decision = "insufficient"
    else:
        decision = "stable"
    row.update(delta=delta, delta_low=_finite(low), delta_high=_finite(high),
               method=tests.method[j], evidence=_finite(float(tests.evidence[j])),
               min_detectable_delta=_finite(mdd), decision=decision,
               n_needed=int(need) if decision == "insufficient" and not math.isnan(need)
               else None)


def _follow_episode(s: _Series, row: dict, j: int | None, tests: _Tests | None, pool,
                    margin: float, grain: str) -> None:
    """Open an episode on a drop or rise; end it at the first window whose own interval, or
    its recovered stretch's (the episode's windows since the last whose own difference lay
    beyond the margin, pooled), shows the difference back within the margin, or on the day a
    person re-baselined the slice. A window with nothing to compare (no data, or no baseline
    yet) leaves it open."""
    row["episode_kind"] = s.episode
    if s.episode is None:
        if row["decision"] in ("drop", "rise"):
            s.episode = row["decision"]
            s.episode_opened = row["window_start"]
            s.episode_id = _episode_id(s.key, grain, row["window_start"], s.episode)
            s.recovered = None
            row.update(state="opened", episode_id=s.episode_id)
        return
    restarts = s.baseline.restarts if s.baseline.kind == "first" else ()
    if any(s.episode_opened.date() < day <= row["window_start"].date() for day in restarts):
        back = True   # re-baselined after the episode opened: the new level is accepted
    elif j is not None:
        # the window's own interval within the margin, or its recovered stretch's
        back = bool(tests.fixed_low[j] > -margin or tests.back_low[j] > -margin
                    if s.episode == "drop"
                    else tests.fixed_high[j] < margin or tests.back_high[j] < margin)
    else:
        back = False
    if not back:
        row.update(state="ongoing", episode_id=s.episode_id)
        if j is not None:   # a window still beyond the margin starts the stretch again
            beyond = (tests.delta[j] <= -margin if s.episode == "drop"
                      else tests.delta[j] >= margin)
            s.recovered = None if beyond else tests.recovering[j]
        return
    row.update(state="resolved", episode_id=s.episode_id)
    if j is not None and tests.carried:
        # the interval restarts with the detector, without the episode's old evidence
        if s.episode == "drop":
            row["delta_high"] = _finite(float(tests.restarted_high[j]))
        else:
            row["delta_low"] = _finite(float(tests.restarted_low[j]))
    if row["decision"] == s.episode:   # the detector's old evidence, not this window's
        row["decision"] = "stable"
    s.episode, s.episode_id, s.recovered = None, None, None


def _one_interval(row: dict, j: int, tests: _Tests) -> None:
    """Each side of the anytime interval is its detector's, mixed over change starts, so the
    two can rest on different stretches of windows: in a drop after a long stable stretch the
    rise detector still rules out the stretch's level while the drop detector rules out
    today's. Crossed (low above high), they describe no one difference: the row gives this
    window's own anytime interval instead, both sides restarted here, which never cross, but
    on a flagged window the flagged side keeps its detector's bound, the one that flagged it
    (a drop stays wholly below -margin, a rise above it), the other side reaching it at least."""
    low, high = row["delta_low"], row["delta_high"]
    if low is not None and high is not None and low > high:
        fresh_low = _finite(float(tests.restarted_low[j]))
        fresh_high = _finite(float(tests.restarted_high[j]))
        if row["decision"] == "drop":
            row.update(delta_low=high if fresh_low is None else min(fresh_low, high))
        elif row["decision"] == "rise":
            row.update(delta_high=low if fresh_high is None else max(fresh_high, low))
        else:
            row.update(delta_low=fresh_low, delta_high=fresh_high)


def _grow_baseline(s: _Series, window: _Window, row: dict) -> None:
    """A window with data, served by one index version, outside an open drop and not itself
    judged a drop, joins the baseline being formed. A drop keeps its windows out, so that a
    lasting drop stays flagged, and so does a window that ended a rise by falling below the
    baseline (its own decision a drop; the drop opens with the next). A rise does not: a
    rebuild that raised recall opened a rise against the previous version's baseline and
    kept its own first windows from forming one, until recall fell again and the fallen days
    formed it, so that no later drop was ever flagged."""
    if window.n == 0 or len(window.versions) != 1 or row["decision"] == "drop" or (
            row["state"] in ("opened", "ongoing") and s.episode == "drop"):
        return
    b = s.baseline
    if b.kind == "first":
        key = (_epoch(b, window), window.version)
        pool = s.pools.setdefault(key, _Pool(key))
        if len(pool.starts) < b.windows:
            pool.add(window)
            if len(pool.starts) == b.windows:
                s.complete = pool
    elif b.kind == "trailing":
        s.trailing.append((window.version, window))
        while len(s.trailing) > b.windows + s.lag:
            s.trailing.popleft()


def _finite(x: float | None) -> float | None:
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
