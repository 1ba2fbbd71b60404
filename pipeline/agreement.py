"""Agreement between the LLM judge and human labels on a sample of claims, for auditing the judge.

The judge says per claim "attributed" (1) or "not attributed" (0) and a person labels a sample of
the same claims. Everything here is a function of the 2x2 table of those pairs, laid out with
the judge in rows and the human in columns::

                     human = 1   human = 0
        judge = 1        a           b
        judge = 0        c           d

so ``a`` and ``d`` are agreements and ``n = a + b + c + d``. ``confusion`` counts the table from
the two label arrays; each statistic is one numpy-vectorized function of ``(a, b, c, d)``
(scalars or arrays of equal shape, one element per audit group) returning a small NamedTuple
with its interval, and ``summary`` gathers them all. As in ``pipeline.stats``, a statistic that
is undefined for a table gets NaN rather than an error, and the coefficients say why in their
``reason`` field. Raw agreement and Cohen's kappa are pinned to statsmodels and scikit-learn,
Gwet's AC1 to Gwet's irrCAC, by ``tests/test_agreement.py``.

Why more than kappa: a good judge on a sample where nearly every claim is attributed has high
raw agreement but can have a low kappa (the "kappa paradox", Feinstein & Cicchetti 1990), so the
audit reports kappa next to AC1, PABAK and the prevalence and bias indices that explain the gap
(Byrt, Bishop & Carlin 1993), and the judge's sensitivity and specificity for the class that
matters, "not attributed".
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from pipeline.stats import FloatOrArray, _as_output, _check_alpha, wilson_interval

__all__ = [
    "AgreementSummary",
    "Coefficient",
    "Estimate",
    "Table2x2",
    "bias_index",
    "cohens_kappa",
    "confusion",
    "gwet_ac1",
    "pabak",
    "prevalence_index",
    "raw_agreement",
    "sensitivity_not_attributed",
    "specificity_not_attributed",
    "stratified_table",
    "summary",
]

NO_ITEMS = "no rated items (n = 0)"
ONE_CATEGORY = "both raters used one and the same category, so chance agreement is 1"


class Table2x2(NamedTuple):
    """Counts of (judge, human) label pairs: ``a`` = (1, 1), ``b`` = (1, 0), ``c`` = (0, 1),
    ``d`` = (0, 0), with 1 = "attributed"."""

    a: int | np.ndarray
    b: int | np.ndarray
    c: int | np.ndarray
    d: int | np.ndarray


class Estimate(NamedTuple):
    """A point estimate with confidence bounds; all NaN where it is undefined."""

    estimate: FloatOrArray
    low: FloatOrArray
    high: FloatOrArray


class Coefficient(NamedTuple):
    """A chance-corrected agreement coefficient, its large-sample standard error and Wald
    interval ``estimate -/+ z * std_error``; ``reason`` is "" where it is defined and says why
    where the numbers are NaN."""

    estimate: FloatOrArray
    std_error: FloatOrArray
    low: FloatOrArray
    high: FloatOrArray
    reason: str | np.ndarray


class AgreementSummary(NamedTuple):
    """Everything ``summary`` reports for one table (or one element per table)."""

    n: int | np.ndarray
    raw_agreement: Estimate
    kappa: Coefficient
    ac1: Coefficient
    pabak: Estimate
    sensitivity_not_attributed: Estimate
    specificity_not_attributed: Estimate
    prevalence_index: FloatOrArray
    bias_index: FloatOrArray


def confusion(judge: ArrayLike, human: ArrayLike) -> Table2x2:
    """Count the 2x2 table of paired labels (1 = "attributed", 0 = "not attributed").

    ``judge[i]`` and ``human[i]`` are the two labels of claim ``i``; booleans count as 1/0.
    Raises ``ValueError`` if the arrays differ in length or hold anything but 0 and 1.
    """
    judge = np.asarray(judge).ravel()
    human = np.asarray(human).ravel()
    if judge.shape != human.shape:
        raise ValueError(
            f"judge and human labels must pair up one to one, got {judge.size} judge labels "
            f"and {human.size} human labels"
        )
    for name, labels in (("judge", judge), ("human", human)):
        if not np.all(np.isin(labels, (0, 1))):
            raise ValueError(
                f"{name} labels must be 1 (attributed) or 0 (not attributed), found "
                f"{sorted(set(np.unique(labels).tolist()) - {0, 1})[:5]}"
            )
    judge = judge.astype(bool)
    human = human.astype(bool)
    return Table2x2(
        a=int(np.sum(judge & human)),
        b=int(np.sum(judge & ~human)),
        c=int(np.sum(~judge & human)),
        d=int(np.sum(~judge & ~human)),
    )


def stratified_table(
    judge: ArrayLike, human_yes: ArrayLike, human_no: ArrayLike, claims: ArrayLike
) -> tuple[Table2x2, float]:
    """The table of all the judge's claims, estimated from labels drawn unevenly across strata,
    and the effective number of labels behind it.

    One element per stratum: the judge's label there (``judge``), the labels people gave
    (``human_yes`` attributed, ``human_no`` not) and the judge's claims in the stratum
    (``claims``, labelled or not). A sample that draws a small stratum beyond its share (the
    audit's floor per stratum) over-represents it; each label then stands for
    ``claims / labels`` claims of its stratum (post-stratification), so that a statistic of
    the table describes the judge on all its claims, not on the sample's mix. The weighted
    table is scaled to Kish's effective sample size ``n_eff = (sum w)**2 / sum w**2``, which is
    the number of labels when every stratum was drawn at the same rate, so the intervals of
    ``summary`` stay those of the labels' information (Kish 1965, *Survey Sampling*, 8.2).
    Strata without labels are left out; ``(Table2x2(0, 0, 0, 0), 0.0)`` when nothing is
    labelled.
    """
    judge = np.asarray(judge, dtype=bool).ravel()
    yes, no, claims = (np.asarray(x, dtype=float).ravel() for x in (human_yes, human_no, claims))
    labels = yes + no
    if np.any(claims < labels):
        raise ValueError("a stratum cannot hold fewer claims than it has labels")
    kept = labels > 0
    judge, yes, no, claims, labels = (x[kept] for x in (judge, yes, no, claims, labels))
    if not kept.any():
        return Table2x2(0.0, 0.0, 0.0, 0.0), 0.0
    weight = claims / labels
    n_eff = float(np.sum(weight * labels) ** 2 / np.sum(weight ** 2 * labels))
    scale = n_eff / float(np.sum(claims))
    cells = (yes * judge, no * judge, yes * ~judge, no * ~judge)
    return Table2x2(*(float(np.sum(weight * cell)) * scale for cell in cells)), n_eff


def _counts(a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike) -> tuple[np.ndarray, ...]:
    a, b, c, d = (np.asarray(x, dtype=float) for x in (a, b, c, d))
    if np.any((a < 0) | (b < 0) | (c < 0) | (d < 0)):
        raise ValueError("table counts a, b, c, d must be non-negative")
    a, b, c, d = np.broadcast_arrays(a, b, c, d)
    return a, b, c, d, a + b + c + d


def raw_agreement(
    a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike, alpha: ArrayLike = 0.05
) -> Estimate:
    """Observed proportion of agreement with its Wilson interval.

    ``p_o = (a + d) / n``; ``[low, high] = wilson_interval(a + d, n, alpha)``, equal to
    ``statsmodels.stats.proportion.proportion_confint(a + d, n, alpha, method="wilson")``.
    Treats the ``n`` claims as independent Bernoulli trials of "the judge agrees with the
    human" (E. B. Wilson 1927, JASA 22:209-212). NaN when ``n = 0``.
    """
    a, b, c, d, n = _counts(a, b, c, d)
    agree = a + d
    p_o = np.divide(agree, n, out=np.full_like(n, np.nan), where=n > 0)
    low, high = wilson_interval(agree, n, alpha)
    return Estimate(_as_output(p_o), low, high)


def _z(alpha: ArrayLike) -> np.ndarray:
    return stats.norm.isf(_check_alpha(alpha) / 2)


def cohens_kappa(
    a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike, alpha: ArrayLike = 0.05
) -> Coefficient:
    """Cohen's kappa with the large-sample standard error of Fleiss, Cohen & Everitt (1969),
    and an interval that keeps its coverage on small and skewed audits.

    With cell proportions ``p_ij``, row (judge) margins ``p_i.``, column (human) margins
    ``p_.j``, ``p_o = p_11 + p_22`` and ``p_e = p_1. p_.1 + p_2. p_.2``::

        kappa = (p_o - p_e) / (1 - p_e)
        Var   = [ sum_i p_ii (1 - (p_i. + p_.i)(1 - kappa))^2
                  + (1 - kappa)^2 sum_{i != j} p_ij (p_.i + p_j.)^2
                  - (kappa - p_e (1 - kappa))^2 ] / (n (1 - p_e)^2)

    Sources: J. Cohen (1960), "A coefficient of agreement for nominal scales", Educational and
    Psychological Measurement 20:37-46; J. L. Fleiss, J. Cohen, B. S. Everitt (1969), "Large
    sample standard errors of kappa and weighted kappa", Psychological Bulletin 72(5):323-327.
    ``estimate`` and ``std_error`` equal ``statsmodels.stats.inter_rater.cohens_kappa(table)``'s
    ``kappa`` and ``std_kappa`` (the non-null variance, not ``std_kappa0``), and the estimate
    equals ``sklearn.metrics.cohen_kappa_score``.

    The interval is not statsmodels' Wald interval ``kappa -/+ z * std_error``. Kappa's
    sampling distribution is skewed towards -1 when claims are mostly of one kind, and an audit
    in which nobody disagreed has a standard error of exactly 0: the Wald lower bound lay above
    the judge's true kappa in 7 % (100 labels) to 37 % (50 labels, true kappa 0.89) of simulated
    audits where 2.5 % is its share (``tests/test_agreement.py``), so the audit bar, which reads
    that bound, passed judges below it. Here the interval is symmetric on Fisher's z scale,
    ``tanh(atanh(kappa) -/+ z * se')`` with ``se' = se_half / (1 - kappa^2)``, where ``se_half``
    is the standard error above of the table with 1/2 added to every cell (as Haldane and
    Anscombe add 1/2 for a log odds ratio), so that a table with an empty cell still has a
    spread. At kappa = 1 (no disagreement) the upper bound is 1 and the lower bound is taken
    about the kappa of the table with 1/2 added (at -1, the other way round). Checked by
    simulation (``tests/test_agreement.py``, 4,000 audits a case): in those skewed audits the
    lower bound lay above the true kappa in at most 0.1 %, and in audits of 50 to 400 labels
    from balanced to 95 % attributed the interval covered it in 94.5-96.8 %. With 50 labels
    and 90-95 % attributed the upper bound falls short of the true kappa more often (8-15 % of
    audits): low, never falsely high.

    Undefined, NaN with a reason, when ``n = 0`` or when both raters put every claim in the
    same category (``p_e = 1``: kappa is 0/0 although agreement is perfect; AC1 is defined
    there). At perfect agreement with both categories used, kappa = 1 with standard error 0;
    when one rater (say a judge that calls everything attributed) used a single category,
    ``p_o = p_e`` and kappa is exactly 0, again with standard error 0 (statsmodels rounds these
    zeros to about -1e-17 and reports a NaN standard error, here they are exactly 0); the
    interval of either still has the width of what the sample can tell.
    """
    a, b, c, d, n = _counts(a, b, c, d)
    z = _z(alpha)
    one_category = (b + c == 0) & ((a == 0) | (d == 0))
    valid = (n > 0) & ~one_category
    kappa, se = _kappa_and_se(a, b, c, d)
    # At perfect agreement, and when a rater used one category, the variance is exactly 0 but
    # its three terms cancel only to within rounding (+-1e-16): pin those to 0.
    exact_zero = (b + c == 0) | ((a + b) * (c + d) * (a + c) * (b + d) == 0)
    se = np.where(exact_zero, 0.0, se)
    low, high = _kappa_interval(kappa, a, b, c, d, z)
    kappa, se, low, high = (np.where(valid, x, np.nan) for x in (kappa, se, low, high))
    reason = np.where(n > 0, np.where(one_category, ONE_CATEGORY, ""), NO_ITEMS)
    return Coefficient(
        _as_output(kappa),
        _as_output(se),
        _as_output(low),
        _as_output(high),
        _as_output(reason),
    )


def _kappa_and_se(a: np.ndarray, b: np.ndarray, c: np.ndarray,
                  d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kappa and its Fleiss-Cohen-Everitt standard error (``cohens_kappa``); where it is
    undefined (no items, or chance agreement 1) whatever the arithmetic gives, for the caller
    to mask."""
    n = a + b + c + d
    n_ok = np.where(n > 0, n, 1.0)
    p11, p12, p21, p22 = a / n_ok, b / n_ok, c / n_ok, d / n_ok
    row1, row2 = p11 + p12, p21 + p22  # judge margins
    col1, col2 = p11 + p21, p12 + p22  # human margins
    p_o = p11 + p22
    p_e = row1 * col1 + row2 * col2
    # p_e = 1 exactly when both raters used one and the same category; test the counts, not
    # the rounded product.
    one_category = (b + c == 0) & ((a == 0) | (d == 0))
    denom = np.where((n > 0) & ~one_category, 1.0 - p_e, 1.0)
    kappa = (p_o - p_e) / denom
    q = 1.0 - kappa
    term_diag = p11 * (1.0 - (row1 + col1) * q) ** 2 + p22 * (1.0 - (row2 + col2) * q) ** 2
    term_off = q * q * (p12 * (col1 + row2) ** 2 + p21 * (col2 + row1) ** 2)
    term_c = (kappa - p_e * q) ** 2
    var = (term_diag + term_off - term_c) / (denom * denom * n_ok)
    return kappa, np.sqrt(np.maximum(var, 0.0))


def _kappa_interval(kappa: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray,
                    d: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The interval of ``cohens_kappa``: symmetric on Fisher's z scale, with the standard
    error of the table with 1/2 added to every cell; about that table's kappa on the side
    of a kappa of exactly -1 or 1 that has no spread."""
    half_kappa, half_se = _kappa_and_se(a + 0.5, b + 0.5, c + 0.5, d + 0.5)
    with np.errstate(divide="ignore", invalid="ignore"):
        inside = np.abs(kappa) < 1.0
        centre = np.where(inside, kappa, half_kappa)
        spread = z * half_se / (1.0 - centre * centre)
        low = np.where(kappa <= -1.0, -1.0, np.tanh(np.arctanh(centre) - spread))
        high = np.where(kappa >= 1.0, 1.0, np.tanh(np.arctanh(centre) + spread))
    # the bounds on the side of a kappa of -1 or 1 come from the table with 1/2 added: never
    # let them pass the estimate
    return np.minimum(low, kappa), np.maximum(high, kappa)


def gwet_ac1(
    a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike, alpha: ArrayLike = 0.05
) -> Coefficient:
    """Gwet's AC1 for two raters and two categories, with Gwet's (2008) variance.

    With ``p_o = p_11 + p_22``, ``pi_k = (p_k. + p_.k) / 2`` the mean of the two raters'
    shares of category ``k``, and (for two categories, ``q - 1 = 1``)::

        p_e = sum_k pi_k (1 - pi_k) = 2 pi_1 (1 - pi_1)
        AC1 = (p_o - p_e) / (1 - p_e)
        Var = [ p_o (1 - p_o)
                - 4 (1 - AC1) (sum_k p_kk (1 - pi_k) - p_o p_e)
                + 4 (1 - AC1)^2 (sum_{k,l} p_kl (1 - (pi_k + pi_l) / 2)^2 - p_e^2) ]
              / (n (1 - p_e)^2)
        [low, high] = AC1 -/+ z_{1 - alpha/2} sqrt(Var)

    Source: K. L. Gwet (2008), "Computing inter-rater reliability and its variance in the
    presence of high agreement", British Journal of Mathematical and Statistical Psychology
    61(1):29-48 (AC1 and its variance for two raters, with sampling fraction f = 0, i.e. an
    infinite population of claims). The estimate and standard error equal ``gwet.ac1.table``
    of Gwet's R package irrCAC (and ``irrCAC.table.CAC(...).gwet()`` of its Python port); that
    package builds its interval with a t_{n-1} quantile and caps it at 1, while here it is the
    normal-quantile Wald interval, unclipped, like ``cohens_kappa``'s, so the two compare.

    Since ``p_e <= 1/2`` for two categories, AC1 is defined for every table with ``n > 0``:
    when both raters put every claim in one category it is 1 with standard error 0 (where
    kappa is undefined). NaN with a reason when ``n = 0``.
    """
    a, b, c, d, n = _counts(a, b, c, d)
    z = _z(alpha)
    valid = n > 0
    n_ok = np.where(valid, n, 1.0)
    p11, p12, p21, p22 = a / n_ok, b / n_ok, c / n_ok, d / n_ok
    pi1 = (2.0 * p11 + p12 + p21) / 2.0
    pi2 = 1.0 - pi1
    p_o = p11 + p22
    p_e = 2.0 * pi1 * pi2
    ac1 = (p_o - p_e) / (1.0 - p_e)
    q = 1.0 - ac1
    diag_term = p11 * pi2 + p22 * pi1 - p_o * p_e
    # 1 - (pi_k + pi_l) / 2 is pi2 on (1, 1), pi1 on (2, 2) and 1/2 off the diagonal.
    cross_term = p11 * pi2**2 + p22 * pi1**2 + (p12 + p21) / 4.0 - p_e**2
    var = (p_o * (1.0 - p_o) - 4.0 * q * diag_term + 4.0 * q * q * cross_term) / (
        n_ok * (1.0 - p_e) ** 2
    )
    se = np.sqrt(np.maximum(var, 0.0))  # exact zero at perfect agreement can round below 0
    ac1 = np.where(valid, ac1, np.nan)
    se = np.where(valid, se, np.nan)
    reason = np.where(valid, "", NO_ITEMS)
    return Coefficient(
        _as_output(ac1),
        _as_output(se),
        _as_output(ac1 - z * se),
        _as_output(ac1 + z * se),
        _as_output(reason),
    )


def pabak(
    a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike, alpha: ArrayLike = 0.05
) -> Estimate:
    """Prevalence-adjusted bias-adjusted kappa, ``PABAK = 2 p_o - 1``, with the interval mapped
    from p_o's Wilson interval: ``[2 low - 1, 2 high - 1]``.

    It is kappa computed on the table with its agreement cells replaced by their mean and its
    disagreement cells by theirs, i.e. with p_e = 1/2 (equal to Bennett, Alpert & Goldstein's
    S and Brennan & Prediger's coefficient for two categories). Source: T. Byrt, J. Bishop,
    J. B. Carlin (1993), "Bias, prevalence and kappa", Journal of Clinical Epidemiology
    46(5):423-429. Since the map is monotone, the interval keeps the Wilson coverage of p_o.
    NaN when ``n = 0``.
    """
    p_o, low, high = raw_agreement(a, b, c, d, alpha)
    return Estimate(
        _as_output(2.0 * np.asarray(p_o) - 1.0),
        _as_output(2.0 * np.asarray(low) - 1.0),
        _as_output(2.0 * np.asarray(high) - 1.0),
    )


def prevalence_index(a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike) -> FloatOrArray:
    """Prevalence index ``PI = (a - d) / n`` of Byrt, Bishop & Carlin (1993), in [-1, 1]: the
    imbalance between the two agreement cells (here positive when agreed "attributed"
    outnumbers agreed "not attributed"). ``|PI|`` near 1 is what drives kappa down at high
    agreement. NaN when ``n = 0``.
    """
    a, b, c, d, n = _counts(a, b, c, d)
    return _as_output(np.divide(a - d, n, out=np.full_like(n, np.nan), where=n > 0))


def bias_index(a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike) -> FloatOrArray:
    """Bias index ``BI = (b - c) / n`` of Byrt, Bishop & Carlin (1993), in [-1, 1]: how much
    more often the judge says "attributed" than the human (the difference of their marginal
    shares of "attributed"). With PI it gives back kappa:
    ``kappa = (PABAK - PI^2 + BI^2) / (1 - PI^2 + BI^2)``. NaN when ``n = 0``.
    """
    a, b, c, d, n = _counts(a, b, c, d)
    return _as_output(np.divide(b - c, n, out=np.full_like(n, np.nan), where=n > 0))


def sensitivity_not_attributed(
    a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike, alpha: ArrayLike = 0.05
) -> Estimate:
    """The judge's sensitivity for "not attributed", taking the human label as truth and "not
    attributed" as the positive class: of the claims people call not attributed, the share the
    judge also calls not attributed, ``d / (b + d)``, with its Wilson interval
    ``wilson_interval(d, b + d, alpha)`` (statsmodels ``proportion_confint(..., "wilson")``).

    NaN when the sample has no claim that people call not attributed (``b + d = 0``).
    """
    a, b, c, d, _ = _counts(a, b, c, d)
    return _proportion(d, b + d, alpha)


def specificity_not_attributed(
    a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike, alpha: ArrayLike = 0.05
) -> Estimate:
    """The judge's specificity with "not attributed" as the positive class: of the claims
    people call attributed, the share the judge also calls attributed, ``a / (a + c)``, with
    its Wilson interval ``wilson_interval(a, a + c, alpha)``.

    NaN when the sample has no claim that people call attributed (``a + c = 0``).
    """
    a, b, c, d, _ = _counts(a, b, c, d)
    return _proportion(a, a + c, alpha)


def _proportion(successes: np.ndarray, trials: np.ndarray, alpha: ArrayLike) -> Estimate:
    share = np.divide(successes, trials, out=np.full_like(trials, np.nan), where=trials > 0)
    low, high = wilson_interval(successes, trials, alpha)
    return Estimate(_as_output(share), low, high)


def summary(
    a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike, alpha: ArrayLike = 0.05
) -> AgreementSummary:
    """All the agreement statistics of this module for the table ``(a, b, c, d)``, each at
    confidence level ``1 - alpha``; see the individual functions for formulas and sources.

    Read kappa next to AC1, PABAK and the two indices: when ``|prevalence_index|`` is large
    (nearly every claim in one category) kappa can be low at high raw agreement while AC1 and
    PABAK stay high (Feinstein & Cicchetti 1990, "High agreement but low kappa: I. The
    problems of two paradoxes", J Clin Epidemiol 43(6):543-549).
    """
    _check_alpha(alpha)
    n = _counts(a, b, c, d)[4].astype(int)
    return AgreementSummary(
        n=_as_output(n),
        raw_agreement=raw_agreement(a, b, c, d, alpha),
        kappa=cohens_kappa(a, b, c, d, alpha),
        ac1=gwet_ac1(a, b, c, d, alpha),
        pabak=pabak(a, b, c, d, alpha),
        sensitivity_not_attributed=sensitivity_not_attributed(a, b, c, d, alpha),
        specificity_not_attributed=specificity_not_attributed(a, b, c, d, alpha),
        prevalence_index=prevalence_index(a, b, c, d),
        bias_index=bias_index(a, b, c, d),
    )
