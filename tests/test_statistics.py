"""The distribution-free statistics beside the t-tests (sign flip and label permutation, exact or labelled
Monte Carlo; bootstrap percentile intervals; Clopper-Pearson), Welch's unpaired comparison, and Holm's
correction over a primary family, against examples counted by hand and against scipy.stats called
directly."""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from lit_attention.stats import statistics as statistics_module
from lit_attention.stats.statistics import (
    Difference,
    bootstrap_interval,
    bootstrap_interval_two_sample,
    clopper_pearson,
    paired_difference,
    permutation_p,
    permutation_test,
    sign_flip_p,
    sign_flip_test,
    smallest_exact_p,
    smallest_permutation_p,
    unpaired_difference,
    verdict,
    with_holm,
)


def test_sign_flip_p_counts_the_sign_assignments_by_hand():
    # ±1 ±2 ±3 gives 6, 4, 2, 0, 0, -2, -4, -6: only the two all-alike reach |6|.
    assert sign_flip_p([1.0, 2.0, 3.0]) == 0.25
    assert sign_flip_p([0.1, 0.3, 0.2, 0.5, 0.4]) == 0.0625 == smallest_exact_p(5)  # 2 of 32
    # Observed 1 + 3 - 2 = 2; the sums are 6, 4, 0, 2, -2, 0, -4, -6: six of eight reach |2|, two as ties.
    assert sign_flip_p([1.0, 3.0, -2.0]) == 0.75
    # Observed 0.3 (exactly); sums of ±0.1 ±0.2 ±0.3 ±0.3 reaching |0.3|: all 4 with both 0.3s alike, times
    # 2 signs, plus 2 of 4 for each of the 2 mixed 0.3s: 12 of 16. Four of the ties round below 0.3 in
    # floating point, so without a tolerance they would be lost (10 of 16).
    assert sign_flip_p([0.1, 0.2, -0.3, 0.3]) == 0.75
    assert sign_flip_p([0.0, 0.0, 0.0]) == 1.0
    assert math.isnan(sign_flip_p([]))
    assert (smallest_exact_p(0), smallest_exact_p(1), smallest_exact_p(4)) == (1.0, 1.0, 0.125)


@pytest.mark.slow
def test_sign_flip_p_beyond_exact_enumeration_is_a_fixed_seed_estimate():
    # 21 differences of ±1 (13 up, 8 down): the signed sum is 2K - 21 with K ~ Binomial(21, 1/2), so the
    # exact p is P(|2K - 21| >= 5) = 2 P(K >= 13).
    differences = [1.0] * 13 + [-1.0] * 8
    exact = 2 * stats.binom.sf(12, 21, 0.5)
    estimate, monte_carlo = sign_flip_test(differences)
    assert monte_carlo and estimate == sign_flip_p(differences)  # deterministic: a report rebuilds byte for byte
    assert estimate == pytest.approx(exact, abs=0.005)  # 100,000 draws: standard error about 0.0015


def test_permutation_p_counts_the_relabellings_by_hand():
    # Pooled 1, 2, 3, 4 with a = {1, 2}: a's mean minus b's is sum(a') - 5 over the 6 choices of a'
    # (sums 3, 4, 5, 5, 6, 7), and |sum(a') - 5| >= 2 for {1, 2} and {3, 4} only.
    assert permutation_p([1.0, 2.0], [3.0, 4.0]) == pytest.approx(1 / 3)
    # a = {4, 5} against 1, 2, 3: the gap is s/2 - (15 - s)/3 over the 10 pair sums s of a' (3, 4, 5, 5, 6,
    # 6, 7, 7, 8, 9); observed s = 9 gives +2.5, and only s = 9 and s = 3 reach |2.5|.
    assert permutation_p([4.0, 5.0], [1.0, 2.0, 3.0]) == pytest.approx(0.2)
    # scipy's test needs two values a side, so one value against three is not tested (it was: 1 of 4).
    assert math.isnan(permutation_p([5.0], [1.0, 2.0, 3.0])) and math.isnan(permutation_p([], [1.0]))


@pytest.mark.slow
def test_ten_values_a_side_are_enumerated_exactly_and_eleven_against_ten_are_estimated():
    # C(20, 10) = 184,756 relabellings: every one counted. Of 0/1 values, the ones landing on a' are
    # hypergeometric (20 values, 10 ones, 10 drawn); observed 7 ones, so p = P(|2A - 10| >= 4) = 2 P(A >= 7).
    a, b = [1.0] * 7 + [0.0] * 3, [1.0] * 3 + [0.0] * 7
    assert permutation_test(a, b) == (pytest.approx(2 * stats.hypergeom.sf(6, 20, 10, 10), rel=1e-12), False)
    # C(21, 10) = 352,716: a fixed-seed Monte Carlo estimate, said to be one.
    a = a + [1.0]
    estimate, monte_carlo = permutation_test(a, b)
    assert monte_carlo and (estimate, True) == permutation_test(a, b)
    exact = sum(stats.hypergeom.pmf(k, 21, 11, 11) for k in range(12) if abs(k / 11 - (11 - k) / 10) >= 8 / 11 - 3 / 10 - 1e-12)
    assert estimate == pytest.approx(exact, abs=0.005)


@pytest.mark.slow
def test_seventeen_signs_are_enumerated_exactly_and_eighteen_are_estimated():
    # The signed sum of n values ±1 is 2K - n with K ~ Binomial(n, 1/2).
    seventeen = [1.0] * 12 + [-1.0] * 5
    assert sign_flip_test(seventeen) == (pytest.approx(2 * stats.binom.sf(11, 17, 0.5), rel=1e-12), False)
    estimate, monte_carlo = sign_flip_test(seventeen + [1.0])
    assert monte_carlo and estimate == pytest.approx(2 * stats.binom.sf(12, 18, 0.5), abs=0.005)


def test_the_label_says_monte_carlo_exactly_past_the_limit(monkeypatch):
    monkeypatch.setattr(statistics_module, "EXACT_RELABELLINGS_MAX", 10)
    # 2 + 3 values: C(5, 2) = 10 relabellings, at the limit: exact.
    assert permutation_test([4.0, 5.0], [1.0, 2.0, 3.0]) == (pytest.approx(0.2), False)
    assert permutation_test([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])[1]  # C(6, 3) = 20: estimated
    assert sign_flip_test([1.0, 2.0, 3.0]) == (0.25, False)  # 2^3 = 8
    assert sign_flip_test([1.0, 2.0, 3.0, 4.0])[1]  # 16
    monkeypatch.setattr(statistics_module, "EXACT_RELABELLINGS_MAX", 9)
    assert permutation_test([4.0, 5.0], [1.0, 2.0, 3.0])[1]
    assert paired_difference({s: float(s) for s in range(4)}, {s: 0.5 for s in range(4)}).p_exact_monte_carlo
    assert smallest_permutation_p(2, 3) == 1 / 100_001


def test_the_two_sided_p_is_the_share_reaching_the_observed_absolute_difference():
    # a = {1, 0} against 0, 0, 0: a' holds the 1 in 4 of the 10 relabellings (gap +0.5), else -1/3. The
    # documented p counts |gap| >= 0.5: 0.4. scipy's default two-sided p, 2 min(P(T <= t), P(T >= t)),
    # would double the upper tail to 0.8, for a null that is not symmetric.
    assert permutation_p([1.0, 0.0], [0.0, 0.0, 0.0]) == pytest.approx(0.4)
    default = stats.permutation_test(
        ([1.0, 0.0], [0.0, 0.0, 0.0]),
        lambda x, y, axis: x.mean(axis) - y.mean(axis),
        permutation_type="independent",
        vectorized=True,
        n_resamples=np.inf,
    )
    assert default.pvalue == pytest.approx(0.8)


@pytest.mark.slow
def test_the_randomisation_tests_agree_with_scipy_where_no_arrangement_ties():
    rng = np.random.default_rng(3)
    for n in (2, 5, 9):
        differences = list(rng.normal(size=n))
        flips = stats.permutation_test(
            (differences,), lambda x, axis: x.mean(axis), permutation_type="samples", vectorized=True, n_resamples=np.inf
        )  # symmetric null: 2 min = |.|
        assert sign_flip_p(differences) == pytest.approx(flips.pvalue, rel=1e-12)
        a, b = list(rng.normal(size=n)), list(rng.normal(size=n + 1))
        labels = stats.permutation_test(
            (a, b),
            lambda x, y, axis: abs(x.mean(axis) - y.mean(axis)),
            permutation_type="independent",
            vectorized=True,
            n_resamples=np.inf,
            alternative="greater",
        )
        assert permutation_p(a, b) == pytest.approx(labels.pvalue, rel=1e-12)
    for n_a, n_b in ((2, 2), (2, 3), (4, 4), (3, 5)):  # the two groups wholly apart: the floor
        assert smallest_permutation_p(n_a, n_b) == pytest.approx(permutation_p([0.0] * n_a, [1.0] * n_b))


def test_the_bootstrap_draws_the_resamples_the_project_drew_by_hand():
    # scipy's one- and two-sample bootstrap takes the same integers(0, n, (resamples, n)) draws, sample
    # after sample, that the intervals were computed from before scipy did it: the intervals agree.
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=10), rng.normal(size=7)

    def by_hand(*samples):
        generator = np.random.default_rng(0)
        means = [x[generator.integers(0, x.size, size=(10_000, x.size))].mean(axis=1) for x in samples]
        return tuple(np.quantile(means[0] - (means[1] if len(means) > 1 else 0), [0.025, 0.975]))

    assert bootstrap_interval(list(a)) == pytest.approx(by_hand(a), rel=1e-12)
    assert bootstrap_interval_two_sample(list(a), list(b)) == pytest.approx(by_hand(a, b), rel=1e-12)


def test_clopper_pearson_is_the_beta_quantiles():
    for k, n in ((0, 3), (1, 7), (5, 10), (7, 7)):
        low = 0.0 if k == 0 else stats.beta.ppf(0.025, k, n - k + 1)
        high = 1.0 if k == n else stats.beta.ppf(0.975, k + 1, n - k)
        assert clopper_pearson(k, n) == (pytest.approx(low, rel=1e-9), pytest.approx(high, rel=1e-9))
    assert all(math.isnan(x) for x in clopper_pearson(0, 0))


def test_bootstrap_intervals_by_hand():
    assert bootstrap_interval([0.1] * 5) == (0.1, 0.1)  # every resample has the same mean
    # Two values 0 and 1: a resample's mean is 0, 0.5 or 1 with chances 1/4, 1/2, 1/4, so the 2.5% and
    # 97.5% points of 10,000 resamples are 0 and 1.
    assert bootstrap_interval([0.0, 1.0]) == (0.0, 1.0)
    skewed = [0.0, 0.0, 0.0, 0.0, 10.0]
    low, high = bootstrap_interval(skewed)
    assert (low, high) == bootstrap_interval(skewed)  # the fixed seed: the same interval every time
    assert 0.0 <= low < 2.0 < high <= 10.0
    # Twelve values have enough distinct resample means for the seed to show (five mostly land on the same).
    wide = [2 ** (i / 3) for i in range(12)]
    assert bootstrap_interval(wide) == bootstrap_interval(wide) != bootstrap_interval(wide, seed=1)
    assert all(math.isnan(x) for x in bootstrap_interval([3.0]))
    assert bootstrap_interval_two_sample([0.7] * 3, [0.2] * 4) == (0.7 - 0.2, 0.7 - 0.2)
    assert all(math.isnan(x) for x in bootstrap_interval_two_sample([1.0, 2.0], [3.0]))


def test_paired_difference_carries_the_exact_p_and_the_bootstrap():
    d = paired_difference({s: 0.5 + s / 10 for s in range(5)}, {s: 0.4 for s in range(5)})
    assert (d.n, d.n_baseline, d.df, d.paired) == (5, 5, 4, True)
    assert d.p_exact == 0.0625 and d.p < 0.05  # all five up: the t-test rejects, the exact test cannot
    assert d.boot_low <= d.mean <= d.boot_high
    same = paired_difference({s: 0.5 for s in range(4)}, {s: 0.4 for s in range(4)})
    assert (same.low, same.high, same.boot_low, same.boot_high) == (same.mean,) * 4 and math.isnan(same.p)
    assert same.p_exact == 0.125
    one = paired_difference({0: 1.0}, {0: 0.5})
    assert one.mean == 0.5 and all(math.isnan(x) for x in (one.p, one.p_exact, one.boot_low, one.df))


def test_welch_matches_scipy_and_a_hand_computed_df():
    variant = {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0}
    baseline = {10: 2.0, 11: 4.0, 12: 6.0, 13: 8.0, 14: 10.0}  # no seed in common: nothing to pair
    d = unpaired_difference(variant, baseline)
    # Variances 5/3 and 10: shares 5/12 and 2, df = (29/12)^2 / ((5/12)^2 / 3 + 2^2 / 4) = 2523/457.
    assert d.df == pytest.approx(float(Fraction(2523, 457)))
    assert (d.n, d.n_baseline, d.paired, d.mean) == (4, 5, False, pytest.approx(2.5 - 6.0))
    assert d.error == pytest.approx(math.sqrt(29 / 12))
    welch = stats.ttest_ind(list(variant.values()), list(baseline.values()), equal_var=False)
    assert d.p == pytest.approx(welch.pvalue) and d.df == pytest.approx(welch.df)
    scipy_interval = welch.confidence_interval(0.95)
    assert (d.low, d.high) == (pytest.approx(scipy_interval.low), pytest.approx(scipy_interval.high))
    assert d.p_exact == permutation_p([1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0, 10.0])
    assert d.boot_low <= d.mean <= d.boot_high
    flat = unpaired_difference({0: 0.7, 1: 0.7}, {5: 0.2, 6: 0.2, 7: 0.2})
    assert (flat.low, flat.high) == (flat.mean, flat.mean) and math.isnan(flat.p)
    assert (flat.boot_low, flat.boot_high) == (0.7 - 0.2, 0.7 - 0.2)  # fmean of three 0.2s rounds; this does not
    few = unpaired_difference({0: 1.0}, baseline)
    assert verdict(with_holm([few])[0], "max") == "needs 2 or more seeds on each side"


def test_holm_and_simultaneous_intervals_count_only_the_primary_comparisons():
    first = Difference(3, 3, 1.0, p=0.03, error=0.5, df=2)
    second = Difference(3, 3, -1.0, p=0.02, error=0.5, df=1.0, paired=False)  # a Welch df of its own
    exploratory = Difference(3, 3, 2.0, p=0.001, error=0.1, df=2)
    untested = Difference(3, 3, 0.3, p=math.nan, error=0.0, df=2)  # same difference on every seed
    a, b, c, d = with_holm([first, second, exploratory, untested], primary=[True, True, False, True])
    # Holm over the two tested primary p-values 0.02, 0.03: 2 * 0.02 = 0.04, then max(0.04, 0.03) = 0.04.
    assert (a.p_holm, b.p_holm) == (pytest.approx(0.04), pytest.approx(0.04)) and math.isnan(d.p_holm)
    # Bonferroni over m = 2, each at 1 - 0.05 / 4 = 0.9875: t with 2 df is 0.975 / sqrt(2 * 0.9875 * 0.0125),
    # t with 1 df (Cauchy) is tan(pi * (0.9875 - 0.5)).
    assert a.joint_high - a.mean == pytest.approx(0.975 / math.sqrt(2 * 0.9875 * 0.0125) * 0.5)
    assert b.joint_high - b.mean == pytest.approx(math.tan(math.pi * 0.4875) * 0.5)
    assert (d.joint_low, d.joint_high) == (0.3, 0.3)
    assert not c.primary and all(math.isnan(x) for x in (c.p_holm, c.joint_low, c.joint_high))
    assert verdict(c, "max") == "exploratory (not corrected)"  # p = 0.001, but outside the family
    assert verdict(a, "max") == "better" and verdict(b, "max") == "worse"
    everything = with_holm([first, second, exploratory])  # no mask: all three are the family
    assert [x.p_holm for x in everything] == pytest.approx([0.04, 0.04, 0.003])
    assert all(x.primary for x in with_holm([c]))
    with pytest.raises(ValueError, match="2 primary flags for 1 differences"):
        with_holm([first], primary=[True, False])
