"""Checks pipeline.stats against the statsmodels/scipy references each interval names, to 1e-6.

Every interval is fed sufficient statistics, as the aggregation step does, and compared with the
reference computed from the raw observations, over edge cases (0/n, n/n, n = 1, n = 2, constant
data, large n, all-singleton clusters), vectorized mixed batches and hypothesis-generated data.
"""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.proportion import proportion_confint
from statsmodels.stats.weightstats import DescrStatsW

from pipeline.stats import (
    ClusterStats,
    Interval,
    clip_unit,
    cluster_sufficient_stats,
    cluster_t_interval,
    t_interval,
    wilson_interval,
)

TOL = 1e-6
ALPHAS = [0.05, 0.01, 0.10, 0.3173]


def assert_interval_close(got: Interval, want, tol: float = TOL) -> None:
    np.testing.assert_allclose(got.low, want[0], rtol=0, atol=tol, equal_nan=True)
    np.testing.assert_allclose(got.high, want[1], rtol=0, atol=tol, equal_nan=True)


def sm_cluster_confint(y, groups, alpha: float = 0.05) -> tuple[float, float]:
    y = np.asarray(y, dtype=float)
    res = sm.OLS(y, np.ones(len(y))).fit(
        cov_type="cluster", cov_kwds={"groups": np.asarray(groups)}, use_t=True
    )
    low, high = res.conf_int(alpha)[0]
    return low, high


def t_stats(y) -> tuple[int, float, float]:
    y = np.asarray(y, dtype=float)
    return len(y), float(y.mean()), float(y.var(ddof=1))


# --- Wilson ------------------------------------------------------------------------------------

WILSON_CASES = [
    (0, 1),
    (1, 1),
    (0, 2),
    (1, 2),
    (2, 2),
    (0, 10),
    (10, 10),
    (3, 7),
    (1, 100_000),
    (50_000, 100_000),
    (99_999, 100_000),
    (100_000, 100_000),
]


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize(("successes", "n"), WILSON_CASES)
def test_wilson_matches_statsmodels_including_zero_full_and_single_trial(successes, n, alpha):
    got = wilson_interval(successes, n, alpha)
    assert_interval_close(got, proportion_confint(successes, n, alpha, method="wilson"))


def test_wilson_pins_reference_value_for_3_of_7():
    # .venv/bin/python -c "from statsmodels.stats.proportion import proportion_confint;
    #   print(repr(proportion_confint(3, 7, alpha=0.05, method='wilson')))"
    # -> (0.15821985525146964, 0.7495416354723428)   [statsmodels 0.15.0]
    got = wilson_interval(3, 7)
    assert got.low == pytest.approx(0.15821985525146964, abs=1e-12)
    assert got.high == pytest.approx(0.7495416354723428, abs=1e-12)


def test_wilson_bound_is_exactly_zero_or_one_at_the_edges():
    assert wilson_interval(0, 5).low == 0.0
    assert wilson_interval(5, 5).high == 1.0


def test_wilson_zero_trials_gives_nan_bounds():
    got = wilson_interval(0, 0)
    assert np.isnan(got.low) and np.isnan(got.high)


def test_wilson_invalid_counts_give_nan_bounds():
    got = wilson_interval(np.array([-1, 6]), np.array([5, 5]))
    assert np.isnan(got.low).all() and np.isnan(got.high).all()


def test_wilson_scalar_input_returns_float():
    got = wilson_interval(3, 7)
    assert isinstance(got, Interval)
    assert isinstance(got.low, float) and isinstance(got.high, float)


def test_wilson_vectorized_mixed_cases_match_statsmodels_elementwise_and_keep_shape():
    successes = np.array([[0, 3, 5, 1], [0, 0, 1, 40_000]])
    n = np.array([[5, 7, 5, 1], [0, 1, 2, 100_000]])
    got = wilson_interval(successes, n, 0.1)
    assert got.low.shape == got.high.shape == (2, 4)
    for idx in np.ndindex(n.shape):
        if n[idx] == 0:
            assert np.isnan(got.low[idx]) and np.isnan(got.high[idx])
        else:
            want = proportion_confint(successes[idx], n[idx], 0.1, method="wilson")
            assert_interval_close(Interval(got.low[idx], got.high[idx]), want)


def test_wilson_rejects_alpha_outside_unit_interval():
    with pytest.raises(ValueError, match="alpha"):
        wilson_interval(1, 2, alpha=0.0)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=10**6),
    frac=st.floats(min_value=0, max_value=1),
    alpha=st.floats(min_value=1e-4, max_value=0.5),
)
def test_wilson_bounds_lie_in_unit_interval_contain_estimate_and_match_statsmodels(n, frac, alpha):
    successes = round(frac * n)
    low, high = wilson_interval(successes, n, alpha)
    p = successes / n
    assert 0.0 <= low <= p <= high <= 1.0
    assert_interval_close(
        Interval(low, high), proportion_confint(successes, n, alpha, method="wilson")
    )


# --- Student t ---------------------------------------------------------------------------------

_rng = np.random.default_rng(20240601)
T_DATASETS = {
    "n2": np.array([0.25, 1.0]),
    "n3": np.array([0.0, 0.5, 1.0]),
    "binary": _rng.integers(0, 2, 40).astype(float),
    "uniform": _rng.random(57),
    "skewed": _rng.beta(0.3, 3.0, 200),
    "large_1e5": _rng.random(100_000),
}


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("name", sorted(T_DATASETS))
def test_t_interval_from_sufficient_stats_matches_scipy_and_statsmodels(name, alpha):
    y = T_DATASETS[name]
    n, mean, var = t_stats(y)
    got = t_interval(n, mean, var, alpha)
    want_scipy = stats.t.interval(1 - alpha, n - 1, loc=mean, scale=np.sqrt(var / n))
    assert_interval_close(got, want_scipy)
    assert_interval_close(got, DescrStatsW(y).tconfint_mean(alpha))


def test_t_interval_pins_reference_value():
    # .venv/bin/python -c "import numpy as np; from scipy import stats;
    #   print(repr(stats.t.interval(0.95, 4, loc=0.5, scale=np.sqrt(0.1 / 5))))"
    # -> (np.float64(0.10735136770448861), np.float64(0.8926486322955114))   [scipy 1.17.1]
    got = t_interval(5, 0.5, 0.1)
    assert got.low == pytest.approx(0.10735136770448861, abs=1e-12)
    assert got.high == pytest.approx(0.8926486322955114, abs=1e-12)


def test_t_interval_constant_data_is_degenerate_at_the_mean_like_statsmodels():
    y = np.full(12, 0.75)
    n, mean, var = t_stats(y)
    got = t_interval(n, mean, var)
    assert got.low == got.high == 0.75
    assert_interval_close(got, DescrStatsW(y).tconfint_mean(0.05))


@pytest.mark.parametrize(("n", "var"), [(0, np.nan), (1, np.nan), (1, 0.0)])
def test_t_interval_is_nan_for_n_at_most_one(n, var):
    got = t_interval(n, 0.5, var)
    assert np.isnan(got.low) and np.isnan(got.high)


def test_t_interval_vectorized_mixed_cases_match_scipy_elementwise():
    datasets = [T_DATASETS["n2"], T_DATASETS["uniform"], np.full(4, 0.2), T_DATASETS["binary"]]
    n, mean, var = (np.array(col) for col in zip(*map(t_stats, datasets), strict=True))
    n = np.append(n, [1, 0])
    mean = np.append(mean, [0.3, np.nan])
    var = np.append(var, [np.nan, np.nan])
    got = t_interval(n, mean, var)
    assert got.low.shape == got.high.shape == (6,)
    for i, y in enumerate(datasets):
        assert_interval_close(Interval(got.low[i], got.high[i]), DescrStatsW(y).tconfint_mean())
    assert np.isnan(got.low[4:]).all() and np.isnan(got.high[4:]).all()


# --- cluster-robust t --------------------------------------------------------------------------


def unequal_clusters(seed: int, sizes: list[int], binary: bool = False):
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(len(sizes)), sizes)
    # A per-cluster shift makes observations within a session correlated, as real sessions are.
    shift = rng.normal(0, 0.2, len(sizes))[groups]
    y = np.clip(rng.random(groups.size) * 0.6 + 0.2 + shift, 0, 1)
    if binary:
        y = (y > 0.5).astype(float)
    return y, rng.permutation(groups)


CLUSTER_CASES = {
    "two_clusters": unequal_clusters(1, [3, 5]),
    "unequal_sizes": unequal_clusters(2, [1, 7, 2, 2, 15, 1, 4, 30, 1, 3]),
    "binary_unequal": unequal_clusters(3, [4, 1, 1, 9, 2, 6, 1, 12], binary=True),
    "one_big_many_singletons": unequal_clusters(4, [40] + [1] * 25),
    "large_1e5": unequal_clusters(5, list(np.random.default_rng(6).integers(1, 40, 5_000))),
}


def test_cluster_sufficient_stats_match_hand_computed_sums():
    y = [1.0, 0.5, 0.0, 1.0, 1.0, 0.0, 0.5]
    groups = ["s1", "s1", "s1", "s2", "s2", "r6", "r7"]
    # Clusters: s1 (n=3, S=1.5), s2 (n=2, S=2.0), r6 (n=1, S=0.0), r7 (n=1, S=0.5).
    want = ClusterStats(7, 4, 4.0, 1.5**2 + 2.0**2 + 0.5**2, 1.5 * 3 + 2.0 * 2 + 0.5, 15)
    assert cluster_sufficient_stats(y, groups) == want


def test_cluster_sufficient_stats_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="equal length"):
        cluster_sufficient_stats([0.1, 0.2], [1])


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("name", sorted(CLUSTER_CASES))
def test_cluster_t_interval_matches_statsmodels_ols_cluster_for_unequal_sizes(name, alpha):
    y, groups = CLUSTER_CASES[name]
    got = cluster_t_interval(*cluster_sufficient_stats(y, groups), alpha=alpha)
    assert_interval_close(got, sm_cluster_confint(y, groups, alpha))


def test_cluster_t_interval_pins_reference_value():
    # .venv/bin/python -c "import numpy as np, statsmodels.api as sm;
    #   y = [1.0, 0.5, 0.0, 1.0, 1.0, 0.0, 0.5]; g = np.array([0, 0, 0, 1, 1, 2, 3]);
    #   r = sm.OLS(y, np.ones(7)).fit(cov_type='cluster', cov_kwds={'groups': g}, use_t=True);
    #   print(r.conf_int(0.05).tolist())"
    # -> [[0.017781987865885918, 1.125075154991257]]   [statsmodels 0.15.0]
    got = cluster_t_interval(7, 4, 4.0, 6.5, 9.0, 15)
    assert got.low == pytest.approx(0.017781987865885918, abs=1e-12)
    assert got.high == pytest.approx(1.125075154991257, abs=1e-12)


def test_statsmodels_cluster_uses_g_minus_1_df_and_cr1_factor_g_over_g_minus_1():
    # Pins the reference's conventions that cluster_t_interval reproduces: t quantile on G - 1
    # df (not n - 1) and variance factor G/(G-1) * (n-1)/(n-k) with k = 1, i.e. G/(G-1).
    y, groups = CLUSTER_CASES["unequal_sizes"]
    res = sm.OLS(y, np.ones(len(y))).fit(
        cov_type="cluster", cov_kwds={"groups": groups}, use_t=True
    )
    n, g = len(y), len(np.unique(groups))
    assert res.df_resid_inference == g - 1
    e = np.bincount(groups, weights=y - y.mean())
    assert res.bse[0] ** 2 == pytest.approx(g / (g - 1) * (e @ e) / n**2, rel=1e-12)


def test_cluster_t_interval_all_singletons_equals_statsmodels_and_coincides_with_t_interval():
    # With G = n singletons CR1 gives n/(n-1) * sum (y - ybar)^2 / n^2 = var / n on n - 1 df,
    # so the cluster interval is the t interval exactly, not merely close to it.
    y = T_DATASETS["uniform"]
    groups = np.arange(len(y))
    got = cluster_t_interval(*cluster_sufficient_stats(y, groups))
    assert_interval_close(got, sm_cluster_confint(y, groups))
    np.testing.assert_allclose(got, t_interval(*t_stats(y)), rtol=0, atol=1e-12)


def test_cluster_t_interval_accepts_string_session_ids():
    y, groups = CLUSTER_CASES["unequal_sizes"]
    labels = np.array([f"session-{g:03d}" for g in groups])
    got = cluster_t_interval(*cluster_sufficient_stats(y, labels))
    assert_interval_close(got, sm_cluster_confint(y, groups))


def test_cluster_t_interval_constant_data_is_degenerate_at_the_mean():
    # Constant y makes the raw sums cancel exactly in theory; rounding leaves a residue of
    # either sign, which must not turn into NaN. Its square root widens the interval by ~1e-9,
    # the precision floor of working from sums.
    groups = np.repeat(np.arange(7), [1, 3, 2, 9, 1, 5, 4])
    for value in (0.1, 0.3, 0.7, 1.0):
        y = np.full(groups.size, value)
        got = cluster_t_interval(*cluster_sufficient_stats(y, groups))
        assert got.low == pytest.approx(value, abs=TOL)
        assert got.high == pytest.approx(value, abs=TOL)
        assert_interval_close(got, sm_cluster_confint(y, groups))
    assert_interval_close(got, sm_cluster_confint(y, groups))


@pytest.mark.parametrize(
    ("y", "groups"),
    [([], []), ([0.4], ["a"]), ([0.1, 0.9, 0.5], ["a", "a", "a"])],
    ids=["empty", "single_observation", "single_cluster"],
)
def test_cluster_t_interval_is_nan_with_fewer_than_two_clusters(y, groups):
    got = cluster_t_interval(*cluster_sufficient_stats(y, groups))
    assert np.isnan(got.low) and np.isnan(got.high)


def test_cluster_t_interval_vectorized_over_groups_matches_statsmodels_elementwise():
    cases = [CLUSTER_CASES[k] for k in ("two_clusters", "unequal_sizes", "binary_unequal")]
    cases.append((np.array([0.2, 0.4]), np.array([0, 0])))  # one cluster -> NaN
    columns = np.array([cluster_sufficient_stats(y, g) for y, g in cases], dtype=float).T
    got = cluster_t_interval(*columns, alpha=0.1)
    assert got.low.shape == got.high.shape == (4,)
    for i, (y, g) in enumerate(cases[:3]):
        assert_interval_close(Interval(got.low[i], got.high[i]), sm_cluster_confint(y, g, 0.1))
    assert np.isnan(got.low[3]) and np.isnan(got.high[3])


@settings(max_examples=150, deadline=None)
@given(
    data=st.lists(
        st.tuples(st.floats(min_value=0, max_value=1), st.integers(min_value=0, max_value=12)),
        min_size=2,
        max_size=60,
    ),
    alpha=st.sampled_from(ALPHAS),
)
def test_cluster_t_interval_from_sufficient_stats_equals_statsmodels_on_random_data(data, alpha):
    y = np.array([v for v, _ in data])
    groups = np.array([g for _, g in data])
    got = cluster_t_interval(*cluster_sufficient_stats(y, groups), alpha=alpha)
    if len(np.unique(groups)) < 2:
        assert np.isnan(got.low) and np.isnan(got.high)
        return
    assert_interval_close(got, sm_cluster_confint(y, groups, alpha))
    # Slack of 1e-12: ybar = total / n and y.mean() may round differently when the interval
    # is degenerate (all cluster means equal).
    assert got.low - 1e-12 <= y.mean() <= got.high + 1e-12


# --- clip_unit ---------------------------------------------------------------------------------


def test_clip_unit_clamps_bounds_to_unit_interval_and_keeps_nan():
    got = clip_unit(Interval(np.array([-0.2, 0.3, np.nan]), np.array([1.4, 0.8, np.nan])))
    np.testing.assert_array_equal(got.low, [0.0, 0.3, np.nan])
    np.testing.assert_array_equal(got.high, [1.0, 0.8, np.nan])


def test_clip_unit_on_scalar_t_interval_returns_floats_inside_unit_interval():
    raw = t_interval(3, 0.95, 0.02)
    assert raw.high > 1.0
    got = clip_unit(raw)
    assert isinstance(got.low, float) and got.high == 1.0
    assert got.low == raw.low
