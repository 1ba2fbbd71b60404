"""Window metrics: the intervals stored in window_metrics equal a reference implementation's
(statsmodels) computed from the request-level recalls, slices are complete, and a window range
is replaced whole."""

from __future__ import annotations

import math
import tracemalloc
from datetime import datetime

import numpy as np
import pyarrow as pa
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from pipeline.aggregate import _with_intervals, aggregate
from pipeline.config import put_in_force, resolve
from pipeline.errors import RecallwatchError
from pipeline.ingest import ingest_gold, ingest_logs
from pipeline.score import score
from pipeline.stats import (
    cluster_sufficient_stats,
    cluster_wilson_interval,
    cr2_sufficient_stats,
)
from pipeline.warehouse import run_script
from tests.conftest import golden, request, snapshot, write_jsonl


def world(con, tmp_path, sessions: bool, n: int = 40, seed: int = 3):
    rng = np.random.default_rng(seed)
    goldens = [golden(f"g-{i}", [f"c{i}-{j}" for j in range(4)], question=f"q{i}")
               for i in range(10)]
    records = []
    for r in range(n):
        g = int(rng.integers(10))
        chunks = [f"c{g}-{j}" for j in range(4) if rng.random() < 0.6] + ["noise"]
        extra = {"session_id": f"s-{r // 3}"} if sessions and r % 5 else {}
        records.append(request(f"r-{r}", list(rng.permutation(chunks)), gold_id=f"g-{g}",
                               ts=f"2026-11-01T{r % 24:02d}:00:00Z",
                               tags={"tenant": "acme" if r % 2 else "globex"}, **extra))
    write_jsonl(tmp_path / "gold.jsonl", goldens)
    write_jsonl(tmp_path / "logs.jsonl", records)
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])
    score(con)
    put_in_force(con, resolve(con, pass_mark=0.5))
    aggregate(con)


def recalls(con, k: int, tenant: str | None = None):
    rows = con.execute("""
        SELECT rk.recall, coalesce('s:' || r.session_id, 'r:' || r.request_id)
        FROM recall_at_k rk JOIN requests r USING (request_id)
        WHERE rk.k = $k AND ($tenant IS NULL OR r.tags['tenant'] = $tenant)
        ORDER BY r.request_id""", {"k": k, "tenant": tenant}).fetchall()
    return np.array([r[0] for r in rows]), np.array([r[1] for r in rows])


def metrics(con, k: int, slice_: str = "all"):
    cursor = con.execute("SELECT * FROM window_metrics WHERE k = $k AND slice = $s",
                         {"k": k, "s": slice_})
    names = [d[0] for d in cursor.description]
    return dict(zip(names, cursor.fetchall()[0], strict=True))


def adjusted_reference(y: np.ndarray, groups: np.ndarray) -> tuple[float, float]:
    """The t-interval of the recalls with a 0 and a 1 added, each a cluster of its own: the
    variance from statsmodels' cluster-robust OLS on that sample, the t quantile on the
    observed clusters' degrees of freedom (G - 1)."""
    codes = np.unique(groups, return_inverse=True)[1]
    augmented = np.append(y, [0.0, 1.0])
    fit = sm.OLS(augmented, np.ones(len(augmented))).fit(
        cov_type="cluster", cov_kwds={"groups": np.append(codes, [codes.max() + 1,
                                                                   codes.max() + 2])})
    half = stats.t.isf(0.025, codes.max()) * fit.bse[0]
    return max(fit.params[0] - half, 0.0), min(fit.params[0] + half, 1.0)


@pytest.mark.parametrize("slice_,tenant", [("all", None), ("tenant=acme", "acme")])
def test_mean_interval_is_the_t_interval_with_a_0_and_a_1_added_without_sessions(
        con, tmp_path, slice_, tenant):
    world(con, tmp_path, sessions=False)
    y, groups = recalls(con, 3, tenant)
    row = metrics(con, 3, slice_)
    assert row["ci_method"] == "adjusted_t"
    assert row["n"] == len(y) and row["mean_recall"] == pytest.approx(y.mean(), abs=1e-12)
    # without sessions: the plain t-interval of the n + 2 values, on n - 1 degrees of freedom
    augmented = np.append(y, [0.0, 1.0])
    half = stats.t.isf(0.025, len(y) - 1) * augmented.std(ddof=1) / math.sqrt(len(augmented))
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(
        (max(augmented.mean() - half, 0.0), min(augmented.mean() + half, 1.0)), abs=1e-9)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(adjusted_reference(y, groups),
                                                            abs=1e-6)
    # wider than the t-interval of the recalls alone, and around their mean
    low, high = sm.stats.DescrStatsW(y).tconfint_mean(0.05)
    assert row["ci_low"] < max(low, 0.0) and row["ci_high"] >= min(high, 1.0) - 1e-12
    assert row["ci_low"] < row["mean_recall"] < row["ci_high"]


def bias_reduced_reference(y: np.ndarray, groups: np.ndarray) -> tuple[float, float]:
    """The CR2 (Bell-McCaffrey) interval of the recalls with a 0 and a 1 added, from the
    matrices: each observed cluster's residuals (around the augmented mean) through
    (I - H_gg)^(-1/2) of the observed design H = 1 1' / n, the added values as singletons of the
    augmented design; the degrees of freedom (sum lambda)^2 / sum lambda^2 over the eigenvalues
    of the observed design's G' G (working independence)."""
    codes = np.unique(groups, return_inverse=True)[1]
    n, clusters = len(y), codes.max() + 1
    ybar = (y.sum() + 1.0) / (n + 2)
    meat = 0.0
    columns = []
    for g in range(clusters):
        members = codes == g
        m = int(members.sum())
        vals, vecs = np.linalg.eigh(np.eye(m) - np.ones((m, m)) / n)
        adjust = vecs @ np.diag(vals ** -0.5) @ vecs.T
        meat += float(np.ones(m) @ adjust @ (y[members] - ybar)) ** 2
        column = np.zeros(n)   # (I - H) applied to the cluster's adjusted contrast, over n
        column[members] = np.ones(m) @ adjust
        columns.append((column - column.sum() / n) / n)
    meat += (n + 2) / (n + 1) * (ybar ** 2 + (1 - ybar) ** 2)
    lam = np.linalg.eigvalsh(np.array(columns) @ np.array(columns).T)
    half = stats.t.isf(0.025, lam.sum() ** 2 / (lam ** 2).sum()) * math.sqrt(meat) / (n + 2)
    return max(ybar - half, 0.0), min(ybar + half, 1.0)


def test_mean_interval_with_sessions_is_bias_reduced_with_a_0_and_a_1_added(con, tmp_path):
    # CR2 with Bell-McCaffrey degrees of freedom where a session holds more than one request
    # (it was CR1 with G - 1, adjusted_reference: a window one session dominates undercovered)
    world(con, tmp_path, sessions=True)
    y, groups = recalls(con, 3)
    row = metrics(con, 3)
    assert row["ci_method"] == "cluster_adjusted_t"
    assert row["n_sessions"] == len(set(groups)) < len(y)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(bias_reduced_reference(y, groups),
                                                            abs=1e-6)
    # nearly equal sessions: within a few percent of the CR1 interval
    cr1 = adjusted_reference(y, groups)
    assert abs((row["ci_high"] - row["ci_low"]) / (cr1[1] - cr1[0]) - 1) < 0.05


def test_size_histogram_gives_the_windows_cr2_sums(con, tmp_path):
    # window_sums.size_hist adds up across days where the CR2 sums do not; for one window it
    # gives back that window's own CR2 sums (pipeline.drift.cr2_sums), for every metric
    from pipeline.drift import SUMS_OF, cr2_sums, size_histogram
    world(con, tmp_path, sessions=True)
    y, groups = recalls(con, 3)
    hist, n = con.execute("SELECT size_hist, n FROM window_sums WHERE slice = 'all' AND k = 3"
                          ).fetchone()
    assert n == len(y) and sum(h["size"] * h["clusters"] for h in hist) == n
    for metric, values in (("mean_recall", y), ("pass_rate", (y >= 0.5) * 1.0),
                           ("full_coverage_rate", (y >= 1.0) * 1.0)):
        got = cr2_sums(size_histogram(hist, SUMS_OF[metric], np.zeros(7)), float(n))
        want = cr2_sufficient_stats(values, groups)
        assert got[:2] == pytest.approx(want[:2], rel=1e-12)
        assert got[2:] == pytest.approx(cr2_sufficient_stats(y, groups)[2:], rel=1e-12)


def test_pass_rate_and_full_coverage_use_wilson_without_sessions(con, tmp_path):
    world(con, tmp_path, sessions=False)
    y, _ = recalls(con, 5)
    row = metrics(con, 5)
    passed, full = int((y >= 0.5).sum()), int((y >= 1.0).sum())
    assert row["pass_rate"] == passed / len(y) and row["pass_mark"] == 0.5
    assert row["rate_ci_method"] == "wilson"
    assert (row["pass_ci_low"], row["pass_ci_high"]) == pytest.approx(
        proportion_confint(passed, len(y), 0.05, method="wilson"), abs=1e-6)
    assert (row["fc_ci_low"], row["fc_ci_high"]) == pytest.approx(
        proportion_confint(full, len(y), 0.05, method="wilson"), abs=1e-6)


def test_rates_of_requests_in_sessions_use_the_effective_sample_size(con, tmp_path):
    world(con, tmp_path, sessions=True)
    y, groups = recalls(con, 5)
    row = metrics(con, 5)
    assert row["pass_rate"] == (y >= 0.5).mean() and row["rate_ci_method"] == "cluster_wilson"
    for indicator, low, high in (((y >= 0.5), "pass_ci_low", "pass_ci_high"),
                                 ((y >= 1.0), "fc_ci_low", "fc_ci_high")):
        want = cluster_wilson_interval(*cluster_sufficient_stats(indicator, groups),
                                       cr2=_cr2_of(indicator, groups, y))
        assert (row[low], row[high]) == pytest.approx(want, abs=1e-9)
        plain = proportion_confint(int(indicator.sum()), len(y), 0.05, method="wilson")
        assert row[high] - row[low] > plain[1] - plain[0]   # sessions widen it


def _cr2_of(indicator: np.ndarray, groups: np.ndarray, y: np.ndarray) -> tuple[float, ...]:
    """An indicator's own CR2 sums with the size sums and max size of the window's recalls."""
    own, sizes = cr2_sufficient_stats(indicator, groups), cr2_sufficient_stats(y, groups)
    return own[:2] + sizes[2:]


def test_slices_cover_all_index_versions_and_tags(con, tmp_path):
    world(con, tmp_path, sessions=False)
    slices = {r[0] for r in con.sql("SELECT DISTINCT slice FROM window_metrics").fetchall()}
    assert slices == {"all", "index_version=idx-1", "tenant=acme", "tenant=globex"}
    n_all = metrics(con, 5)["n"]
    assert metrics(con, 5, "tenant=acme")["n"] + metrics(con, 5, "tenant=globex")["n"] == n_all


def test_hourly_windows_partition_the_day(con, tmp_path):
    world(con, tmp_path, sessions=False)
    aggregate(con, grain="hour")
    total = con.sql("SELECT sum(n) FROM window_metrics WHERE grain = 'hour' AND slice = 'all' "
                    "AND k = 5").fetchall()[0][0]
    assert total == metrics(con, 5)["n"]
    assert con.sql("SELECT count(DISTINCT window_start) FROM window_metrics WHERE grain = 'hour'"
                   ).fetchall()[0][0] == 24


def test_aggregating_twice_changes_nothing(con, tmp_path):
    world(con, tmp_path, sessions=True)
    before = snapshot(con)
    aggregate(con)
    assert snapshot(con) == before


def test_single_request_window_has_no_mean_interval(con, tmp_path):
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"])])
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])
    score(con)
    aggregate(con)
    row = metrics(con, 5)
    assert row["n"] == 1 and row["mean_recall"] == 0.5
    assert row["ci_low"] is None and row["ci_high"] is None  # undefined at n = 1, not [0.5, 0.5]
    assert (row["pass_ci_low"], row["pass_ci_high"]) == pytest.approx(
        proportion_confint(0, 1, 0.05, method="wilson"), abs=1e-6)


def test_unknown_grain_is_a_clear_error(con):
    with pytest.raises(RecallwatchError, match="--window 'week'"):
        aggregate(con, grain="week")


def loaded(con, tmp_path, records, goldens=None):
    """The gold set (one golden of chunks a, b unless given) and `records` ingested."""
    write_jsonl(tmp_path / "gold.jsonl", goldens or [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs.jsonl", records)
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])


def small(con, tmp_path, records, goldens=None):
    loaded(con, tmp_path, records, goldens)
    score(con)
    aggregate(con)


def test_unaligned_bounds_recompute_whole_windows(con, tmp_path):
    from datetime import datetime

    small(con, tmp_path, [request("r-1", ["a", "b"], ts="2026-11-01T08:00:00Z"),
                          request("r-2", [], ts="2026-11-01T16:00:00Z")])
    before = snapshot(con)
    aggregate(con, start=datetime(2026, 11, 1, 12), end=datetime(2026, 11, 2))
    assert snapshot(con) == before
    assert metrics(con, 5)["n"] == 2


def test_window_with_only_excluded_requests_is_counted(con, tmp_path):
    small(con, tmp_path, [
        request("r-1", ["a"], ts="2026-11-01T08:00:00Z"),
        request("r-2", ["a"], ts="2026-11-02T08:00:00Z", gold_id="g-404"),
        request("r-3", ["a"], ts="2026-11-02T09:00:00Z", gold_id="g-2"),
    ], goldens=[golden("g-1", ["a", "b"]), golden("g-2", [], question="q2")])
    rows = con.sql("SELECT window_start::DATE::VARCHAR, n, n_excluded, mean_recall, ci_low, "
                   "pass_rate, gold_version FROM window_metrics "
                   "WHERE slice = 'all' AND k = 5 ORDER BY 1").fetchall()
    assert rows == [("2026-11-01", 1, 0, 0.5, None, 0.0, "v1"),
                    ("2026-11-02", 0, 2, None, None, None, "v1")]


def test_a_tag_named_like_a_builtin_slice_does_not_double_count(con, tmp_path):
    small(con, tmp_path, [request(f"r-{i}", ["a"], tags={"index_version": "idx-1", "all": "x"})
                          for i in range(2)])
    slices = dict(con.sql("SELECT slice, n FROM window_metrics WHERE k = 5").fetchall())
    assert slices == {"all": 2, "index_version=idx-1": 2, "tag.index_version=idx-1": 2,
                      "tag.all=x": 2}


def test_empty_range_is_a_clear_error(con, tmp_path):
    from datetime import datetime

    small(con, tmp_path, [request("r-1", ["a"])])
    with pytest.raises(RecallwatchError, match="the window is empty"):
        aggregate(con, start=datetime(2026, 11, 5), end=datetime(2026, 11, 1))


def test_tags_with_equals_signs_prefixes_or_nulls_never_share_a_slice(con, tmp_path):
    small(con, tmp_path, [
        request("r-1", ["a"], tags={"a=b": "c"}),
        request("r-2", ["a"], tags={"a": "b=c"}),
        request("r-3", ["a"], tags={"tag.all": "x"}),
        request("r-4", ["a"], tags={"all": "x"}),
        request("r-5", ["a"], tags={"z": None}),
        request("r-6", ["a"], tags={"z": "null"}),
    ])
    slices = dict(con.sql("SELECT slice, n FROM window_metrics WHERE k = 5").fetchall())
    assert slices == {"all": 6, "index_version=idx-1": 6, "a\\=b=c": 1, "a=b=c": 1,
                      "tag.tag.all=x": 1, "tag.all=x": 1, "z=null": 1}


# --- coverage of every stored interval, by simulation --------------------------------------

A, B = 4.0, 1.5   # each session's chance p ~ Beta(A, B); a request's recall is Bin(4, p) / 4


def _beta_moment(power: int) -> float:
    return math.prod((A + i) / (A + B + i) for i in range(power))


TRUE_MEAN = _beta_moment(1)
TRUE_FULL = _beta_moment(4)                                    # all four gold chunks found
TRUE_PASS = 4 * (_beta_moment(3) - _beta_moment(4)) + TRUE_FULL   # recall >= 0.7: 3 or 4 of 4


def _simulated_windows(rng, windows: int, per_day: int, sessions: bool, chunks: int = 4,
                       a: float = A, b: float = B, draw=None,
                       layout: list[int] | None = None) -> pa.Table:
    """window_metrics.sql's result for simulated windows: sessions of 1-7 requests sharing p
    (intra-session correlation ~0.15 for recall), or of the sizes `layout` gives, or every
    request on its own; a request's recall is Bin(chunks, p) / chunks with p ~ Beta(a, b), or
    `draw(rng, p)`."""
    sizes = rng.integers(1, 8, size=(windows, per_day)) if sessions else \
        np.ones((windows, per_day), dtype=int)
    rows = []
    for w in range(windows):
        size = sizes[w][np.cumsum(sizes[w]) <= per_day] if sessions else sizes[w]
        size = np.append(size, per_day - size.sum()) if size.sum() < per_day else size
        size = np.array(layout) if layout is not None else size[size > 0]
        p = np.repeat(rng.beta(a, b, size=size.size), size)
        recall = draw(rng, p) if draw else rng.binomial(chunks, p) / chunks
        cluster = np.repeat(np.arange(size.size), size)
        s_g = np.bincount(cluster, recall)
        pass_g = np.bincount(cluster, recall >= 0.7)
        full_g = np.bincount(cluster, recall >= 1.0)
        rows.append({
            "n": per_day, "mean_recall": recall.mean(), "recall_sum": recall.sum(),
            "var_recall": recall.var(ddof=1),
            "n_pass": int((recall >= 0.7).sum()), "n_full": int((recall >= 1.0).sum()),
            "any_session": sessions, "n_clusters": size.size,
            "sum_cluster_sq": float(s_g @ s_g), "sum_cluster_cross": float(s_g @ size),
            "sum_size_sq": int(size @ size), "pass_cluster_sq": float(pass_g @ pass_g),
            "pass_cluster_cross": float(pass_g @ size), "full_cluster_sq": float(full_g @ full_g),
            "full_cluster_cross": float(full_g @ size), "max_size": int(size.max()),
            **dict(zip(("cr2_cluster_sq", "cr2_cluster_cross", "cr2_size_sq", "cr2_size_b2"),
                       cr2_sufficient_stats(recall, cluster)[:4], strict=True)),
            **dict(zip(("cr2_pass_cluster_sq", "cr2_pass_cluster_cross"),
                       cr2_sufficient_stats(recall >= 0.7, cluster)[:2], strict=True)),
            **dict(zip(("cr2_full_cluster_sq", "cr2_full_cluster_cross"),
                       cr2_sufficient_stats(recall >= 1.0, cluster)[:2], strict=True))})
    table = pa.Table.from_pylist(rows)
    extra = {"window_start": pa.array([datetime(2026, 1, 1)] * windows, pa.timestamp("us")),
             "slice": ["all"] * windows, "route": ["ids"] * windows, "k": [5] * windows,
             "gold_version": ["g"] * windows, "mean_precision": [0.5] * windows,
             "index_versions": [["v"]] * windows, "max_index_size": [1] * windows,
             "n_excluded": [0] * windows}
    for name, values in extra.items():
        table = table.append_column(name, pa.array(values) if isinstance(values, list)
                                    else values)
    return table


def _stored_coverage(table: pa.Table, truth: tuple[float, float, float] = (
        TRUE_MEAN, TRUE_PASS, TRUE_FULL)) -> dict[str, float]:
    metrics = _with_intervals(table, "day", 0.7, 0.05).to_pydict()

    def share(low, high, true):
        # a NULL bound (an undefined interval) covers nothing
        return float(np.mean([lo is not None and hi is not None and lo <= true <= hi
                              for lo, hi in zip(metrics[low], metrics[high], strict=True)]))

    return {"mean_recall": share("ci_low", "ci_high", truth[0]),
            "pass_rate": share("pass_ci_low", "pass_ci_high", truth[1]),
            "full_coverage_rate": share("fc_ci_low", "fc_ci_high", truth[2])}


@pytest.mark.parametrize("sessions, per_day", [(False, 5), (True, 12)],
                         ids=["5-requests", "12-requests-in-sessions"])
def test_a_small_window_whose_recalls_are_all_equal_is_not_a_point(sessions, per_day):
    # two gold chunks per golden, one found by 95 % of requests and none by the rest (true
    # mean 0.475): a t-interval put [0.5, 0.5] on every window whose recalls were all 0.5 and
    # covered the true mean ~23 % of the time
    table = _simulated_windows(np.random.default_rng(24), 2000, per_day, sessions,
                               draw=lambda rng, p: np.where(rng.random(p.size) < 0.05, 0.0, 0.5))
    assert _stored_coverage(table, (0.475, 0.0, 0.0))["mean_recall"] >= 0.93
    metrics = _with_intervals(table, "day", 0.7, 0.05).to_pydict()
    flat = [i for i, mean in enumerate(metrics["mean_recall"]) if mean == 0.5]
    assert {metrics["ci_method"][i] for i in flat} == {"cluster_wilson" if sessions else "wilson"}
    if not sessions:   # Wilson's interval of a proportion 0.5 of 5
        low, high = proportion_confint(2.5, 5, 0.05, method="wilson")
        assert [(metrics["ci_low"][i], metrics["ci_high"][i]) for i in flat] == [
            (pytest.approx(low), pytest.approx(high))] * len(flat)


@pytest.mark.slow
@pytest.mark.parametrize("sessions", [True, False], ids=["sessions", "no-sessions"])
@pytest.mark.parametrize("per_day, seed, lowest, highest", [
    (1000, 21, 0.935, 0.965),   # within 1.5 points of 95 % at large n
    # ~8 sessions a day: the cluster-robust t-interval alone ran ~3 points short (0.916); with
    # a 0 and a 1 added it covers 0.95 (16,000 windows)
    (30, 22, 0.93, 0.99),
], ids=["1000-a-day", "30-a-day"])
def test_every_stored_interval_covers_near_its_level(sessions, per_day, seed, lowest, highest):
    coverage = _stored_coverage(_simulated_windows(np.random.default_rng(seed), 4000, per_day,
                                                   sessions))
    for metric, share in coverage.items():
        assert lowest <= share <= highest, (metric, share)


@pytest.mark.parametrize("layout", [[40] + [1] * 10, [90] + [1] * 10, [30] + [2] * 10 + [1] * 10],
                         ids=["40+10x1", "90+10x1", "30+10x2+10x1"])
def test_a_window_one_session_dominates_covers_near_its_level(layout):
    # the session holding most requests pulls the mean onto its own, so its residual is near 0
    # and the cluster-robust variance (CR1, G - 1 degrees of freedom) saw almost no spread: the
    # mean's interval covered 0.41 (40 + 10), 0.16 (90 + 10) and 0.79 (30 + 10 x 2 + 10) of
    # the time, the pass rate's 0.53, 0.26 and 0.80
    table = _simulated_windows(np.random.default_rng(26), 2000, sum(layout), True,
                               layout=layout)
    coverage = _stored_coverage(table)
    assert min(coverage.values()) >= 0.93, coverage


def _skewed(rng, p):
    # most requests find everything, a few nearly everything, one in twenty nothing
    u = rng.random(p.size)
    return np.where(u < 0.85, 1.0, np.where(u < 0.95, 0.9, 0.0))


@pytest.mark.parametrize("sessions", [False, True], ids=["no-sessions", "sessions"])
@pytest.mark.parametrize("per_day", [10, 30])
def test_a_small_window_of_skewed_recalls_covers_its_mean(sessions, per_day):
    # 1 at 85 %, 0.9 at 10 %, 0 at 5 % (true mean 0.94): a small window often holds no 0, and
    # the t-interval of its recalls sat above the true mean — it covered 0.44 of the time at
    # 10 requests a day and 0.78 at 30
    table = _simulated_windows(np.random.default_rng(25 + per_day), 2000, per_day, sessions,
                               draw=_skewed)
    metrics = _with_intervals(table, "day", 0.7, 0.05).to_pydict()
    spread, proportion = ("cluster_adjusted_t", "cluster_wilson") if sessions else (
        "adjusted_t", "wilson")   # a window of only 1s and 0s has a proportion for its mean
    assert {spread} <= set(metrics["ci_method"]) <= {spread, proportion}
    assert _stored_coverage(table, (0.94, 0.0, 0.0))["mean_recall"] >= 0.95


@pytest.mark.parametrize("sessions, per_day", [(False, 5), (True, 12)],
                         ids=["5-requests", "12-requests-in-sessions"])
def test_a_small_window_whose_every_recall_is_0_or_1_covers_its_mean_as_a_proportion(
        sessions, per_day):
    # one gold chunk per golden, found 95 % of the time: a t-interval put [1, 1] on every window
    # that found all (3 in 4 of them at 5 requests) and covered the true mean ~23 % of the time
    table = _simulated_windows(np.random.default_rng(23), 2000, per_day, sessions, chunks=1,
                               a=19.0, b=1.0)
    coverage = _stored_coverage(table, (0.95, 0.95, 0.95))
    assert coverage["mean_recall"] == coverage["full_coverage_rate"] >= 0.93, coverage
    metrics = _with_intervals(table, "day", 0.7, 0.05).to_pydict()
    assert metrics["ci_low"] == metrics["fc_ci_low"]
    assert set(metrics["ci_method"]) == {"cluster_wilson" if sessions else "wilson"}


BLANK_SESSIONS = [request(f"r-{i}", ["a", "b"][: i % 3], session_id=blank,
                          ts=f"2026-11-01T{10 + i}:00:00Z")
                  for i, blank in enumerate(["", " ", "", "", "\t", ""])]


def test_a_blank_session_id_is_no_session(con, tmp_path):
    # `"session_id": ""` is how many loggers say "none": every such request of the day was one
    # session, and with one cluster the day's intervals were all NULL
    small(con, tmp_path, BLANK_SESSIONS)
    row = metrics(con, 5)
    assert (row["n"], row["n_sessions"], row["ci_method"], row["rate_ci_method"]) == (
        6, 6, "adjusted_t", "wilson")
    assert row["ci_low"] < row["mean_recall"] < row["ci_high"]
    assert con.sql("SELECT DISTINCT session_id FROM requests").fetchall() == [(None,)]


def test_blank_session_ids_an_earlier_release_stored_are_put_right_by_the_next_run(
        con, tmp_path):
    from pipeline.run import run

    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs.jsonl", BLANK_SESSIONS + [
        request("other-day", ["a"], ts="2026-11-02T10:00:00Z", session_id="s-1")])
    run(con, logs=[str(tmp_path / "logs.jsonl")], gold=str(tmp_path / "gold.jsonl"),
        gold_version="v1")
    right = snapshot(con)
    # as an earlier release left it: the blanks kept, the day aggregated as one session
    con.execute("UPDATE requests SET session_id = '' WHERE request_id LIKE 'r-%'")
    con.execute("UPDATE window_metrics SET n_sessions = 1, ci_low = NULL, ci_high = NULL "
                "WHERE window_start = '2026-11-01'")
    summary = run(con)
    assert [d.day for d in summary.days_aggregated] == [1]
    assert snapshot(con) == right


def test_a_day_scored_only_in_part_is_refused_not_published_from_its_scored_part(con, tmp_path):
    # 'my day' in CET scores 10:00 but not 23:30 and 23:45 UTC of 2026-11-01; aggregate then
    # published the day with n = 1, mean 1.0, where its three requests make n = 3, mean 1/3
    loaded(con, tmp_path, [request("t-1", ["a", "b"], ts="2026-11-01T10:00:00Z"),
                           request("t-2", ["x"], ts="2026-11-01T23:30:00Z"),
                           request("t-3", ["x"], ts="2026-11-01T23:45:00Z")])
    score(con, start=datetime(2026, 10, 31, 23), end=datetime(2026, 11, 1, 23))
    before = snapshot(con)
    with pytest.raises(RecallwatchError) as refused:
        aggregate(con, start=datetime(2026, 11, 1), end=datetime(2026, 11, 2))
    message = str(refused.value)
    assert "2026-11-01" in message and "2 of its 3 requests" in message
    assert "recallwatch score --start 2026-11-01 --end 2026-11-02" in message
    assert snapshot(con) == before
    # scored whole (here the rest of it), it aggregates: n = 3
    score(con, start=datetime(2026, 11, 1, 23), end=datetime(2026, 11, 2))
    aggregate(con, start=datetime(2026, 11, 1), end=datetime(2026, 11, 2))
    assert (metrics(con, 5)["n"], metrics(con, 5)["mean_recall"]) == (3, pytest.approx(1 / 3))


def test_a_day_whose_scored_requests_moved_away_is_refused_until_scored_again(con, tmp_path):
    # r-2 is re-delivered on 11-02: 11-01's scores still hold it until the day is scored again
    small(con, tmp_path, [request("r-1", ["a", "b"], ts="2026-11-01T08:00:00Z"),
                          request("r-2", ["x"], ts="2026-11-01T16:00:00Z")])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a", "b"], ts="2026-11-01T08:00:00Z"),
                                          request("r-2", ["x"], ts="2026-11-02T16:00:00Z")])
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])
    with pytest.raises(RecallwatchError, match="2026-11-01 is scored only in part on route ids: "
                       "its scores hold requests no longer logged on it"):
        aggregate(con, start=datetime(2026, 11, 1), end=datetime(2026, 11, 2))
    score(con, start=datetime(2026, 11, 1), end=datetime(2026, 11, 3))
    aggregate(con, start=datetime(2026, 11, 1), end=datetime(2026, 11, 3))
    assert con.sql("SELECT window_start::DATE::VARCHAR, n FROM window_metrics WHERE k = 5 "
                   "AND slice = 'all' ORDER BY 1").fetchall() == [
        ("2026-11-01", 1), ("2026-11-02", 1)]


def test_hours_scored_whole_aggregate_by_the_hour_though_their_day_is_scored_in_part(
        con, tmp_path):
    loaded(con, tmp_path, [request("t-1", ["a", "b"], ts="2026-11-01T01:00:00Z"),
                           request("t-2", ["a"], ts="2026-11-01T02:00:00Z"),
                           request("t-3", ["x"], ts="2026-11-01T23:45:00Z")])
    score(con, start=datetime(2026, 11, 1), end=datetime(2026, 11, 1, 3))
    aggregate(con, grain="hour", start=datetime(2026, 11, 1), end=datetime(2026, 11, 1, 3))
    assert con.sql("SELECT hour(window_start), n FROM window_metrics WHERE grain = 'hour' "
                   "AND k = 5 AND slice = 'all' ORDER BY 1").fetchall() == [(1, 1), (2, 1)]
    with pytest.raises(RecallwatchError, match="1 of its 3 requests have no score"):
        aggregate(con, start=datetime(2026, 11, 1), end=datetime(2026, 11, 2))


def test_the_day_and_hour_a_scored_request_moved_to_are_refused_until_scored_again(
        con, tmp_path):
    # r-2 is re-delivered from 23:45 of 11-01 to 00:30 of 11-02 with a retrieval that finds
    # nothing: 11-02 (by the day and by the hour) published it with its stale score of 1.0
    small(con, tmp_path, [request("r-1", ["a"], ts="2026-11-02T00:10:00Z"),
                          request("r-2", ["a", "b"], ts="2026-11-01T23:45:00Z")])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"], ts="2026-11-02T00:10:00Z"),
                                          request("r-2", ["x"], ts="2026-11-02T00:30:00Z")])
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])
    for grain, start, end in (("hour", datetime(2026, 11, 2), datetime(2026, 11, 2, 1)),
                              ("day", datetime(2026, 11, 2), datetime(2026, 11, 3))):
        with pytest.raises(RecallwatchError, match="2026-11-02 is scored only in part on "
                           "route ids: 1 of its 2 requests have no score"):
            aggregate(con, grain=grain, start=start, end=end)
    score(con, start=datetime(2026, 11, 1), end=datetime(2026, 11, 3))
    aggregate(con, grain="hour", start=datetime(2026, 11, 2), end=datetime(2026, 11, 2, 1))
    assert con.sql("SELECT n, mean_recall FROM window_metrics WHERE grain = 'hour' AND k = 5 "
                   "AND slice = 'all'").fetchall() == [(2, 0.25)]


@pytest.mark.parametrize("changed", [
    request("r-2", ["x"], ts="2026-11-01T10:30:00Z"),                  # another retrieval
    request("r-2", ["a", "b"], ts="2026-11-01T10:30:00Z", gold_id="g-2"),   # another golden
])
def test_the_day_and_hour_of_a_scored_request_re_delivered_with_other_content_are_refused(
        con, tmp_path, changed):
    # r-2 is re-delivered at the same instant, but what it is scored from changed (recall 0
    # now): its day and hour published it with its stale score of 1.0
    small(con, tmp_path, [request("r-1", ["a"], ts="2026-11-01T10:00:00Z"),
                          request("r-2", ["a", "b"], ts="2026-11-01T10:30:00Z")],
          goldens=[golden("g-1", ["a", "b"]), golden("g-2", ["y"], question="q2")])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"], ts="2026-11-01T10:00:00Z"),
                                          changed])
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])
    for grain, start, end in (("hour", datetime(2026, 11, 1, 10), datetime(2026, 11, 1, 11)),
                              ("day", datetime(2026, 11, 1), datetime(2026, 11, 2))):
        with pytest.raises(RecallwatchError, match="2026-11-01 is scored only in part on "
                           "route ids: 1 of its 2 requests have no score"):
            aggregate(con, grain=grain, start=start, end=end)
    # scored again by the hour (the day is not scored whole), it aggregates with its new score
    score(con, start=datetime(2026, 11, 1, 10), end=datetime(2026, 11, 1, 11))
    aggregate(con, grain="hour", start=datetime(2026, 11, 1, 10), end=datetime(2026, 11, 1, 11))
    aggregate(con, start=datetime(2026, 11, 1), end=datetime(2026, 11, 2))
    assert con.sql("SELECT grain, n, mean_recall FROM window_metrics WHERE k = 5 "
                   "AND slice = 'all' ORDER BY 1").fetchall() == [("day", 2, 0.25),
                                                                  ("hour", 2, 0.25)]


def test_a_scored_request_delivered_again_by_another_file_with_other_content_is_unscored(
        con, tmp_path):
    # r-2 leaves logs.jsonl and comes back in other.jsonl at the same instant, finding nothing
    # now: the day published its stale score of 1.0 (mean 0.75), not knowing it had changed
    small(con, tmp_path, [request("r-1", ["a"], ts="2026-11-01T10:00:00Z"),
                          request("r-2", ["a", "b"], ts="2026-11-01T10:30:00Z")])
    write_jsonl(tmp_path / "logs.jsonl", [request("r-1", ["a"], ts="2026-11-01T10:00:00Z")])
    write_jsonl(tmp_path / "other.jsonl", [request("r-2", ["x"], ts="2026-11-01T10:30:00Z")])
    ingest_logs(con, [str(tmp_path / "logs.jsonl"), str(tmp_path / "other.jsonl")])
    with pytest.raises(RecallwatchError, match="2026-11-01 is scored only in part on route ids: "
                       "1 of its 2 requests have no score"):
        aggregate(con, start=datetime(2026, 11, 1), end=datetime(2026, 11, 2))
    score(con, start=datetime(2026, 11, 1), end=datetime(2026, 11, 2))
    aggregate(con, start=datetime(2026, 11, 1), end=datetime(2026, 11, 2))
    assert con.sql("SELECT n, mean_recall FROM window_metrics WHERE k = 5 "
                   "AND slice = 'all'").fetchall() == [(2, 0.25)]


def test_a_refused_aggregate_puts_neither_its_pass_mark_nor_its_grain_in_force(
        run_cli, tmp_path):
    # the day holds a request logged after it was scored: `aggregate --window hour
    # --pass-mark 0.5` is refused (exit 2), yet it left 0.5 and the hour grain in force, so
    # the next `run` re-aggregated every day with them
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs" / "a.jsonl", [request("r-1", ["a"], ts="2026-11-01T10:00:00Z")])
    assert run_cli("run", "--logs", tmp_path / "logs", "--gold", tmp_path / "gold.jsonl",
                   "--gold-version", "v1", "--out", "")[0] == 0
    write_jsonl(tmp_path / "logs" / "b.jsonl", [request("r-2", ["a"], ts="2026-11-01T11:00:00Z")])
    assert run_cli("ingest", "logs", tmp_path / "logs")[0] == 0
    code, _, err = run_cli("aggregate", "--window", "hour", "--pass-mark", "0.5")
    assert code == 2 and "2026-11-01 is scored only in part on route ids" in err
    code, out, _ = run_cli("config")
    assert code == 0 and "pass mark 0.7\ngrains day\n" in out
    # scored whole, the same command puts both in force
    assert run_cli("score")[0] == 0
    assert run_cli("aggregate", "--window", "hour", "--pass-mark", "0.5")[0] == 0
    assert "pass mark 0.5\ngrains day,hour\n" in run_cli("config")[1]


def test_intervals_of_many_slices_read_only_the_numeric_columns(con, tmp_path):
    """A day of 3,000 index versions (3,000 slices × 7 cutoffs): the intervals are computed
    from the numeric sums; the list columns (index_versions, version_counts, size_hist) are
    carried as they are, never turned into a Python object per row (with 100,000 versions a
    day that held 1.3 GB more, aggregate peaked at 3.5 GiB RSS)."""
    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a", "b"])])
    write_jsonl(tmp_path / "logs.jsonl", [
        request(f"r-{i}", ["a", "x"], index_version=f"idx-{i}",
                ts=f"2026-11-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z")
        for i in range(3000)])
    ingest_gold(con, str(tmp_path / "gold.jsonl"), "v1")
    ingest_logs(con, [str(tmp_path / "logs.jsonl")])
    score(con)
    stats_ = run_script(con, "window_metrics", {
        "start": datetime(2026, 11, 1), "end": datetime(2026, 11, 2), "grain": "day",
        "pass_mark": 0.7, "cutoffs": [1, 3, 5, 10, 20, 50, 100]}, as_arrow=True)
    assert stats_.num_rows == 7 * 3001
    tracemalloc.start()
    try:
        table = _with_intervals(stats_, "day", 0.7, 0.05)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert table.num_rows == stats_.num_rows
    assert table.column("mean_recall").to_pylist()[:3] == [0.5, 0.5, 0.5]
    # the numeric columns and the intervals: about 940 bytes a row (2,235 with the objects)
    assert peak < 1500 * stats_.num_rows, peak / stats_.num_rows
