"""Checks pipeline.agreement against statsmodels and scikit-learn on seeded random tables (to
1e-6), Gwet's AC1 against values of Gwet's irrCAC and a hand-worked example, the kappa paradox
tables of Feinstein & Cicchetti (1990), and the edge cases: n = 0, one shared category,
perfect agreement and perfect disagreement.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score, confusion_matrix, recall_score
from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa
from statsmodels.stats.proportion import proportion_confint

from pipeline.agreement import (
    NO_ITEMS,
    ONE_CATEGORY,
    Table2x2,
    bias_index,
    cohens_kappa,
    confusion,
    gwet_ac1,
    pabak,
    prevalence_index,
    raw_agreement,
    sensitivity_not_attributed,
    specificity_not_attributed,
    stratified_table,
    summary,
)

TOL = 1e-6

# Feinstein & Cicchetti (1990), "High agreement but low kappa: I", J Clin Epidemiol 43:543-549,
# their two tables with the same p_o = .85: kappa = .70 (balanced) and .32 (skewed prevalence).
BALANCED = Table2x2(40, 9, 6, 45)
SKEWED = Table2x2(80, 10, 5, 5)


def random_tables(seed: int = 20240601, count: int = 400) -> Table2x2:
    """Tables of 2 to 400 claims, from balanced to heavily skewed, every cell possibly 0."""
    rng = np.random.default_rng(seed)
    n = rng.integers(2, 401, size=count)
    cells = rng.dirichlet(rng.choice([0.2, 1.0, 5.0], size=4), size=count)
    counts = np.array([rng.multinomial(k, p) for k, p in zip(n, cells, strict=True)])
    # statsmodels' kappa is 0/0 when both raters used one and the same category: keep those
    # tables for the edge-case tests below.
    one_category = (counts[:, 1] + counts[:, 2] == 0) & (
        (counts[:, 0] == 0) | (counts[:, 3] == 0)
    )
    counts = counts[~one_category]
    return Table2x2(*counts.T)


def labels_of(table: Table2x2) -> tuple[np.ndarray, np.ndarray]:
    """The (judge, human) label arrays that ``table`` counts."""
    judge = np.repeat([1, 1, 0, 0], table)
    human = np.repeat([1, 0, 1, 0], table)
    return judge, human


# --- confusion -------------------------------------------------------------------------------


def test_confusion_counts_judge_rows_and_human_columns():
    judge = [1, 1, 1, 0, 0, 0, 0, 1]
    human = [1, 0, 1, 1, 0, 0, 0, 1]
    assert confusion(judge, human) == Table2x2(a=3, b=1, c=1, d=3)
    assert confusion(np.array(judge, bool), np.array(human, bool)) == Table2x2(3, 1, 1, 3)


def test_confusion_matches_sklearn_confusion_matrix():
    rng = np.random.default_rng(7)
    judge = rng.integers(0, 2, size=500)
    human = rng.integers(0, 2, size=500)
    # sklearn: rows are y_true (human), columns y_pred (judge), in label order [1, 0]
    (a, c), (b, d) = confusion_matrix(human, judge, labels=[1, 0])
    assert confusion(judge, human) == Table2x2(a, b, c, d)


def test_confusion_of_labels_reproduces_the_table():
    assert confusion(*labels_of(SKEWED)) == SKEWED
    assert confusion([], []) == Table2x2(0, 0, 0, 0)


def test_confusion_rejects_unpaired_or_non_binary_labels():
    with pytest.raises(ValueError, match="pair up one to one"):
        confusion([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match=r"human labels must be 1 \(attributed\) or 0"):
        confusion([1, 0], [1, 2])


def test_negative_counts_are_rejected():
    with pytest.raises(ValueError, match="non-negative"):
        cohens_kappa(1, -1, 2, 3)


def test_alpha_outside_unit_interval_is_rejected():
    with pytest.raises(ValueError, match="alpha"):
        summary(1, 2, 3, 4, alpha=0)


# --- raw agreement, sensitivity, specificity, PABAK -------------------------------------------


def test_raw_agreement_is_wilson_on_agreements():
    t = random_tables()
    n = np.sum(t, axis=0)
    for alpha in (0.05, 0.1):
        est, low, high = raw_agreement(*t, alpha=alpha)
        ref_low, ref_high = proportion_confint(t.a + t.d, n, alpha, method="wilson")
        np.testing.assert_allclose(est, (t.a + t.d) / n, rtol=0, atol=TOL)
        np.testing.assert_allclose(low, ref_low, rtol=0, atol=TOL)
        np.testing.assert_allclose(high, ref_high, rtol=0, atol=TOL)


def test_sensitivity_and_specificity_on_not_attributed_match_sklearn_recall():
    for table in [SKEWED, BALANCED, Table2x2(50, 3, 7, 12)]:
        judge, human = labels_of(table)
        sens = sensitivity_not_attributed(*table)
        spec = specificity_not_attributed(*table)
        assert sens.estimate == pytest.approx(recall_score(human, judge, pos_label=0), abs=TOL)
        assert spec.estimate == pytest.approx(recall_score(human, judge, pos_label=1), abs=TOL)
        pos, neg = table.b + table.d, table.a + table.c
        assert (sens.low, sens.high) == pytest.approx(
            proportion_confint(table.d, pos, 0.05, method="wilson"), abs=TOL
        )
        assert (spec.low, spec.high) == pytest.approx(
            proportion_confint(table.a, neg, 0.05, method="wilson"), abs=TOL
        )


def test_sensitivity_is_nan_when_people_call_nothing_not_attributed():
    sens = sensitivity_not_attributed(30, 0, 4, 0)
    assert all(math.isnan(x) for x in sens)
    assert specificity_not_attributed(30, 0, 4, 0).estimate == pytest.approx(30 / 34)


def test_pabak_is_twice_raw_agreement_minus_one_with_mapped_interval():
    t = random_tables()
    p_o = raw_agreement(*t)
    est, low, high = pabak(*t)
    np.testing.assert_allclose(est, 2 * p_o.estimate - 1, atol=1e-12)
    np.testing.assert_allclose(low, 2 * p_o.low - 1, atol=1e-12)
    np.testing.assert_allclose(high, 2 * p_o.high - 1, atol=1e-12)
    # Feinstein & Cicchetti's tables: p_o = .85 in both, so PABAK = .70 in both
    assert pabak(*SKEWED).estimate == pytest.approx(0.7)
    assert pabak(*BALANCED).estimate == pytest.approx(0.7)


def test_prevalence_and_bias_indices_give_back_kappa():
    # Byrt, Bishop & Carlin (1993): kappa = (PABAK - PI^2 + BI^2) / (1 - PI^2 + BI^2)
    t = random_tables()
    pi, bi = prevalence_index(*t), bias_index(*t)
    rebuilt = (pabak(*t).estimate - pi**2 + bi**2) / (1 - pi**2 + bi**2)
    np.testing.assert_allclose(cohens_kappa(*t).estimate, rebuilt, atol=1e-9)
    assert prevalence_index(*SKEWED) == pytest.approx(0.75)
    assert bias_index(*SKEWED) == pytest.approx(0.05)


# --- Cohen's kappa ------------------------------------------------------------------------------


def test_kappa_matches_statsmodels_estimate_and_std():
    t = random_tables()
    ours = cohens_kappa(*t)  # vectorized over all tables at once
    skipped = 0
    for i in range(len(t.a)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ref = sm_cohens_kappa([[t.a[i], t.b[i]], [t.c[i], t.d[i]]])
        assert ours.estimate[i] == pytest.approx(ref.kappa, abs=TOL)
        assert ours.reason[i] == ""
        if ref.var_kappa < 0:
            # One rater used a single category (kappa = 0) or agreement is perfect (kappa = 1):
            # the variance is exactly 0, statsmodels rounds it to about -1e-17 and reports a
            # NaN standard error; pipeline.agreement reports exactly 0.
            assert ref.var_kappa > -1e-12 and ours.std_error[i] == 0.0
            skipped += 1
            continue
        assert ours.std_error[i] == pytest.approx(ref.std_kappa, abs=TOL)
    assert skipped < len(t.a) / 20


def test_kappa_matches_sklearn_cohen_kappa_score():
    t = random_tables(seed=11, count=150)
    ours = cohens_kappa(*t).estimate
    for i in range(len(t.a)):
        judge, human = labels_of(Table2x2(t.a[i], t.b[i], t.c[i], t.d[i]))
        assert ours[i] == pytest.approx(cohen_kappa_score(judge, human, labels=[0, 1]), abs=TOL)


def test_kappa_interval_scales_with_alpha():
    # the interval is symmetric on Fisher's z scale, so its width there scales with z
    k90, k95 = cohens_kappa(*BALANCED, alpha=0.10), cohens_kappa(*BALANCED)
    width = [np.arctanh(k.high) - np.arctanh(k.low) for k in (k90, k95)]
    assert width[1] == pytest.approx(width[0] * 1.959964 / 1.644854, 1e-6)
    assert k95.low < k90.low < k90.estimate < k90.high < k95.high


def _judge_audits(n: int, prevalence: float, sensitivity: float, specificity: float,
                  count: int, seed: int) -> tuple[float, Table2x2]:
    """`count` audits of n labels of a judge that agrees with people on `sensitivity` of the
    claims they attribute and `specificity` of those they do not, where people attribute
    `prevalence` of the claims; returns the judge's true kappa and the audits' tables."""
    cells = np.array([prevalence * sensitivity, (1 - prevalence) * (1 - specificity),
                      prevalence * (1 - sensitivity), (1 - prevalence) * specificity])
    a, b, c, d = cells
    p_e = (a + b) * (a + c) + (c + d) * (b + d)
    true_kappa = (a + d - p_e) / (1 - p_e)
    counts = np.random.default_rng(seed).multinomial(n, cells, size=count)
    return float(true_kappa), Table2x2(*counts.T)


# (labels, prevalence of "attributed", the judge's sensitivity and specificity): true kappa
# 0.68, 0.59, 0.89, 0.68 and 0.89, mostly attributed claims, as claims usually are
SKEWED_AUDITS = [(50, 0.9, 0.97, 0.7), (50, 0.95, 0.98, 0.6), (50, 0.9, 0.99, 0.9),
                 (100, 0.9, 0.97, 0.7), (400, 0.9, 0.99, 0.9)]


@pytest.mark.parametrize(("n", "prevalence", "sensitivity", "specificity"), SKEWED_AUDITS)
def test_the_lower_bound_of_kappa_is_above_the_true_kappa_no_more_often_than_it_may(
        n, prevalence, sensitivity, specificity):
    # The audit bar reads the lower bound of kappa's 95 % interval, which may lie above the
    # judge's true kappa in 2.5 % of audits. The Wald interval's did in 7-37 % of these (an
    # audit with no disagreement gave the point [1, 1]), so a judge below the bar passed it.
    true_kappa, tables = _judge_audits(n, prevalence, sensitivity, specificity, 4000, seed=n)
    kappa = cohens_kappa(*tables)
    defined = ~np.isnan(kappa.estimate)
    assert defined.mean() > 0.75
    too_high = float(np.mean(kappa.low[defined] > true_kappa))
    assert too_high <= 0.035, (true_kappa, too_high)


@pytest.mark.parametrize(("n", "prevalence", "sensitivity", "specificity"),
                         [(50, 0.5, 0.9, 0.8), (50, 0.6, 0.8, 0.6), (100, 0.8, 0.95, 0.7),
                          (400, 0.9, 0.97, 0.7), (400, 0.95, 0.98, 0.6)])
def test_the_kappa_interval_covers_the_true_kappa(n, prevalence, sensitivity, specificity):
    true_kappa, tables = _judge_audits(n, prevalence, sensitivity, specificity, 4000, seed=7)
    kappa = cohens_kappa(*tables)
    defined = ~np.isnan(kappa.estimate)
    covered = (kappa.low[defined] <= true_kappa) & (true_kappa <= kappa.high[defined])
    assert float(np.mean(covered)) >= 0.93


# --- Gwet's AC1 ---------------------------------------------------------------------------------

# Pinned from Gwet's irrCAC as ported to Python (PyPI irrcac 0.4.4, which follows the R
# package's gwet.ac1.table line by line), produced with
#   CAC(pandas.DataFrame([[a, b], [c, d]]), digits=15).gwet()["est"]  -> coefficient_value, se
# irrCAC's own interval uses a t_{n-1} quantile, capped at 1, so only the estimate and standard
# error are compared. Its Cohen's kappa standard error (cohen()["est"]["se"]) is pinned too.
IRRCAC = [
    # table, AC1, se(AC1), se(kappa)
    (SKEWED, 0.808, 0.05212942023848, 0.133456521223836),
    (Table2x2(170, 6, 9, 15), 0.906286606794221, 0.024916565697867, 0.088754388671695),
    (Table2x2(118, 5, 2, 0), 0.940776337608718, 0.022964551247933, 0.012286756672809),
]


@pytest.mark.parametrize(("table", "ac1", "se_ac1", "se_kappa"), IRRCAC)
def test_ac1_and_its_standard_error_match_irrcac(table, ac1, se_ac1, se_kappa):
    ours = gwet_ac1(*table)
    assert ours.estimate == pytest.approx(ac1, abs=TOL)
    assert ours.std_error == pytest.approx(se_ac1, abs=TOL)
    assert ours.reason == ""
    assert cohens_kappa(*table).std_error == pytest.approx(se_kappa, abs=TOL)


def test_ac1_worked_by_hand_on_the_skewed_table():
    # Feinstein & Cicchetti's skewed table (80, 10, 5, 5), n = 100, through Gwet (2008)'s
    # two-rater formulas:
    #   pi_1 = (0.90 + 0.85) / 2 = 0.875, pi_2 = 0.125
    #   p_e  = 2 * 0.875 * 0.125 = 0.21875;  p_o = 0.85
    #   AC1  = (0.85 - 0.21875) / 0.78125 = 0.808
    #   p_o (1 - p_o)                               = 0.1275
    #   sum p_kk (1 - pi_k) - p_o p_e = 0.8 * 0.125 + 0.05 * 0.875 - 0.1859375 = -0.0421875
    #   sum p_kl (1 - (pi_k + pi_l)/2)^2 - p_e^2
    #     = 0.8 * 0.015625 + 0.05 * 0.765625 + 0.15 / 4 - 0.0478515625  = 0.0404296875
    #   Var = (0.1275 + 4 * 0.192 * 0.0421875 + 4 * 0.192^2 * 0.0404296875) / (100 * 0.78125^2)
    #       = 0.1658616 / 61.03515625
    ours = gwet_ac1(*SKEWED)
    assert ours.estimate == pytest.approx(0.808, abs=1e-12)
    assert ours.std_error**2 == pytest.approx(0.1658616 / 61.03515625, abs=1e-12)
    z = 1.959963984540054
    assert ours.low == pytest.approx(0.808 - z * ours.std_error, abs=1e-12)
    assert ours.high == pytest.approx(0.808 + z * ours.std_error, abs=1e-12)


def test_kappa_paradox_high_agreement_low_kappa_but_high_ac1():
    # Feinstein & Cicchetti (1990): same p_o = .85, kappa .70 on the balanced table and .32 on
    # the skewed one; AC1 does not fall with prevalence (.70 and .81).
    balanced, skewed = summary(*BALANCED), summary(*SKEWED)
    assert balanced.raw_agreement.estimate == skewed.raw_agreement.estimate == pytest.approx(0.85)
    assert round(float(balanced.kappa.estimate), 2) == 0.70
    assert round(float(skewed.kappa.estimate), 2) == 0.32
    assert round(float(balanced.ac1.estimate), 2) == 0.70
    assert round(float(skewed.ac1.estimate), 2) == 0.81
    assert skewed.ac1.low > skewed.kappa.high  # the two intervals do not even overlap
    assert abs(skewed.prevalence_index) > abs(balanced.prevalence_index)
    # More extreme: 94% agreement yet kappa below zero, AC1 at .94 (irrCAC values above).
    extreme = summary(118, 5, 2, 0)
    assert extreme.raw_agreement.estimate == pytest.approx(0.944)
    assert extreme.kappa.estimate == pytest.approx(-0.023391812865, abs=TOL)
    assert extreme.ac1.estimate > 0.9


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 60), min_size=4, max_size=4).filter(lambda t: sum(t) > 0))
def test_coefficients_are_symmetric_in_raters_and_categories(cells):
    a, b, c, d = cells
    for coefficient in (cohens_kappa, gwet_ac1):
        base = coefficient(a, b, c, d)
        for swapped in ((a, c, b, d), (d, b, c, a), (d, c, b, a)):  # raters, labels, both
            other = coefficient(*swapped)
            assert other.reason == base.reason
            for x, y in zip(base[:4], other[:4], strict=True):
                assert (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, abs=1e-9)
        if not base.reason:
            assert -1 - 1e-12 <= base.estimate <= 1 + 1e-12
            assert base.low <= base.estimate <= base.high
            assert base.std_error >= 0


# --- edge cases ---------------------------------------------------------------------------------


def test_empty_table_is_nan_everywhere_with_a_reason():
    s = summary(0, 0, 0, 0)
    assert s.n == 0
    for part in (s.raw_agreement, s.pabak, s.sensitivity_not_attributed,
                 s.specificity_not_attributed, s.kappa[:4], s.ac1[:4]):
        assert all(math.isnan(x) for x in part)
    assert math.isnan(s.prevalence_index) and math.isnan(s.bias_index)
    assert s.kappa.reason == s.ac1.reason == NO_ITEMS


@pytest.mark.parametrize("table", [Table2x2(25, 0, 0, 0), Table2x2(0, 0, 0, 25)])
def test_one_shared_category_leaves_kappa_undefined_but_ac1_defined(table):
    kappa, ac1 = cohens_kappa(*table), gwet_ac1(*table)
    assert all(math.isnan(x) for x in kappa[:4])
    assert kappa.reason == ONE_CATEGORY
    assert (ac1.estimate, ac1.std_error, ac1.reason) == (1.0, 0.0, "")
    # the references agree kappa is undefined there
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert math.isnan(cohen_kappa_score(*labels_of(table), labels=[0, 1]))
        assert math.isnan(sm_cohens_kappa([[table.a, table.b], [table.c, table.d]]).kappa)


def test_perfect_agreement_over_both_categories():
    kappa, ac1 = cohens_kappa(30, 0, 0, 10), gwet_ac1(30, 0, 0, 10)
    assert (kappa.estimate, kappa.std_error, kappa.high) == (1.0, 0.0, 1.0)
    # 40 labels that all agree do not make kappa certain: the interval is not the point 1
    assert 0.5 < kappa.low < 0.95
    assert cohens_kappa(300, 0, 0, 100).low > kappa.low
    assert (ac1.estimate, ac1.std_error) == (1.0, 0.0)
    ref = sm_cohens_kappa([[30, 0], [0, 10]])
    assert (ref.kappa, ref.std_kappa) == pytest.approx((1.0, 0.0), abs=TOL)
    assert pabak(30, 0, 0, 10).estimate == 1.0


def test_perfect_disagreement():
    # Each rater uses both labels, always the opposite one: kappa = AC1 = PABAK = -1.
    for coefficient in (cohens_kappa, gwet_ac1):
        assert coefficient(0, 12, 12, 0).estimate == pytest.approx(-1.0)
    assert pabak(0, 12, 12, 0).estimate == -1.0
    # Judge always "attributed", human always "not": no agreement, but the margins make
    # chance agreement 0 too, so kappa = 0 (as sklearn says), while AC1 = PABAK = -1.
    assert cohens_kappa(0, 12, 0, 0).estimate == 0.0
    assert cohen_kappa_score(*labels_of(Table2x2(0, 12, 0, 0)), labels=[0, 1]) == 0.0
    assert gwet_ac1(0, 12, 0, 0).estimate == pytest.approx(-1.0)


def test_vectorized_call_equals_elementwise_calls_and_carries_reasons():
    a, b, c, d = [80, 0, 25, 30], [10, 0, 0, 1], [5, 0, 0, 2], [5, 0, 0, 9]
    batch = summary(a, b, c, d)
    for i in range(4):
        one = summary(a[i], b[i], c[i], d[i])
        for field in ("raw_agreement", "kappa", "ac1", "pabak", "sensitivity_not_attributed"):
            many, single = getattr(batch, field), getattr(one, field)
            for x, y in zip(many, single, strict=True):
                if isinstance(y, str):
                    assert x[i] == y
                else:
                    assert (math.isnan(x[i]) and math.isnan(y)) or x[i] == y
    assert list(batch.kappa.reason) == ["", NO_ITEMS, ONE_CATEGORY, ""]
    assert list(batch.ac1.reason) == ["", NO_ITEMS, "", ""]


def test_judge_with_a_single_label_gets_kappa_zero_and_an_interval_about_it():
    # A judge that calls every claim attributed: p_o = p_e, so kappa = 0 exactly and the
    # Fleiss-Cohen-Everitt variance is exactly 0 too (statsmodels: -1e-16 rounding, NaN se);
    # 48 labels still leave kappa uncertain, so the interval is not the point 0.
    kappa = cohens_kappa(40, 8, 0, 0)
    assert (kappa.estimate, kappa.std_error) == (0.0, 0.0)
    assert -0.4 < kappa.low < 0.0 < kappa.high < 0.4
    assert kappa.low == pytest.approx(-kappa.high)
    assert cohen_kappa_score(*labels_of(Table2x2(40, 8, 0, 0)), labels=[0, 1]) == 0.0
    # what shows the failure is the sensitivity on "not attributed"
    assert sensitivity_not_attributed(40, 8, 0, 0).estimate == 0.0
    assert sensitivity_not_attributed(40, 8, 0, 0).high < 0.33


def test_a_stratified_table_covers_the_judge_on_all_its_claims_when_strata_are_drawn_unevenly():
    # 2,030 claims: the judge rejects 30 (25 of which people reject too) and attributes 2,000
    # (40 of which people reject). An audit of 60 draws the floor of 5 from the 30 and 55 from
    # the 2,000, so the rejected claims are drawn 1 in 6 and the rest 1 in 36. Counted as drawn,
    # the judge seems to catch 25 of every 29 claims people reject; on all its claims it
    # catches 25 of 65. Weighed by stratum, the intervals cover the judge's figures.
    from pipeline.audit import allocate

    population = {False: np.array([0] * 25 + [1] * 5), True: np.array([0] * 40 + [1] * 1960)}
    truth = summary(1960, 40, 5, 25)
    drawn = allocate({j: len(h) for j, h in population.items()}, 60)
    assert drawn == {False: 5, True: 55}
    rng = np.random.default_rng(11)
    names = ("sensitivity_not_attributed", "raw_agreement")
    covered = {"weighted": dict.fromkeys(names, 0), "as drawn": dict.fromkeys(names, 0)}
    worlds = 400
    for _ in range(worlds):
        labels = {j: rng.choice(h, drawn[j], replace=False) for j, h in population.items()}
        judge = list(labels)
        yes = [int(labels[j].sum()) for j in judge]
        no = [drawn[j] - y for j, y in zip(judge, yes, strict=True)]
        weighted, _ = stratified_table(judge, yes, no, [len(population[j]) for j in judge])
        as_drawn = Table2x2(yes[1], no[1], yes[0], no[0])
        for how, table in (("weighted", weighted), ("as drawn", as_drawn)):
            found = summary(*table)
            for name in names:
                e, true = getattr(found, name), float(getattr(truth, name).estimate)
                covered[how][name] += bool(e.low <= true <= e.high)
    for name in names:
        assert covered["weighted"][name] / worlds >= 0.93, (name, covered)
    assert covered["as drawn"]["sensitivity_not_attributed"] / worlds < 0.7, covered


def test_a_stratified_table_of_strata_drawn_at_one_rate_is_the_table_as_drawn():
    table, n_eff = stratified_table([True, False], [30, 2], [6, 2], [360, 40])
    assert n_eff == pytest.approx(40)
    assert table == pytest.approx(Table2x2(30, 6, 2, 2))
    assert stratified_table([True], [0], [0], [10]) == (Table2x2(0.0, 0.0, 0.0, 0.0), 0.0)
    with pytest.raises(ValueError, match="fewer claims"):
        stratified_table([True], [3], [0], [2])
