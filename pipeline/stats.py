"""Confidence intervals for the window metrics, computed from per-group sufficient statistics.

The aggregation step reduces each window x slice x route x k group to a handful of sums in SQL
(counts, means, variances, per-session sums) and hands them here, so every function takes those
sufficient statistics rather than raw observations. Each method is one numpy-vectorized function:
arguments may be scalars or arrays of equal shape, one element per group, and the result is an
``Interval(low, high)`` of the same shape (a float for scalar input). Groups on which a method is
undefined (no trials, a single observation, a single cluster) get NaN bounds instead of an error,
so one bad group never sinks a whole report. Every method is pinned to the statsmodels/scipy
reference it names, which ``tests/test_stats.py`` checks to 1e-6.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

__all__ = [
    "ClusterStats",
    "Interval",
    "clip_unit",
    "cluster_sufficient_stats",
    "cluster_t_interval",
    "cluster_wilson_interval",
    "t_interval",
    "wilson_interval",
]

FloatOrArray = float | np.ndarray


class Interval(NamedTuple):
    """Lower and upper confidence bounds; NaN where the method is undefined."""

    low: FloatOrArray
    high: FloatOrArray


class ClusterStats(NamedTuple):
    """Sufficient statistics of clustered observations, in ``cluster_t_interval`` order."""

    n: int
    n_clusters: int
    total: float
    sum_cluster_sq: float
    sum_cluster_cross: float
    sum_size_sq: int


def _check_alpha(alpha: ArrayLike) -> np.ndarray:
    alpha = np.asarray(alpha, dtype=float)
    if np.any((alpha <= 0) | (alpha >= 1)):
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")
    return alpha


def _as_output(x: np.ndarray) -> FloatOrArray:
    # ``[()]`` turns a 0-d array into a numpy float and leaves n-d arrays untouched, so scalar
    # callers get a float back without a separate code path.
    return x[()]


def wilson_interval(successes: ArrayLike, n: ArrayLike, alpha: ArrayLike = 0.05) -> Interval:
    """Wilson score interval for a binomial proportion.

    With ``p = successes / n`` and ``z = Phi^-1(1 - alpha/2)``::

        center = (p + z^2 / (2n)) / (1 + z^2 / n)
        half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))
        [low, high] = center -/+ half

    Sources: E. B. Wilson (1927), "Probable inference, the law of succession, and statistical
    inference", JASA 22(158):209-212; L. D. Brown, T. T. Cai, A. DasGupta (2001), "Interval
    estimation for a binomial proportion", Statistical Science 16(2):101-133. Equal to
    ``statsmodels.stats.proportion.proportion_confint(successes, n, alpha, method="wilson")``.

    Unlike the Wald interval it stays informative at ``0/n`` and ``n/n`` (one bound is exactly
    0 or 1) and for tiny ``n``. Where ``n <= 0`` or ``successes`` lies outside ``[0, n]`` the
    proportion is undefined and both bounds are NaN.
    """
    alpha = _check_alpha(alpha)
    successes = np.asarray(successes, dtype=float)
    n = np.asarray(n, dtype=float)
    valid = (n > 0) & (successes >= 0) & (successes <= n)
    # Evaluate invalid groups on a harmless stand-in so they raise no warnings, then mask them.
    n_ok = np.where(valid, n, 1.0)
    p = np.where(valid, successes, 0.0) / n_ok

    q = 1.0 - p
    z = stats.norm.isf(alpha / 2)
    z2_n = z * z / n_ok
    denom = 1.0 + z2_n
    half = z * np.sqrt(p * q / n_ok + z2_n / (4.0 * n_ok)) / denom
    upper_naive = (p + z2_n / 2) / denom + half
    lower_naive_complement = (q + z2_n / 2) / denom + half  # 1 - (center - half)
    # center - half cancels catastrophically near p = 0 (0/n came out as +3e-17, outside
    # [0, p]). The bounds are the roots of denom x^2 - (2p + z^2/n) x + p^2 = 0, so
    # low = p^2 / (denom * high) and, mirrored, 1 - high = q^2 / (denom * (1 - low)): both are
    # free of cancellation and exactly 0 at 0/n and exactly 1 at n/n.
    low = np.where(valid, p * p / (denom * upper_naive), np.nan)
    high = np.where(valid, 1.0 - q * q / (denom * lower_naive_complement), np.nan)
    return Interval(_as_output(low), _as_output(high))


def cluster_wilson_interval(
    n: ArrayLike,
    n_clusters: ArrayLike,
    successes: ArrayLike,
    sum_cluster_sq: ArrayLike,
    sum_cluster_cross: ArrayLike,
    sum_size_sq: ArrayLike,
    alpha: ArrayLike = 0.05,
) -> Interval:
    """Wilson interval for a proportion of observations grouped in clusters (sessions), on the
    design-effect-adjusted effective sample size.

    Indicators within a session are correlated, so Wilson on ``n`` is too narrow. With
    ``p = successes / n``, ``V_cr`` the cluster-robust (CR1) variance of ``p`` built from the
    per-cluster sums exactly as in ``cluster_t_interval`` (the same arguments, with
    ``successes`` as the total), and ``z = Phi^-1(1 - alpha/2)``::

        deff  = max(1, V_cr / (p (1 - p) / n))        design effect, never below 1
        n_eff = n / deff                              (= G when p is 0 or 1: no deff estimate)
        n_eff = n_eff * (z / t_{1 - alpha/2, G - 1})^2   degrees-of-freedom adjustment
        [low, high] = wilson_interval(p * n_eff, n_eff, alpha)

    Sources: L. Kish (1965), Survey Sampling (design effect); E. L. Korn, B. I. Graubard
    (1998), "Confidence intervals for proportions with small expected number of positive counts
    estimated from survey data", Survey Methodology 24(2):193-201 (effective sample size, its
    cap at n and the df adjustment). Equal to ``proportion_confint(p * n_eff, n_eff,
    alpha, method="wilson")`` with ``V_cr`` from statsmodels' ``OLS(y, ones).fit(
    cov_type="cluster")`` (``tests/test_stats.py``).

    At ``0/n`` and ``n/n`` the design effect cannot be estimated, so every session counts as
    one observation (``n_eff = G``), the most cautious choice. With ``G <= 1`` both bounds are
    NaN. When every cluster is a single request, ``deff = n / (n - 1)`` and the interval is
    slightly wider than plain Wilson; callers use ``wilson_interval`` for groups without
    sessions.
    """
    alpha = _check_alpha(alpha)
    n = np.asarray(n, dtype=float)
    n_clusters = np.asarray(n_clusters, dtype=float)
    successes = np.asarray(successes, dtype=float)
    valid = (n_clusters > 1) & (n > 0) & (successes >= 0) & (successes <= n)
    n_ok = np.where(valid, n, 2.0)
    g_ok = np.where(valid, n_clusters, 2.0)
    p = np.where(valid, successes, 0.0) / n_ok
    sum_e2 = np.maximum(
        np.asarray(sum_cluster_sq, dtype=float)
        - 2.0 * p * np.asarray(sum_cluster_cross, dtype=float)
        + p * p * np.asarray(sum_size_sq, dtype=float), 0.0)
    v_cr = g_ok / (g_ok - 1.0) * sum_e2 / (n_ok * n_ok)
    v_srs = p * (1.0 - p) / n_ok
    interior = v_srs > 0
    deff = np.maximum(1.0, np.where(interior, v_cr, 1.0) / np.where(interior, v_srs, 1.0))
    n_eff = np.where(interior, n_ok / deff, g_ok)
    z = stats.norm.isf(alpha / 2)
    n_eff = n_eff * (z / stats.t.isf(alpha / 2, g_ok - 1.0)) ** 2
    low, high = wilson_interval(p * n_eff, n_eff, alpha)
    return Interval(_as_output(np.where(valid, low, np.nan)),
                    _as_output(np.where(valid, high, np.nan)))


def t_interval(n: ArrayLike, mean: ArrayLike, var: ArrayLike, alpha: ArrayLike = 0.05) -> Interval:
    """Student t-interval for a mean, from the count, mean and sample variance.

    ::

        [low, high] = mean -/+ t_{1 - alpha/2, n - 1} * sqrt(var / n)

    where ``var`` is the sample variance with ``ddof=1`` (SQL ``var_samp``). Source: "Student"
    (W. S. Gosset, 1908), "The probable error of a mean", Biometrika 6(1):1-25. Equal to
    ``scipy.stats.t.interval(1 - alpha, n - 1, loc=mean, scale=sqrt(var / n))`` and to
    ``statsmodels.stats.weightstats.DescrStatsW(x).tconfint_mean(alpha)``.

    The interval is undefined for ``n <= 1`` (no degrees of freedom to estimate the variance),
    so those groups get NaN bounds. Constant data (``var == 0``) gives the degenerate interval
    ``[mean, mean]``, as statsmodels does; scipy instead returns NaN because it rejects
    ``scale=0``.
    """
    alpha = _check_alpha(alpha)
    n = np.asarray(n, dtype=float)
    mean = np.asarray(mean, dtype=float)
    var = np.asarray(var, dtype=float)
    valid = n > 1
    # SQL returns NULL variance for a single row; masking keeps undefined groups warning-free.
    n_ok = np.where(valid, n, 2.0)
    sem = np.sqrt(np.where(valid, var, 0.0) / n_ok)
    half = stats.t.isf(alpha / 2, n_ok - 1.0) * sem
    low = np.where(valid, mean - half, np.nan)
    high = np.where(valid, mean + half, np.nan)
    return Interval(_as_output(low), _as_output(high))


def cluster_t_interval(
    n: ArrayLike,
    n_clusters: ArrayLike,
    total: ArrayLike,
    sum_cluster_sq: ArrayLike,
    sum_cluster_cross: ArrayLike,
    sum_size_sq: ArrayLike,
    alpha: ArrayLike = 0.05,
) -> Interval:
    """Cluster-robust (CR1) t-interval for a mean of observations grouped in clusters.

    Observations within a multi-turn session are correlated, so the plain t-interval is too
    narrow; this one treats sessions (clusters) as the independent units. For clusters ``g``
    with sizes ``n_g`` and within-cluster sums ``S_g`` the arguments are ``n = sum n_g``,
    ``n_clusters = G``, ``total = sum S_g``, ``sum_cluster_sq = sum S_g^2``,
    ``sum_cluster_cross = sum S_g n_g`` and ``sum_size_sq = sum n_g^2``. Then::

        ybar    = total / n
        sum e^2 = sum_cluster_sq - 2 ybar sum_cluster_cross + ybar^2 sum_size_sq
                = sum_g (S_g - n_g ybar)^2
        V       = G / (G - 1) * (n - 1) / (n - k) * sum e^2 / n^2,   k = 1
        [low, high] = ybar -/+ t_{1 - alpha/2, G - 1} * sqrt(V)

    Sources: K.-Y. Liang, S. L. Zeger (1986), "Longitudinal data analysis using generalized
    linear models", Biometrika 73(1):13-22; A. C. Cameron, D. L. Miller (2015), "A
    practitioner's guide to cluster-robust inference", J. Human Resources 50(2):317-372
    (CR1 factor and G - 1 degrees of freedom). Equal to statsmodels'
    ``OLS(y, ones).fit(cov_type="cluster", cov_kwds={"groups": g}, use_t=True).conf_int(alpha)``
    (``sandwich_covariance.cov_cluster`` applies ``G/(G-1) * (n-1)/(n-k)``, and
    ``df_resid_inference = G - 1``).

    Singleton clusters (requests without a session) are ordinary clusters of size 1; when all
    clusters are singletons, ``V`` reduces to ``var / n`` and ``G - 1 = n - 1``, so the result
    coincides with ``t_interval``. With ``G <= 1`` there is no between-cluster variation to
    estimate and both bounds are NaN. Use ``cluster_sufficient_stats`` to build the arguments
    from raw arrays.
    """
    alpha = _check_alpha(alpha)
    n = np.asarray(n, dtype=float)
    n_clusters = np.asarray(n_clusters, dtype=float)
    valid = (n_clusters > 1) & (n > 0)
    n_ok = np.where(valid, n, 2.0)
    g_ok = np.where(valid, n_clusters, 2.0)

    ybar = np.asarray(total, dtype=float) / n_ok
    sum_e2 = (
        np.asarray(sum_cluster_sq, dtype=float)
        - 2.0 * ybar * np.asarray(sum_cluster_cross, dtype=float)
        + ybar * ybar * np.asarray(sum_size_sq, dtype=float)
    )
    # A sum of squares cannot be negative; a negative value here is cancellation between the
    # large raw sums (e.g. constant data), so it stands for zero.
    sum_e2 = np.maximum(sum_e2, 0.0)
    # statsmodels' CR1 factor carries the OLS (n - 1)/(n - k) term; with the constant as the
    # only regressor it is 1, kept so the formula reads like the reference.
    k = 1.0
    correction = g_ok / (g_ok - 1.0) * (n_ok - 1.0) / (n_ok - k)
    se = np.sqrt(correction * sum_e2) / n_ok
    half = stats.t.isf(alpha / 2, g_ok - 1.0) * se
    low = np.where(valid, ybar - half, np.nan)
    high = np.where(valid, ybar + half, np.nan)
    return Interval(_as_output(low), _as_output(high))


def cluster_sufficient_stats(y: ArrayLike, groups: ArrayLike) -> ClusterStats:
    """Sufficient statistics for ``cluster_t_interval`` from raw observations.

    ``y`` and ``groups`` are 1-d arrays of equal length; ``groups`` holds any sortable cluster
    label (session ids as strings or ints). Returns ``ClusterStats(n, G, total,
    sum_cluster_sq, sum_cluster_cross, sum_size_sq)``, which unpacks straight into
    ``cluster_t_interval(*stats)``. This mirrors the SQL aggregation and serves tests and docs.

    Every distinct label is one cluster, so a request without a session must carry its own
    label (e.g. its request id): a shared placeholder such as ``""`` or NaN would merge all
    sessionless requests into one large cluster.
    """
    y = np.asarray(y, dtype=float)
    groups = np.asarray(groups)
    if y.ndim != 1 or groups.shape != y.shape:
        raise ValueError(
            f"y and groups must be 1-d arrays of equal length, got {y.shape} and {groups.shape}"
        )
    _, codes = np.unique(groups, return_inverse=True)
    sizes = np.bincount(codes)
    sums = np.bincount(codes, weights=y)
    return ClusterStats(
        n=int(y.size),
        n_clusters=int(sizes.size),
        total=float(sums.sum()),
        sum_cluster_sq=float(np.dot(sums, sums)),
        sum_cluster_cross=float(np.dot(sums, sizes)),
        sum_size_sq=int(np.dot(sizes, sizes)),
    )


def clip_unit(interval: Interval) -> Interval:
    """Clip both bounds to ``[0, 1]``, the range of recall and of rates; NaN stays NaN.

    Symmetric t-intervals can poke outside ``[0, 1]`` near the edges, which is only noise for
    a quantity that cannot leave it.
    """
    low = np.clip(np.asarray(interval.low, dtype=float), 0.0, 1.0)
    high = np.clip(np.asarray(interval.high, dtype=float), 0.0, 1.0)
    return Interval(_as_output(low), _as_output(high))
