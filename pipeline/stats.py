"""Confidence intervals for the window metrics and for their changes, computed from per-group
sufficient statistics, and an anytime-valid confidence sequence for repeated looks.

The aggregation step reduces each window x slice x route x k group to a handful of sums in SQL
(counts, means, variances, per-session sums) and hands them here, so the interval functions take
those sufficient statistics rather than raw observations; the betting functions take the
observations in order. Each method is one numpy-vectorized function:
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
    "adjusted_difference_interval",
    "adjusted_t_interval",
    "bias_reduced_t_interval",
    "DifferenceInterval",
    "Interval",
    "all_binary",
    "betting_confidence_sequence",
    "clip_unit",
    "cluster_difference_interval",
    "cluster_sufficient_stats",
    "cr2_sufficient_stats",
    "cluster_t_interval",
    "cluster_wilson_interval",
    "hedged_capital",
    "newcombe_difference_interval",
    "t_interval",
    "welch_difference_interval",
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
    cr2: tuple[ArrayLike, ...] | None = None,
) -> Interval:
    """Wilson interval for a proportion of observations grouped in clusters (sessions), on the
    design-effect-adjusted effective sample size.

    Indicators within a session are correlated, so Wilson on ``n`` is too narrow. With
    ``p = successes / n``, ``V_cr`` the cluster-robust (CR1) variance of ``p`` built from the
    per-cluster sums exactly as in ``cluster_t_interval`` (the same arguments, with
    ``successes`` as the total), and ``t_d`` the ``1 - alpha/2`` quantile of Student's t with
    ``d`` degrees of freedom::

        deff  = max(1, V_cr / (p (1 - p) / n))        design effect, never below 1
        n_eff = n / deff                              (deff = 1 when p is 0 or 1)
        n_eff = n_eff * (t_{n - 1} / t_{G - 1})^2     degrees-of-freedom adjustment
        [low, high] = wilson_interval(p * n_eff, n_eff, alpha)

    Sources: L. Kish (1965), Survey Sampling (design effect); E. L. Korn, B. I. Graubard
    (1998), "Confidence intervals for proportions with small expected number of positive counts
    estimated from survey data", Survey Methodology 24(2):193-201 (the effective sample size,
    its cap at n, deff = 1 where it cannot be estimated, and the t_{n-1} / t_{G-1} adjustment,
    as R's ``survey::svyciprop`` applies it). Here Wilson replaces their Clopper-Pearson
    interval on the effective counts, as in ``wilson_interval`` elsewhere. ``tests/test_stats.py``
    checks it against ``proportion_confint(p * n_eff, n_eff, alpha, method="wilson")`` with
    ``V_cr`` from statsmodels' ``OLS(y, ones).fit(cov_type="cluster")``, and its coverage by
    simulation.

    At ``0/n`` and ``n/n`` the design effect cannot be estimated and is taken as 1, so the bound
    moves monotonically from 0 successes to 1. With ``G <= 1`` both bounds are NaN. When every
    cluster is a single request, ``deff = n / (n - 1)`` and the interval is slightly wider than
    plain Wilson; callers use ``wilson_interval`` for groups without sessions.

    ``cr2 = (cr2_cluster_sq, cr2_cluster_cross, cr2_size_sq, cr2_size_b2, max_size)`` (the
    indicator's own CR2 sums, and the size sums of ``bias_reduced_t_interval``): where a cluster
    holds more than one request, ``V_cr`` is the bias-reduced (CR2) variance ``n (cr2_cluster_sq
    - 2 p cr2_cluster_cross + p^2 cr2_size_sq) / n^2`` and ``G - 1`` the Bell-McCaffrey degrees
    of freedom, as there (CR1 with G - 1 covered a pass rate 0.53 of the time with one session
    of 40 requests and 10 single requests).
    """
    alpha = _check_alpha(alpha)
    n = np.asarray(n, dtype=float)
    n_clusters = np.asarray(n_clusters, dtype=float)
    successes = np.asarray(successes, dtype=float)
    valid = (n_clusters > 1) & (n > 1) & (successes >= 0) & (successes <= n)
    n_ok = np.where(valid, n, 2.0)
    g_ok = np.where(valid, n_clusters, 2.0)
    p = np.where(valid, successes, 0.0) / n_ok
    sum_e2 = np.maximum(
        np.asarray(sum_cluster_sq, dtype=float)
        - 2.0 * p * np.asarray(sum_cluster_cross, dtype=float)
        + p * p * np.asarray(sum_size_sq, dtype=float), 0.0)
    v_cr = g_ok / (g_ok - 1.0) * sum_e2 / (n_ok * n_ok)
    df = g_ok - 1.0
    if cr2 is not None:
        cr2_sq, cr2_cross, cr2_size_sq, cr2_size_b2, max_size = (
            np.asarray(value, dtype=float) for value in cr2)
        use = valid & (max_size > 1)
        v_cr2 = np.maximum(cr2_sq - 2.0 * p * cr2_cross + p * p * cr2_size_sq, 0.0) / n_ok
        v_cr = np.where(use, v_cr2, v_cr)
        df = np.where(use, _bell_mccaffrey_df(n_ok, sum_size_sq, cr2_size_sq, cr2_size_b2), df)
    v_srs = p * (1.0 - p) / n_ok
    interior = v_srs > 0
    deff = np.maximum(1.0, np.where(interior, v_cr, 1.0) / np.where(interior, v_srs, 1.0))
    n_eff = n_ok / deff * (stats.t.isf(alpha / 2, n_ok - 1.0)
                           / stats.t.isf(alpha / 2, df)) ** 2
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


def adjusted_t_interval(
    n: ArrayLike,
    n_clusters: ArrayLike,
    total: ArrayLike,
    sum_cluster_sq: ArrayLike,
    sum_cluster_cross: ArrayLike,
    sum_size_sq: ArrayLike,
    alpha: ArrayLike = 0.05,
) -> Interval:
    """Interval for a mean of values in ``[0, 1]`` (recalls): the cluster-robust t-interval of
    the sample with one value 0 and one value 1 added, each a cluster of its own.

    A t-interval trusts the sample to show the spread of the values. Recall is often skewed:
    most requests find everything, a few find nothing. A small window then often holds no 0,
    its sample variance is tiny, and the t-interval sits above the true mean (1 at 85 %, 0.9
    at 10 %, 0 at 5 %: it covers 0.44 of the time at 10 requests, 0.78 at 30). The two added
    values put the widest spread a value in ``[0, 1]`` can have into every sample, which a
    large sample outweighs (the interval is the t-interval's from a few hundred requests on)
    and a small one does not. It carries to values between 0 and 1 the rule Agresti and Caffo
    give for a difference of proportions (add one success and one failure to each sample).
    With the sums of ``cluster_t_interval`` (``n``, ``G`` clusters, ``total``,
    ``sum_cluster_sq``, ``sum_cluster_cross``, ``sum_size_sq``)::

        n' = n + 2,  G' = G + 2,  total' = total + 1,
        sum_cluster_sq' = sum_cluster_sq + 1,  sum_cluster_cross' = sum_cluster_cross + 1,
        sum_size_sq' = sum_size_sq + 2
        ybar'   = total' / n'
        sum e^2 = sum_cluster_sq' - 2 ybar' sum_cluster_cross' + ybar'^2 sum_size_sq'
        V       = G' / (G' - 1) * sum e^2 / n'^2
        [low, high] = ybar' -/+ t_{1 - alpha/2, G - 1} * sqrt(V)

    The degrees of freedom are those of the observed clusters (``G - 1``); without sessions
    every value is its own cluster, ``G = n``, and ``V`` is the sample variance of the ``n + 2``
    values over ``n + 2``. The centre moves towards 1/2 by at most ``1 / (n + 2)``, less than
    the half-width, so the interval always holds the sample mean. Undefined (NaN) for
    ``G <= 1``, as the t-interval. After A. Agresti, B. Caffo (2000), "Simple and effective
    confidence intervals for proportions and differences of proportions result from adding two
    successes and two failures", The American Statistician 54(4):280-288 (for one proportion
    they add two of each; one of each, to each sample, for a difference). ``tests/test_stats.py``
    checks its variance against statsmodels' cluster-robust OLS on the augmented sample (whose
    own interval would take G + 1 degrees of freedom), and ``tests/test_aggregate.py`` its
    coverage on skewed and spread-out recalls by simulation.
    """
    alpha = _check_alpha(alpha)
    n = np.asarray(n, dtype=float)
    n_clusters = np.asarray(n_clusters, dtype=float)
    valid = (n_clusters > 1) & (n > 1)
    g_ok = np.where(valid, n_clusters, 2.0)
    _, ybar, var, _ = _cluster_mean_variance(_with_a_0_and_a_1(
        (n, n_clusters, total, sum_cluster_sq, sum_cluster_cross, sum_size_sq)))
    half = stats.t.isf(alpha / 2, g_ok - 1.0) * np.sqrt(var)
    return Interval(_as_output(np.where(valid, ybar - half, np.nan)),
                    _as_output(np.where(valid, ybar + half, np.nan)))


def bias_reduced_t_interval(
    n: ArrayLike,
    n_clusters: ArrayLike,
    total: ArrayLike,
    sum_cluster_sq: ArrayLike,
    sum_cluster_cross: ArrayLike,
    sum_size_sq: ArrayLike,
    cr2_cluster_sq: ArrayLike,
    cr2_cluster_cross: ArrayLike,
    cr2_size_sq: ArrayLike,
    cr2_size_b2: ArrayLike,
    max_size: ArrayLike,
    alpha: ArrayLike = 0.05,
) -> Interval:
    """``adjusted_t_interval`` with the bias-reduced (CR2) variance and Bell-McCaffrey degrees
    of freedom where a cluster holds more than one value; ``adjusted_t_interval`` itself where
    every cluster is a single value (``max_size <= 1``).

    CR1 divides by ``G - 1`` as if every cluster carried an equal share of the mean. When one
    session holds most requests of a window, the mean sits on that session's own mean, its
    residual ``S_g - n_g ybar`` is near 0, and CR1 sees almost no spread: with one session of 40
    requests and 10 single requests the 95 % interval covered 0.41 of the time, with 90 + 10
    0.16. For the mean (the constant the only regressor) CR2 weighs each cluster's squared
    residual by ``w_g = 1 / (1 - n_g / n)`` (``1 / (1 - h_gg)``, its leverage), which makes the
    variance unbiased when the values are independent, and the degrees of freedom are those of
    that quadratic form (Satterthwaite): ``n^2 / tr(B^2)``, ``B = W^1/2 (D - nu nu' / n)
    W^1/2``, ``D = diag(n_g)``, ``nu = (n_g)``, which is ``G - 1`` when all clusters are the
    same size and near 1 when one cluster holds most values. From the sums of
    sql/window_metrics.sql (``cr2_cluster_sq = sum S_g^2 / (n - n_g)``, ``cr2_cluster_cross =
    sum S_g n_g / (n - n_g)``, ``cr2_size_sq = sum n_g^2 / (n - n_g)``, ``cr2_size_b2 = sum
    (n_g^2 / (n (n - n_g)))^2``), with a 0 and a 1 added as in ``adjusted_t_interval`` (each a
    cluster of its own, weighed by ``n' / (n' - 1)``; the observed clusters keep the weights of
    the observed ``n``, slightly above those of ``n' = n + 2``)::

        ybar' = (total + 1) / n'
        V     = (n (cr2_cluster_sq - 2 ybar' cr2_cluster_cross + ybar'^2 cr2_size_sq)
                 + n' / (n' - 1) (ybar'^2 + (1 - ybar')^2)) / n'^2
        df    = 1 / (sum_size_sq / n^2 + (cr2_size_sq / n)^2 - cr2_size_b2)
        [low, high] = ybar' -/+ t_{1 - alpha/2, df} * sqrt(V)

    Sources: R. M. Bell, D. F. McCaffrey (2002), "Bias reduction in standard errors for linear
    regression with multi-stage samples", Survey Methodology 28(2):169-181; J. E. Pustejovsky,
    E. Tipton (2018), "Small-sample methods for cluster-robust variance estimation and
    hypothesis testing in fixed effects models", J. Business & Economic Statistics
    36(4):672-683; G. W. Imbens, M. Kolesar (2016), "Robust standard errors in small samples:
    some practical advice", Review of Economics and Statistics 98(4):701-712 (the degrees of
    freedom under working independence). NaN for ``G <= 1``.
    """
    alpha = _check_alpha(alpha)
    n = np.asarray(n, dtype=float)
    n_clusters = np.asarray(n_clusters, dtype=float)
    max_size = np.asarray(max_size, dtype=float)
    plain = adjusted_t_interval(n, n_clusters, total, sum_cluster_sq, sum_cluster_cross,
                                sum_size_sq, alpha)
    valid = (n_clusters > 1) & (n > 1)
    ybar = (np.asarray(total, dtype=float) + 1.0) / (np.where(valid, n, 2.0) + 2.0)
    use = valid & (max_size > 1)
    var, df = _bias_reduced_side(
        (n, n_clusters, total, sum_cluster_sq, sum_cluster_cross, sum_size_sq),
        (cr2_cluster_sq, cr2_cluster_cross, cr2_size_sq, cr2_size_b2, max_size), 1.0, valid,
        ybar, np.ones_like(ybar), np.ones_like(ybar))
    half = stats.t.isf(alpha / 2, df) * np.sqrt(var)
    return Interval(_as_output(np.where(use, ybar - half, plain.low)),
                    _as_output(np.where(use, ybar + half, plain.high)))


def _bell_mccaffrey_df(n: np.ndarray, sum_size_sq: ArrayLike, cr2_size_sq: ArrayLike,
                       cr2_size_b2: ArrayLike) -> np.ndarray:
    # n^2 / tr(B^2) = 1 / (sum q_g^2 + sum_{g != h} b_g b_h), q_g = n_g / n,
    # b_g = n_g^2 / (n (n - n_g)); the off-diagonal sum is >= 0 (rounding of the largest term
    # aside). Equal sizes give G - 1, all singletons n - 1.
    b_sum = np.asarray(cr2_size_sq, dtype=float) / n
    cross = np.maximum(b_sum * b_sum - np.asarray(cr2_size_b2, dtype=float), 0.0)
    tr_b2 = np.asarray(sum_size_sq, dtype=float) / (n * n) + cross
    return np.where(tr_b2 > 0, 1.0 / np.where(tr_b2 > 0, tr_b2, 1.0), 1.0)


def _with_a_0_and_a_1(group: tuple[ArrayLike, ...], each: ArrayLike = 1.0
                      ) -> tuple[np.ndarray, ...]:
    """The sums of ``cluster_t_interval`` with `each` values 0 and `each` values 1 added,
    every one a cluster of its own: ``n + 2a, G + 2a, total + a, sum S_g^2 + a,
    sum S_g n_g + a, sum n_g^2 + 2a`` (a = `each`, one by default; it may be fractional)."""
    each = np.asarray(each, dtype=float)
    return tuple(np.asarray(value, dtype=float) + extra * each
                 for value, extra in zip(group, (2.0, 2.0, 1.0, 1.0, 1.0, 2.0), strict=True))


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


def cr2_sufficient_stats(y: ArrayLike, groups: ArrayLike) -> tuple[float, ...]:
    """The CR2 sums sql/window_metrics.sql adds to ``cluster_sufficient_stats``' from raw
    observations: ``(sum S_g^2 / (n - n_g), sum S_g n_g / (n - n_g), sum n_g^2 / (n - n_g),
    sum (n_g^2 / (n (n - n_g)))^2, max n_g)``, a cluster of all ``n`` values counting 0, for
    ``bias_reduced_t_interval`` and ``cluster_wilson_interval(..., cr2=...)``. Serves tests."""
    y = np.asarray(y, dtype=float)
    _, codes = np.unique(np.asarray(groups), return_inverse=True)
    sizes = np.bincount(codes).astype(float)
    sums = np.bincount(codes, weights=y)
    n = float(y.size)
    w = np.where(sizes < n, 1.0 / np.maximum(n - sizes, 1.0), 0.0)
    return (float(np.sum(sums * sums * w)), float(np.sum(sums * sizes * w)),
            float(np.sum(sizes * sizes * w)), float(np.sum((sizes * sizes * w / n) ** 2)),
            float(sizes.max()))


def clip_unit(interval: Interval) -> Interval:
    """Clip both bounds to ``[0, 1]``, the range of recall and of rates; NaN stays NaN.

    Symmetric t-intervals can poke outside ``[0, 1]`` near the edges, which is only noise for
    a quantity that cannot leave it.
    """
    low = np.clip(np.asarray(interval.low, dtype=float), 0.0, 1.0)
    high = np.clip(np.asarray(interval.high, dtype=float), 0.0, 1.0)
    return Interval(_as_output(low), _as_output(high))


def all_binary(n: ArrayLike, total: ArrayLike, ones: ArrayLike) -> FloatOrArray:
    """Whether every one of ``n`` values in ``[0, 1]`` is 0 or 1, from their sum ``total`` and
    the count ``ones`` of those equal to 1: the values below 1 then sum to nothing, so each is 0.

    A mean of such values is a proportion (``ones / n``), and its interval is the binomial one:
    a t-interval puts ``[1, 1]`` on five requests that all found their one gold chunk (sample
    variance 0), which covers a true rate of 0.95 less than one time in four. Sums of 0s and 1s
    are exact in floating point; a recall between 0 and 1 (a share of what was needed) adds at
    least 1 / needed, far above the tolerance of ``1e-9 * n``. An empty group is not binary.
    """
    n = np.asarray(n, dtype=float)
    gap = np.asarray(total, dtype=float) - np.asarray(ones, dtype=float)
    return _as_output((n > 0) & (np.abs(gap) <= 1e-9 * np.maximum(n, 1.0)))


def no_spread(n: ArrayLike, total: ArrayLike, sum_cluster_sq: ArrayLike,
              sum_cluster_cross: ArrayLike, sum_size_sq: ArrayLike) -> FloatOrArray:
    """Whether ``n`` values in ``[0, 1]`` show no spread a (cluster-robust) t-interval can see,
    from the sums ``cluster_t_interval`` takes: every session's sum is its size times the mean
    (without sessions, each value its own cluster: every value equal), so the interval is a
    point however few the values are.

    A t-interval of ``[0.5, 0.5]`` on five requests that each found one of their two gold
    chunks covers a true mean of 0.475 about one time in four. Such a mean gets a proportion's
    interval instead (Wilson's, on the sums): a proportion's variance ``p (1 - p)`` is the
    largest a value in ``[0, 1]`` with mean ``p`` can have, so it is never too narrow for want
    of spread. The residual is a sum of squares of sums of at most ``sum_size_sq`` in size; the
    tolerance is float rounding of it, far below the least spread of two different recalls.
    Fewer than two values have their spread undefined, not zero (their t-interval is
    undefined too), and are not flat.
    """
    n = np.asarray(n, dtype=float)
    size_sq = np.asarray(sum_size_sq, dtype=float)
    mean = np.asarray(total, dtype=float) / np.maximum(n, 1.0)
    residual = (np.asarray(sum_cluster_sq, dtype=float)
                - 2.0 * mean * np.asarray(sum_cluster_cross, dtype=float) + mean * mean * size_sq)
    return _as_output((n > 1) & (residual <= 1e-12 * np.maximum(size_sq, 1.0)))


# --- differences between two groups and anytime-valid sequences ----------------------------------


class DifferenceInterval(NamedTuple):
    """Interval for a difference of means (second group minus first) with what it is built from.

    ``low`` and ``high`` come first, so the bounds read as in ``Interval``; ``delta`` is the
    point estimate, ``se`` its standard error and ``df`` the degrees of freedom of the t
    quantile. NaN where the method is undefined.
    """

    low: FloatOrArray
    high: FloatOrArray
    delta: FloatOrArray
    se: FloatOrArray
    df: FloatOrArray


def _satterthwaite_difference(
    valid: np.ndarray,
    delta: np.ndarray,
    var1: np.ndarray,
    df1: np.ndarray,
    var2: np.ndarray,
    df2: np.ndarray,
    alpha: np.ndarray,
) -> DifferenceInterval:
    # Shared by the Welch and cluster-robust differences: two independent variance estimates
    # of the group means, each with its own degrees of freedom, combined by Satterthwaite.
    total = var1 + var2
    spread = var1 * var1 / df1 + var2 * var2 / df2
    # Both variances zero (constant data in both groups): df is 0/0, but se = 0 makes the
    # interval [delta, delta] whatever the quantile, because df never drops below min(df1, df2).
    degenerate = spread == 0
    df = np.where(degenerate, np.nan, total * total / np.where(degenerate, 1.0, spread))
    se = np.sqrt(total)
    half = np.where(degenerate, 0.0, stats.t.isf(alpha / 2, np.where(degenerate, 1.0, df)) * se)

    def masked(values: np.ndarray) -> FloatOrArray:
        return _as_output(np.where(valid, values, np.nan))

    return DifferenceInterval(
        masked(delta - half), masked(delta + half), masked(delta), masked(se), masked(df)
    )


def welch_difference_interval(
    n1: ArrayLike,
    mean1: ArrayLike,
    var1: ArrayLike,
    n2: ArrayLike,
    mean2: ArrayLike,
    var2: ArrayLike,
    alpha: ArrayLike = 0.05,
) -> DifferenceInterval:
    """Welch t-interval for ``mean2 - mean1`` from each group's count, mean and sample variance.

    Group 1 is the reference (the baseline) and group 2 the group compared with it (the
    window), so a drop in group 2 gives a negative difference. ``var`` is the sample variance
    with ``ddof=1`` (SQL ``var_samp``). With ``v_j = var_j / n_j``::

        delta = mean2 - mean1
        se    = sqrt(v1 + v2)
        df    = (v1 + v2)^2 / (v1^2 / (n1 - 1) + v2^2 / (n2 - 1))      (Welch-Satterthwaite)
        [low, high] = delta -/+ t_{1 - alpha/2, df} * se

    Sources: B. L. Welch (1947), "The generalization of 'Student's' problem when several
    different population variances are involved", Biometrika 34(1/2):28-35; F. E.
    Satterthwaite (1946), "An approximate distribution of estimates of variance components",
    Biometrics Bulletin 2(6):110-114. Equal to ``statsmodels.stats.weightstats.CompareMeans(
    DescrStatsW(y2), DescrStatsW(y1)).tconfint_diff(alpha, usevar="unequal")`` (``se`` is its
    ``std_meandiff_separatevar``, ``df`` its ``dof_satt()``) and to ``scipy.stats.ttest_ind(y2,
    y1, equal_var=False).confidence_interval(1 - alpha)``.

    Edge cases: with ``n <= 1`` in either group there is no variance to estimate and all five
    fields are NaN. Constant data in one group (``var == 0``) leaves the other group's
    variance alone, with ``df = n_other - 1``, as in statsmodels. Constant data in both groups
    gives the degenerate interval ``[delta, delta]`` with ``se = 0`` and ``df`` NaN (0/0);
    statsmodels returns NaN bounds there, and the degenerate interval is the limit of its
    bounds as both variances shrink to zero. Proportions (0/1 data) are better served by
    ``newcombe_difference_interval``.
    """
    alpha = _check_alpha(alpha)
    n1 = np.asarray(n1, dtype=float)
    n2 = np.asarray(n2, dtype=float)
    valid = (n1 > 1) & (n2 > 1)
    # SQL returns NULL variance for a single row; masking keeps undefined groups warning-free.
    n1_ok = np.where(valid, n1, 2.0)
    n2_ok = np.where(valid, n2, 2.0)
    v1 = np.where(valid, np.asarray(var1, dtype=float), 0.0) / n1_ok
    v2 = np.where(valid, np.asarray(var2, dtype=float), 0.0) / n2_ok
    delta = np.asarray(mean2, dtype=float) - np.asarray(mean1, dtype=float)
    return _satterthwaite_difference(valid, delta, v1, n1_ok - 1.0, v2, n2_ok - 1.0, alpha)


def _cluster_mean_variance(
    group: tuple[ArrayLike, ...],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    # The mean and its CR1 variance exactly as in cluster_t_interval, returned instead of being
    # turned into an interval: (valid, ybar, V, G - 1).
    if len(group) != len(ClusterStats._fields):
        raise ValueError(
            f"a cluster group needs the {len(ClusterStats._fields)} ClusterStats fields "
            f"{ClusterStats._fields}, got {len(group)} values"
        )
    n, n_clusters, total, sum_cluster_sq, sum_cluster_cross, sum_size_sq = (
        np.asarray(value, dtype=float) for value in group
    )
    valid = (n_clusters > 1) & (n > 0)
    n_ok = np.where(valid, n, 2.0)
    g_ok = np.where(valid, n_clusters, 2.0)
    ybar = total / n_ok
    sum_e2 = sum_cluster_sq - 2.0 * ybar * sum_cluster_cross + ybar * ybar * sum_size_sq
    sum_e2 = np.maximum(sum_e2, 0.0)  # cancellation residue, as in cluster_t_interval
    # CR1 factor G/(G-1); statsmodels' extra (n-1)/(n-k) is 1 with the constant as the only
    # regressor.
    var = np.where(valid, g_ok / (g_ok - 1.0) * sum_e2 / (n_ok * n_ok), 0.0)
    return valid, ybar, var, g_ok - 1.0


def cluster_difference_interval(
    group1: tuple[ArrayLike, ...],
    group2: tuple[ArrayLike, ...],
    alpha: ArrayLike = 0.05,
) -> DifferenceInterval:
    """Cluster-robust Welch interval for ``mean2 - mean1`` when requests share sessions.

    Each group is given by the six sufficient statistics of ``cluster_t_interval``, in
    ``ClusterStats`` order (a ``ClusterStats``, or any 6-tuple of scalars or equal-shape
    arrays): ``n, G, total, sum S_g^2, sum S_g n_g, sum n_g^2``. Group 1 is the reference (the
    baseline), group 2 the group compared with it (the window), as in
    ``welch_difference_interval``. For each group ``j``, as in ``cluster_t_interval``::

        ybar_j = total_j / n_j
        V_j    = G_j / (G_j - 1) * sum_g (S_g - n_g ybar_j)^2 / n_j^2       (CR1)

    and then, the groups being independent (no session spans both)::

        delta = ybar2 - ybar1
        se    = sqrt(V1 + V2)
        df    = (V1 + V2)^2 / (V1^2 / (G1 - 1) + V2^2 / (G2 - 1))       (Satterthwaite)
        [low, high] = delta -/+ t_{1 - alpha/2, df} * se

    Sources: A. C. Cameron, D. L. Miller (2015), "A practitioner's guide to cluster-robust
    inference", J. Human Resources 50(2):317-372 (CR1 and G - 1 degrees of freedom per group);
    Satterthwaite (1946) and Welch (1947) as in ``welch_difference_interval``. Each ``V_j``
    equals ``bse[0]**2`` of statsmodels' ``OLS(y_j, ones).fit(cov_type="cluster",
    cov_kwds={"groups": g_j})`` and ``G_j - 1`` its ``df_resid_inference``; statsmodels has no
    two-sample version.

    All-singleton clusters: the uncorrected (CR0) variance is ``sum (y - ybar)^2 / n^2 =
    (n - 1)/n * var / n``; the CR1 factor ``G/(G-1) = n/(n-1)`` makes it exactly ``var / n``,
    and ``G - 1 = n - 1``, so the result coincides with ``welch_difference_interval`` (same
    ``se``, ``df`` and bounds, up to rounding of the sums). A group with ``G <= 1`` gives NaN in
    all five fields; constant data behaves as in ``welch_difference_interval`` (zero-width
    interval when both groups are constant, ``df`` NaN).
    """
    alpha = _check_alpha(alpha)
    valid1, ybar1, var1, df1 = _cluster_mean_variance(group1)
    valid2, ybar2, var2, df2 = _cluster_mean_variance(group2)
    return _satterthwaite_difference(
        valid1 & valid2, ybar2 - ybar1, var1, df1, var2, df2, alpha
    )


def adjusted_difference_interval(
    group1: tuple[ArrayLike, ...],
    group2: tuple[ArrayLike, ...],
    alpha: ArrayLike = 0.05,
    cr2: tuple[tuple[ArrayLike, ...], tuple[ArrayLike, ...]] | None = None,
) -> DifferenceInterval:
    """``cluster_difference_interval`` of two means of values in ``[0, 1]`` (recalls), each
    group with values 0 and 1 added in proportion to its size: the smaller group one 0 and
    one 1, the other ``n_j / n_small`` of each, every added value a cluster of its own. It
    carries to recalls the rule Agresti and Caffo give for a difference of proportions (one
    success and one failure added to each sample), as ``adjusted_t_interval`` does for one
    mean. In proportion, so that with equal means both centres move alike and the difference
    is not pushed either way (a window a seventh of its baseline's size, given one of each
    like the baseline, moved further towards 1/2 and was flagged a drop more often than
    alpha/2); with unequal means it moves towards 0. Without the added values a small window
    of skewed recalls that happens to hold no low recall is read as nearly certain, and the
    difference's interval is too narrow. ``delta`` is the difference of the augmented means;
    the degrees of freedom stay those of the observed clusters (``G_j - 1`` in
    Satterthwaite's formula). NaN where a group has ``G <= 1``. After A. Agresti, B. Caffo
    (2000), The American Statistician 54(4):280-288; ``tests/test_stats.py`` checks it
    against statsmodels' cluster-robust variances of the augmented samples.

    ``cr2 = (cr2_1, cr2_2)``, each side's ``(cr2_cluster_sq, cr2_cluster_cross, cr2_size_sq,
    cr2_size_b2, max_size)`` as in ``bias_reduced_t_interval``: a side where a cluster holds
    more than one value gets that function's bias-reduced (CR2) variance, its ``a`` added 0s
    and 1s each a cluster of its own weighed by ``n' / (n' - 1)`` (``n' = n + 2a``), and its
    Bell-McCaffrey degrees of freedom in place of ``G - 1``; a side of single values (or
    ``max_size`` NaN: no CR2 sums) keeps CR1 with ``G - 1``, so the result is unchanged
    where no cluster holds more than one value.
    """
    alpha = _check_alpha(alpha)
    sizes = [np.asarray(group[0], dtype=float) for group in (group1, group2)]
    smaller = np.maximum(np.minimum(*sizes), 1.0)
    sides = []
    for j, (group, size) in enumerate(zip((group1, group2), sizes, strict=True)):
        n_clusters = np.asarray(group[1], dtype=float)
        each = size / smaller
        valid, ybar, var, _ = _cluster_mean_variance(_with_a_0_and_a_1(group, each))
        valid = valid & (n_clusters > 1)
        df = np.where(valid, n_clusters, 2.0) - 1.0
        if cr2 is not None:
            var, df = _bias_reduced_side(group, cr2[j], each, valid, ybar, var, df)
        sides.append((valid, ybar, var, df))
    (valid1, ybar1, var1, df1), (valid2, ybar2, var2, df2) = sides
    return _satterthwaite_difference(valid1 & valid2, ybar2 - ybar1, var1, df1, var2, df2,
                                     alpha)


def _bias_reduced_side(group, cr2, each, valid, ybar, var, df):
    # The CR2 variance and Bell-McCaffrey degrees of freedom of a mean with `each` 0s and 1s
    # added (ybar the augmented mean) where a cluster holds more than one value: one side of
    # adjusted_difference_interval, or bias_reduced_t_interval's one mean (each = 1); (var, df)
    # as given elsewhere.
    with np.errstate(invalid="ignore", divide="ignore"):
        n = np.asarray(group[0], dtype=float)
        cr2_sq, cr2_cross, cr2_size_sq, cr2_size_b2, max_size = (
            np.nan_to_num(np.asarray(value, dtype=float)) for value in cr2)
        use = valid & (max_size > 1)
        n_ok = np.where(use, n, 2.0)
        n_aug = n_ok + 2.0 * each
        observed = np.maximum(cr2_sq - 2.0 * ybar * cr2_cross + ybar * ybar * cr2_size_sq,
                              0.0) * n_ok
        added = n_aug / (n_aug - 1.0) * each * (ybar * ybar + (1.0 - ybar) ** 2)
        var_cr2 = (observed + added) / (n_aug * n_aug)
        df_cr2 = _bell_mccaffrey_df(n_ok, np.asarray(group[5], dtype=float), cr2_size_sq,
                                    cr2_size_b2)
    return np.where(use, var_cr2, var), np.where(use, df_cr2, df)


def newcombe_difference_interval(
    x1: ArrayLike, n1: ArrayLike, x2: ArrayLike, n2: ArrayLike, alpha: ArrayLike = 0.05
) -> Interval:
    """Newcombe's hybrid score interval for ``p2 - p1``, built from the two Wilson intervals.

    Group 1 is the reference (the baseline), group 2 the group compared with it (the window),
    as in ``welch_difference_interval``: a drop gives negative bounds, and swapping the groups
    negates and swaps the bounds. With ``p_j = x_j / n_j`` and ``[l_j, u_j] =
    wilson_interval(x_j, n_j, alpha)``::

        delta = p2 - p1
        low   = delta - sqrt((p2 - l2)^2 + (u1 - p1)^2)
        high  = delta + sqrt((u2 - p2)^2 + (p1 - l1)^2)

    Source: R. G. Newcombe (1998), "Interval estimation for the difference between independent
    proportions: comparison of eleven methods", Statistics in Medicine 17(8):873-890, method 10
    (score intervals without continuity correction). Newcombe's examples "a/m vs b/n" are
    intervals for ``a/m - b/n``, i.e. ``x2=a, n2=m, x1=b, n1=n`` here. Equal to
    ``statsmodels.stats.proportion.confint_proportions_2indep(x2, n2, x1, n1, method="newcomb",
    compare="diff", alpha=alpha)``; mind the order, since statsmodels' interval is for
    ``count1/nobs1 - count2/nobs2``. Its ``method="score"`` (Miettinen-Nurminen) raises on
    some small samples; this closed form is defined for every valid count.

    Edge cases: the bounds lie in ``[-1, 1]``; ``0/n`` and ``n/n`` are fine (a Wilson bound is
    then exactly 0 or 1, so ``n/n`` vs ``0/m`` has ``high == 1`` exactly) and so is ``n = 1``.
    Where ``n <= 0`` or a count lies outside ``[0, n]`` in either group, both bounds are NaN.
    Sessions: like ``wilson_interval`` this assumes independent requests; with clustered
    indicators use ``cluster_difference_interval`` on the 0/1 values.
    """
    alpha = _check_alpha(alpha)
    x1 = np.asarray(x1, dtype=float)
    n1 = np.asarray(n1, dtype=float)
    x2 = np.asarray(x2, dtype=float)
    n2 = np.asarray(n2, dtype=float)
    # wilson_interval already puts NaN on invalid groups; the stand-ins only keep the
    # proportions warning-free there.
    p1 = np.where(n1 > 0, x1, 0.0) / np.where(n1 > 0, n1, 1.0)
    p2 = np.where(n2 > 0, x2, 0.0) / np.where(n2 > 0, n2, 1.0)
    return hybrid_difference_interval(p1, wilson_interval(x1, n1, alpha),
                                      p2, wilson_interval(x2, n2, alpha))


def hybrid_difference_interval(
    p1: ArrayLike, interval1: Interval, p2: ArrayLike, interval2: Interval
) -> Interval:
    """Newcombe's hybrid interval for ``p2 - p1`` from any interval of each proportion.

    With ``[l_j, u_j]`` an interval for ``p_j`` at the wanted level::

        low  = (p2 - p1) - sqrt((p2 - l2)^2 + (u1 - p1)^2)
        high = (p2 - p1) + sqrt((u2 - p2)^2 + (p1 - l1)^2)

    With Wilson intervals this is ``newcombe_difference_interval`` (Newcombe 1998, method 10);
    with ``cluster_wilson_interval`` on sessions it is the same square-and-add on the
    design-effect-adjusted intervals, the construction the MOVER family generalises (G. Y. Zou,
    A. Donner (2008), "Construction of confidence limits about effect measures: a general
    approach", Statistics in Medicine 27(10):1693-1702). NaN where either interval is NaN.
    """
    p1 = np.asarray(p1, dtype=float)
    p2 = np.asarray(p2, dtype=float)
    low1, high1 = (np.asarray(b, dtype=float) for b in interval1)
    low2, high2 = (np.asarray(b, dtype=float) for b in interval2)
    delta = p2 - p1
    low = delta - np.sqrt((p2 - low2) ** 2 + (high1 - p1) ** 2)
    high = delta + np.sqrt((high2 - p2) ** 2 + (p1 - low1) ** 2)
    return Interval(_as_output(np.asarray(low)), _as_output(np.asarray(high)))


_HEDGE_THETA = 0.5  # weight of the upward bet; 1/2 treats both directions alike


def _check_unit(values: np.ndarray, name: str) -> None:
    if values.size and not (np.all(values >= 0.0) and np.all(values <= 1.0)):
        raise ValueError(
            f"{name} must lie in [0, 1] (NaN not allowed); rescale bounded data to [0, 1] first"
        )


def _hedged_log_capital(
    x: np.ndarray, means: np.ndarray, alpha: float, truncation: float
) -> tuple[np.ndarray, np.ndarray]:
    # log(theta K+_t(m)) and log((1 - theta) K-_t(m)), shape (..., T, M). Logs keep long runs
    # of large factors finite; the factors are >= 1 - truncation > 0, so every log exists.
    t = np.arange(1, x.shape[-1] + 1, dtype=float)
    mu_hat = (0.5 + np.cumsum(x, axis=-1)) / (t + 1.0)
    sigma2 = (0.25 + np.cumsum((x - mu_hat) ** 2, axis=-1)) / (t + 1.0)
    sigma2_before = np.concatenate(
        [np.full(x.shape[:-1] + (1,), 0.25), sigma2[..., :-1]], axis=-1
    )
    bet = np.sqrt(2.0 * np.log(2.0 / alpha) / (sigma2_before * t * np.log1p(t)))[..., None]
    with np.errstate(divide="ignore"):
        cap_up = truncation / means  # inf at m = 0, where x - m >= 0 needs no cap
        cap_down = truncation / (1.0 - means)  # inf at m = 1, likewise
    deviation = x[..., None] - means
    log_up = np.minimum(bet, cap_up)
    log_up *= deviation
    np.log1p(log_up, out=log_up)
    np.cumsum(log_up, axis=-2, out=log_up)
    log_up += np.log(_HEDGE_THETA)
    log_down = np.minimum(bet, cap_down)
    log_down *= deviation
    np.negative(log_down, out=log_down)
    np.log1p(log_down, out=log_down)
    np.cumsum(log_down, axis=-2, out=log_down)
    log_down += np.log(1.0 - _HEDGE_THETA)
    return log_up, log_down


def _check_betting_args(x: ArrayLike, alpha: float, truncation: float) -> tuple[np.ndarray, float]:
    alpha_arr = _check_alpha(alpha)
    if alpha_arr.ndim != 0:
        raise ValueError(f"alpha must be a single number here, got shape {alpha_arr.shape}")
    if not 0.0 < truncation < 1.0:
        raise ValueError(f"truncation must lie strictly between 0 and 1, got {truncation!r}")
    x = np.asarray(x, dtype=float)
    if x.ndim == 0:
        raise ValueError("x must be a sequence of observations (last axis = time), got a scalar")
    _check_unit(x, "observations x")
    return x, float(alpha_arr)


def hedged_capital(
    x: ArrayLike, means: ArrayLike, alpha: float = 0.05, truncation: float = 0.5
) -> np.ndarray:
    """Hedged betting capital ``K_t(m)`` against each candidate mean ``m``, after every step.

    ``x`` holds observations in ``[0, 1]`` in arrival order along its last axis (shape
    ``(..., T)``; leading axes are independent streams); ``means`` is a 1-d array of candidate
    means in ``[0, 1]`` (shape ``(M,)``). Returns ``K`` of shape ``(..., T, M)`` with
    ``K[..., t-1, j] = K_t(means[j])``. With ``c = truncation`` and ``theta = 1/2``::

        mu_t      = (1/2 + sum_{i<=t} x_i) / (t + 1)
        s2_t      = (1/4 + sum_{i<=t} (x_i - mu_i)^2) / (t + 1),          s2_0 = 1/4
        lam_t     = sqrt(2 log(2/alpha) / (s2_{t-1} t log(1 + t)))        (x_1..x_{t-1} only)
        lam+_t(m) = min(lam_t, c / m),     lam-_t(m) = min(lam_t, c / (1 - m))
        K+_t(m)   = prod_{i<=t} (1 + lam+_i(m) (x_i - m))
        K-_t(m)   = prod_{i<=t} (1 - lam-_i(m) (x_i - m))
        K_t(m)    = max(theta K+_t(m), (1 - theta) K-_t(m))

    Source: I. Waudby-Smith, A. Ramdas, "Estimating means of bounded random variables by
    betting", J. R. Stat. Soc. B 86(1):1-27 (online 2023), Section 4: the hedged capital
    process (Theorem 3) with predictable plug-in bets ``lambda^{PrPl+/-}`` truncated at
    ``c/m`` and ``c/(1-m)`` (they suggest ``c = 1/2`` or ``3/4``). The authors' package
    ``confseq`` (``betting.hedged_cs``) builds the same process but sizes the bets with
    ``log(1/alpha)``; bet sizes change only the width, never the validity.

    If every ``x_t`` has conditional mean ``m`` given the past, ``K+`` and ``K-`` are
    nonnegative martingales starting at 1 (the bets are predictable and every factor is at
    least ``1 - c > 0``), so ``K_t(m) <= theta K+ + (1 - theta) K-`` and Ville's inequality give
    ``P(exists t: K_t(m) >= 1/alpha) <= alpha``: ``K_t(m)`` is an e-process for ``H0: mean =
    m``. Values too large for a float come back as ``inf``; ``alpha`` only sizes the bets.
    """
    x, alpha = _check_betting_args(x, alpha, truncation)
    means = np.asarray(means, dtype=float)
    if means.ndim != 1:
        raise ValueError(f"means must be a 1-d array of candidate means, got shape {means.shape}")
    _check_unit(means, "candidate means")
    log_up, log_down = _hedged_log_capital(x, means, alpha, truncation)
    np.maximum(log_up, log_down, out=log_up)
    with np.errstate(over="ignore"):
        return np.exp(log_up, out=log_up)


def betting_confidence_sequence(
    x: ArrayLike, alpha: float = 0.05, grid: int | ArrayLike = 1001, truncation: float = 0.5
) -> Interval:
    """Anytime-valid confidence sequence for the mean of observations in ``[0, 1]``, by betting.

    ``x`` holds observations in arrival order along its last axis (shape ``(..., T)``; leading
    axes are independent streams). Returns ``Interval(low, high)`` of arrays of shape
    ``(..., T)``: the running intersection of the sets ``C_t`` after ``t = 1..T``
    observations. The guarantee, for every ``alpha`` fixed in advance::

        P(exists t >= 1: mu not in [low_t, high_t]) <= alpha

    holds over all times at once, so the sequence may be looked at after every observation and
    acted on whenever it excludes a value, with no correction for the number of looks.

    Construction: the confidence set ``C_t = {m : K_t(m) < 1/alpha}`` of the hedged capital
    ``K_t(m)`` of ``hedged_capital`` (Waudby-Smith & Ramdas, Section 4, Theorem 3; ``theta =
    1/2``, predictable plug-in bets truncated at ``c/m`` and ``c/(1-m)``, ``c = truncation``,
    ``1/2`` by default, ``3/4`` the other value the paper suggests). ``K+_t(m)`` is
    nonincreasing and ``K-_t(m)`` nondecreasing in ``m``, so ``C_t`` is an interval. It is
    evaluated on ``grid``: an integer ``g >= 2`` means ``g`` evenly spaced candidates on ``[0,
    1]`` (resolution ``1/(g-1)``); an array gives the candidates themselves. ``low_t`` is the
    largest candidate that ``theta K+_t`` rejects (0 if none) and ``high_t`` the smallest that
    ``(1 - theta) K-_t`` rejects (1 if none); by the monotonicity these bracket ``C_t``, so the
    grid costs at most one grid step of width on each side and nothing in validity. The
    running intersection ``low_t = max_{s<=t}``, ``high_t = min_{s<=t}`` keeps the guarantee.
    Work and memory are O(T x grid) per stream: 5,000 x 1,001 takes ~0.1 s and a few arrays
    of 40 MB.

    Assumptions: observations lie in ``[0, 1]`` (rescale other bounded scores first); their
    conditional mean given the past is the same ``mu`` at every step; no distribution, variance
    or independence beyond that is needed (independent draws with a common mean, or any
    martingale-difference sequence around ``mu``). Requests of one session are correlated, and
    their order then breaks the constant conditional mean: feed one value per session (the
    session's mean recall, in session order) and read the result as the mean over sessions.
    The order of ``x`` matters; shuffling the same values gives another valid sequence.

    Edge cases: no observations gives empty arrays; constant data (all 0, all 1 or any
    constant) shrinks onto that value; ``low_t > high_t`` means the running intersection is
    empty, which under the assumptions happens with probability at most ``alpha`` and otherwise
    signals that the mean moved. Observations outside ``[0, 1]`` or NaN raise ``ValueError``.
    """
    x, alpha = _check_betting_args(x, alpha, truncation)
    if np.ndim(grid) == 0:
        if int(grid) != grid or grid < 2:
            raise ValueError(f"grid must be an integer >= 2 or an array of means, got {grid!r}")
        means = np.linspace(0.0, 1.0, int(grid))
    else:
        means = np.asarray(grid, dtype=float)
        if means.ndim != 1 or means.size == 0:
            raise ValueError(
                f"grid must be a 1-d array of candidate means, got shape {means.shape}"
            )
        _check_unit(means, "grid")
    log_up, log_down = _hedged_log_capital(x, means, alpha, truncation)
    threshold = np.log(1.0 / alpha)
    # Candidates rejected by the upward bet lie below C_t, those rejected by the downward bet
    # above it; the nearest of each bracket C_t.
    low = np.where(log_up >= threshold, means, 0.0).max(axis=-1, initial=0.0)
    high = np.where(log_down >= threshold, means, 1.0).min(axis=-1, initial=1.0)
    low = np.maximum.accumulate(low, axis=-1)
    high = np.minimum.accumulate(high, axis=-1)
    return Interval(low, high)


# --- drift: e-values, the change detector's pieces, and many slices at once ----------------------


def bernstein_psi(lam: ArrayLike) -> np.ndarray:
    """``psi(lam) = -log(1 - lam) - lam`` for ``lam`` in ``[0, 1)``: the variance price of a bet.

    Source: X. Fan, I. Grama, Q. Liu (2015), "Exponential inequalities for martingales with
    applications", Electron. J. Probab. 20(1):1-22, Lemma 4.1: for ``xi >= -1`` and ``lam`` in
    ``[0, 1)``, ``exp(lam xi - psi(lam) xi^2) <= 1 + lam xi``.
    """
    lam = np.asarray(lam, dtype=float)
    return -np.log1p(-lam) - lam


def bernstein_log_evalue(
    boundary: ArrayLike, n: ArrayLike, total: ArrayLike, size_sq: ArrayLike, cross: ArrayLike,
    cluster_sq: ArrayLike, scale: ArrayLike, lam: ArrayLike, side: str,
) -> np.ndarray:
    """Log of an empirical-Bernstein e-value for the request-weighted mean of one window whose
    requests (values in ``[0, 1]``) come in independent sessions.

    Session ``g`` has ``n_g`` requests with sum ``S_g``; the window is given by the sums of
    ``cluster_t_interval`` — ``n = sum n_g``, ``total = sum S_g``, ``size_sq = sum n_g^2``,
    ``cross = sum S_g n_g``, ``cluster_sq = sum S_g^2`` — and ``scale >= max n_g``.
    ``side="drop"`` tests ``H0: mean >= c`` with ``xi_g = (n_g c - S_g) / scale``;
    ``side="rise"`` tests ``H0: mean <= c`` with ``xi_g = (S_g - n_g c) / scale``, for ``c =
    boundary`` clipped to ``[0, 1]`` (a bound outside it only makes the test conservative).
    Every ``xi_g`` lies in ``[-1, 1]``, and given the session sizes ``sum_g E xi_g = s n (c -
    mean) / scale <= 0`` under H0 (``s = +1`` drop, ``-1`` rise), whatever the sessions' own
    means. Fan et al.'s inequality (``bernstein_psi``), independence and ``1 + x <= e^x`` give,
    for ``lam`` in ``[0, 1)`` fixed before the window's values are seen::

        E prod_g exp(lam xi_g - psi(lam) xi_g^2) <= prod_g (1 + lam E xi_g)
                                                 <= exp(lam sum_g E xi_g) <= 1
        log e = lam sum_g xi_g - psi(lam) sum_g xi_g^2
              = [lam s (c n - total) scale - psi(lam) (c^2 size_sq - 2 c cross + cluster_sq)]
                / scale^2

    an e-value for H0 from five sums, so no request is read again. With one request per
    session (``scale = 1``) it is the per-observation factor of the empirical-Bernstein
    confidence sequences of S. R. Howard, A. Ramdas, J. McAuliffe, J. Sekhon (2021),
    "Time-uniform, nonparametric, nonasymptotic confidence sequences", Ann. Statist.
    49(2):1055-1080, and of I. Waudby-Smith, A. Ramdas (2023), Section 3, with one bet for the
    whole window. For ``lam <= 1/2`` each term grows with ``xi_g`` on ``[-1, 1]``, so the
    e-value grows as the boundary moves away from the data (the confidence set is an interval).
    Arguments broadcast; an empty window (``n = 0``) gives 0, an e-value of 1.
    """
    if side not in ("drop", "rise"):
        raise ValueError(f"side must be 'drop' or 'rise', got {side!r}")
    lam = np.asarray(lam, dtype=float)
    if np.any((lam < 0) | (lam >= 1)):
        raise ValueError("lam must lie in [0, 1)")
    c = np.clip(np.asarray(boundary, dtype=float), 0.0, 1.0)
    n = np.asarray(n, dtype=float)
    total = np.asarray(total, dtype=float)
    scale = np.maximum(np.asarray(scale, dtype=float), 1.0)
    sign = 1.0 if side == "drop" else -1.0
    linear = sign * (c * n - total) / scale
    quadratic = np.maximum(c * c * np.asarray(size_sq, dtype=float)
                           - 2.0 * c * np.asarray(cross, dtype=float)
                           + np.asarray(cluster_sq, dtype=float), 0.0) / (scale * scale)
    return lam * linear - bernstein_psi(lam) * quadratic


def bernstein_bet(drift: ArrayLike, spread: ArrayLike, cap: float = 0.5) -> np.ndarray:
    """The bet ``lam`` that maximizes ``lam drift - psi(lam) spread``, the expected log growth
    of ``bernstein_log_evalue`` when ``sum xi`` is expected to be ``drift`` and ``sum xi^2``
    ``spread``: ``psi'(lam) = lam / (1 - lam) = drift / spread``, so ``lam = drift / (drift +
    spread)``; capped at ``cap`` (1/2 keeps the e-value growing in the boundary, see
    ``bernstein_log_evalue``). Any bet fixed before the window keeps the e-value valid; this
    one only sizes it to the shift worth detecting."""
    drift = np.maximum(np.asarray(drift, dtype=float), 0.0)
    spread = np.maximum(np.asarray(spread, dtype=float), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = drift / (drift + spread)
    return np.clip(np.nan_to_num(lam, nan=0.0), 0.0, cap)


def change_weight(t: ArrayLike) -> np.ndarray:
    """Prior weight ``w_j = 1 / (j (j + 1))`` of a change starting at window ``j >= 1``; the
    weights sum to 1, and ``sum_{j > t} w_j = 1 / (t + 1)``."""
    t = np.asarray(t, dtype=float)
    return 1.0 / (t * (t + 1.0))


def mixture_update(log_s: ArrayLike, log_e: ArrayLike, t: ArrayLike) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    """One step of the change detector ``M_t = sum_j w_j prod_{i=j..t} e_i + 1 / (t + 1)``.

    ``log_s`` is ``log S_{t-1}`` (``-inf`` at the start), ``log_e`` the window's log e-value
    and ``t >= 1`` the window's place since the detector (re)started. Returns ``(log S_t, log
    M_t)`` with ``S_t = e_t (S_{t-1} + w_t)``.

    Guarantee: if every ``e_i`` has conditional expectation at most 1 given the past under H0
    (``bernstein_log_evalue`` with a bet fixed before window ``i``), each ``prod_{i=j..t}
    e_i`` (1 before ``j``) is a nonnegative supermartingale, and so is their ``w``-mixture
    ``M_t``, which starts at ``sum_j w_j = 1``. Ville's inequality gives ``P(exists t: M_t >=
    1/a) <= a`` over unlimited windows: a false alarm at level ``a`` however often the test is
    re-checked, while a change starting at window ``j`` only has to overcome ``log(1/w_j) = log
    j(j+1)`` on top of ``log(1/a)``. This is the mixture form of the e-detectors of J. Shin,
    A. Ramdas, A. Rinaldo (2024), "E-detectors: a nonparametric framework for sequential change
    detection", New England J. Statist. Data Sci. 2(2):229-260, where the Shiryaev-Roberts
    and CUSUM forms instead bound the average run length. Restarting (``log_s = -inf`` at a new
    ``t``) keeps the guarantee, since the remaining weights sum to less than 1.
    """
    log_s = np.asarray(log_s, dtype=float)
    t = np.asarray(t, dtype=float)
    log_s = np.asarray(log_e, dtype=float) + np.logaddexp(log_s, np.log(change_weight(t)))
    return log_s, np.logaddexp(log_s, -np.log1p(t))


def bernstein_shift_needed(
    lam: ArrayLike, linear: ArrayLike, quadratic: ArrayLike, residual: ArrayLike,
    log_level: ArrayLike,
) -> np.ndarray:
    """The smallest shift ``u`` of the mean beyond the boundary at which ``bernstein_log_evalue``
    is expected to reach ``log_level``: the smaller root of ``lam linear u - psi(lam)
    (quadratic u^2 + residual) = log_level``, where, summed over the windows pooled,
    ``linear = sum n / scale``, ``quadratic = sum size_sq / scale^2`` and ``residual = sum_g
    (S_g - n_g mean)^2 / scale^2`` (then ``sum xi = u linear`` and ``sum xi^2 = quadratic u^2 +
    residual``, up to the cross term, which is zero on average). NaN where no shift reaches the
    level with this bet."""
    lam = np.asarray(lam, dtype=float)
    psi = bernstein_psi(lam)
    a = psi * np.asarray(quadratic, dtype=float)
    b = lam * np.asarray(linear, dtype=float)
    c = psi * np.maximum(np.asarray(residual, dtype=float), 0.0) + np.asarray(log_level, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        disc = b * b - 4.0 * a * c
        root = (b - np.sqrt(np.where(disc >= 0, disc, np.nan))) / (2.0 * a)
    return np.where((a > 0) & (b > 0) & (disc >= 0), root, np.nan)


def benjamini_hochberg(p: ArrayLike, level: float) -> np.ndarray:
    """Which hypotheses the Benjamini-Hochberg step-up procedure rejects at false discovery
    rate ``level``: all with ``p <= level k* / m``, ``k* = max{k : p_(k) <= level k / m}``.
    NaN p-values are neither counted nor rejected. Source: Y. Benjamini, Y. Hochberg (1995),
    J. R. Stat. Soc. B 57(1):289-300. Equal to ``statsmodels.stats.multitest.multipletests(p,
    level, method="fdr_bh")[0]``. Valid for independent or positively dependent p-values."""
    p = np.asarray(p, dtype=float)
    ok = ~np.isnan(p)
    m = int(ok.sum())
    reject = np.zeros(p.shape, dtype=bool)
    if m == 0:
        return reject
    ranked = np.sort(p[ok])
    passing = np.nonzero(ranked <= level * np.arange(1, m + 1) / m)[0]
    if passing.size:
        reject = ok & (p <= ranked[passing[-1]])
    return reject


def e_benjamini_hochberg(e: ArrayLike, level: float) -> np.ndarray:
    """Which hypotheses the e-BH procedure rejects at false discovery rate ``level``: the
    ``k*`` largest e-values, ``k* = max{k : e_(k) >= m / (level k)}`` (``e_(1)`` the largest).
    NaN e-values are neither counted nor rejected. Source: R. Wang, A. Ramdas (2022), "False
    discovery rate control with e-values", J. R. Stat. Soc. B 84(3):822-852; valid under any
    dependence between the e-values."""
    # e_(k) >= m / (level k) is 1/e_(k) <= level k / m: BH on the reciprocals
    e = np.asarray(e, dtype=float)
    with np.errstate(divide="ignore"):
        return benjamini_hochberg(1.0 / e, level)
