"""The statistics `compare` reports: the difference of a variant from the baseline over seeds, with a
t-interval, a randomisation p-value (exact where the arrangements can be enumerated) and a bootstrap
interval beside it (scipy.stats.permutation_test and bootstrap); Holm's correction over
the confirmatory (primary) comparisons, with Bonferroni's simultaneous intervals; exact binomial
intervals for success counts.

Runs with the same seed share their data order and augmentation (the report checks this), so a variant
is compared with the baseline seed by seed (paired): the differences, not the two spreads, carry the
uncertainty. Where pairing is broken the comparison is unpaired (Welch), every value on each side used.

What each test assumes:
- t (paired t, Welch): the seed-by-seed differences (paired) or each side's values (Welch) are roughly
  normal; with five seeds that is assumed, not something the data can check.
- sign flip (paired) / label permutation (unpaired): only that, with no effect, each difference is
  as likely positive as negative (symmetry), or the labels are exchangeable. No normality, but a floor:
  with n pairs the smallest reachable p is 2 / 2^n (five seeds: 0.0625, never below 0.05). Two-sided:
  the share of arrangements whose |statistic| reaches the observed one. Exact (every arrangement) up to
  EXACT_RELABELLINGS_MAX arrangements, 17 pairs or ten values a side; above, a Monte Carlo estimate
  from 100,000 random ones (fixed seed), which the report labels as such.
- bootstrap percentile: approximate; it takes the few seeds as the whole population (spread divided by n,
  no t-widening), so at n = 5 it is too narrow: about two thirds of the t-interval's width for normal data.
"No detectable difference" means the Holm-corrected t-test did not reject equality at 5%: the interval
shows the differences still compatible with the data, and it does not mean the variants are the same.
Comparisons outside the primary family are reported uncorrected and labelled exploratory.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

ALPHA = 0.05
# Sign assignments or relabellings enumerated exactly, up to C(20, 10) = 184,756 (ten seeds a side, a
# few seconds); above, Monte Carlo, and the report says so.
EXACT_RELABELLINGS_MAX = 200_000
MONTE_CARLO_DRAWS = 100_000
BATCH = 50_000  # arrangements scipy evaluates at once: bounds the memory
MONTE_CARLO_SEED = 0  # fixed, so a report rebuilds byte for byte
TIE_TOLERANCE = 1e-9  # relative to the sum of |values|: sums in another order round differently


@dataclass(frozen=True)
class Difference:
    """variant - baseline over seeds, with every number the report prints about it.

    Paired (`paired=True`): over the seeds both have; `mean` is the mean of the seed-by-seed differences,
    `low`/`high` the paired t-interval, `p` the paired t-test, `p_exact` the sign-flip test (exact, or a Monte Carlo
    estimate where `p_exact_monte_carlo`) and
    `boot_low`/`boot_high` the bootstrap percentile interval of the resampled differences. Unpaired: over
    every value on each side (`n` variant values, `n_baseline` baseline values); `mean` is the difference of
    the means, the interval and p come from Welch's t (Welch-Satterthwaite `df`), `p_exact` from permuting
    the labels and the bootstrap resamples each side on its own. Across the primary comparisons made
    together, `p_holm` is the Holm-adjusted p and `joint_low`/`joint_high` the simultaneous 95% interval
    (each at confidence 1 - 0.05/m, Bonferroni: all m cover their true differences together at least 95%
    of the time); a comparison outside that family has `primary=False` and NaN there. NaN wherever a
    value cannot be computed (fewer than 2 values)."""

    n: int
    n_baseline: int
    mean: float
    low: float = math.nan
    high: float = math.nan
    p: float = math.nan
    error: float = math.nan  # standard error of `mean`
    df: float = math.nan  # degrees of freedom of the t-interval and t-test
    paired: bool = True
    p_exact: float = math.nan
    p_exact_monte_carlo: bool = False  # p_exact estimated from random arrangements, not enumerated
    boot_low: float = math.nan
    boot_high: float = math.nan
    p_holm: float = math.nan
    joint_low: float = math.nan
    joint_high: float = math.nan
    primary: bool = True


def _is_constant(error: float, mean: float) -> bool:
    return error <= 1e-12 * max(1.0, abs(mean))


def _t_fields(mean: float, error: float, df: float, confidence: float) -> dict:
    """low, high, p of a t-statistic, with the case where every value agreed (no spread: nothing to test
    against) kept apart: the interval is the point, and p is 1 only for a difference of exactly 0."""
    if _is_constant(error, mean):
        return {"low": mean, "high": mean, "p": 1.0 if abs(mean) <= 1e-12 else math.nan, "error": 0.0}
    half_width = float(stats.t.ppf(0.5 + confidence / 2, df)) * error
    p = 2.0 * float(stats.t.sf(abs(mean / error), df))
    return {"low": mean - half_width, "high": mean + half_width, "p": p, "error": error}


def paired_difference(variant: dict[int, float], baseline: dict[int, float], confidence: float = 0.95) -> Difference:
    """Seed-by-seed differences `variant[seed] - baseline[seed]` over the seeds present in both."""
    seeds = sorted(set(variant) & set(baseline))
    differences = [variant[s] - baseline[s] for s in seeds]
    n = len(differences)
    mean = statistics.fmean(differences) if n else math.nan
    if n < 2:
        return Difference(n, n, mean)
    error = statistics.stdev(differences) / math.sqrt(n)
    boot_low, boot_high = bootstrap_interval(differences, confidence)
    p_exact, monte_carlo = sign_flip_test(differences)
    return Difference(
        n,
        n,
        mean,
        df=n - 1,
        paired=True,
        p_exact=p_exact,
        p_exact_monte_carlo=monte_carlo,
        boot_low=boot_low,
        boot_high=boot_high,
        **_t_fields(mean, error, n - 1, confidence),
    )


def unpaired_difference(variant: dict[int, float], baseline: dict[int, float], confidence: float = 0.95) -> Difference:
    """mean(variant) - mean(baseline) over every value on each side, seeds not matched: Welch's t (unequal
    variances), for arms whose seeds did not see the same data."""
    a, b = [variant[s] for s in sorted(variant)], [baseline[s] for s in sorted(baseline)]
    mean = statistics.fmean(a) - statistics.fmean(b) if a and b else math.nan
    if len(a) < 2 or len(b) < 2:
        return Difference(len(a), len(b), mean, paired=False)
    share_a, share_b = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    error = math.sqrt(share_a + share_b)
    spread = share_a**2 / (len(a) - 1) + share_b**2 / (len(b) - 1)
    df = (share_a + share_b) ** 2 / spread if spread > 0 else math.nan  # Welch-Satterthwaite
    boot_low, boot_high = bootstrap_interval_two_sample(a, b, confidence)
    p_exact, monte_carlo = permutation_test(a, b)
    return Difference(
        len(a),
        len(b),
        mean,
        df=df,
        paired=False,
        p_exact=p_exact,
        p_exact_monte_carlo=monte_carlo,
        boot_low=boot_low,
        boot_high=boot_high,
        **_t_fields(mean, error, df, confidence),
    )


def sign_flip_p(differences: list[float]) -> float:
    """Two-sided sign-flip p-value for "the differences are symmetric about 0": the share of the ways to
    flip their signs whose |mean| is at least the observed |mean| (ties within a small relative tolerance
    count, since the same sum added in another order rounds differently). Exact, every one of the 2^n
    assignments, while 2^n <= EXACT_RELABELLINGS_MAX (n <= 17); above, a Monte Carlo estimate (see
    `randomisation_test`). NaN for no differences."""
    return sign_flip_test(differences)[0]


def sign_flip_test(differences: list[float]) -> tuple[float, bool]:
    """(p, whether p is a Monte Carlo estimate) of `sign_flip_p`."""
    values = np.asarray(differences, dtype=float)
    if values.size == 0:
        return math.nan, False
    if values.size == 1:  # both signs reach |x| (scipy's test needs two values)
        return 1.0, False
    tolerance = TIE_TOLERANCE * float(np.abs(values).sum())
    return randomisation_test((values,), "samples", 2**values.size, tolerance)


def permutation_p(a: list[float], b: list[float]) -> float:
    """Two-sided permutation p-value for the difference of means mean(a) - mean(b): the share of the ways
    to relabel the pooled values (C(n_a + n_b, n_a) of them) whose |difference| is at least the observed
    one (ties within a small relative tolerance). Exact while the relabellings number at most
    EXACT_RELABELLINGS_MAX (C(20, 10) = 184,756 is); above, a Monte Carlo estimate (see
    `randomisation_test`). NaN when either side has fewer than 2 values (scipy's test needs 2 a side)."""
    return permutation_test(a, b)[0]


def permutation_test(a: list[float], b: list[float]) -> tuple[float, bool]:
    """(p, whether p is a Monte Carlo estimate) of `permutation_p`."""
    if len(a) < 2 or len(b) < 2:
        return math.nan, False
    left, right = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    tolerance = TIE_TOLERANCE * float(np.abs(left).sum() + np.abs(right).sum()) * (1 / left.size + 1 / right.size)
    return randomisation_test((left, right), "independent", math.comb(left.size + right.size, left.size), tolerance)


def _absolute_mean(values, axis=-1):
    return np.abs(np.mean(values, axis=axis))


def _absolute_gap(a, b, axis=-1):
    return np.abs(np.mean(a, axis=axis) - np.mean(b, axis=axis))


def randomisation_test(samples: tuple, kind: str, arrangements: int, tolerance: float) -> tuple[float, bool]:
    """scipy.stats.permutation_test of |mean| (one sample, `kind` "samples": sign flips) or |mean(a) -
    mean(b)| (two, "independent": relabellings), over all `arrangements` while they number at most
    EXACT_RELABELLINGS_MAX, else over MONTE_CARLO_DRAWS random ones from a generator seeded with
    MONTE_CARLO_SEED (the same input always gives the same p). The statistic is the absolute value, so
    the two-sided p is P(|T| >= |observed|), not scipy's default 2 min(P(T <= t), P(T >= t)) (the same for
    sign flips, whose null is symmetric; not for unequal groups). p is counted from scipy's null
    distribution with `tolerance` for ties, scipy's own being relative to the observed value alone:
    exact, hits / arrangements (the observed one among them); Monte Carlo, (hits + 1) / (draws + 1), as
    scipy counts it. Returns (p, whether it is a Monte Carlo estimate)."""
    monte_carlo = arrangements > EXACT_RELABELLINGS_MAX
    statistic = _absolute_mean if kind == "samples" else _absolute_gap
    result = stats.permutation_test(
        samples,
        statistic,
        permutation_type=kind,
        vectorized=True,
        n_resamples=MONTE_CARLO_DRAWS if monte_carlo else np.inf,
        alternative="greater",
        batch=BATCH,
        rng=np.random.default_rng(MONTE_CARLO_SEED),
    )
    hits = int(np.count_nonzero(result.null_distribution >= result.statistic - tolerance))
    if monte_carlo:
        return (hits + 1) / (result.null_distribution.size + 1), True
    return hits / result.null_distribution.size, False


def smallest_exact_p(n: int) -> float:
    """The smallest p-value the exact sign-flip test can give with n pairs (all signs alike): 2 / 2^n,
    1.0 for n = 0. Above the test's alpha, no number of seeds' worth of agreement can reach significance."""
    return 1.0 if n <= 1 else 2.0 / 2**n


def smallest_permutation_p(n_a: int, n_b: int) -> float:
    """The smallest p-value the label permutation can give with n_a and n_b values: the two groups wholly
    apart, 1 of the C(n_a + n_b, n_a) relabellings, or 2 when n_a = n_b (the mirror image reaches as
    far); 1 / (draws + 1) where the test is a Monte Carlo estimate."""
    arrangements = math.comb(n_a + n_b, n_a)
    if arrangements > EXACT_RELABELLINGS_MAX:
        return 1 / (MONTE_CARLO_DRAWS + 1)
    return min(1.0, (2 if n_a == n_b else 1) / arrangements)


def bootstrap_interval(
    differences: list[float], confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (scipy.stats.bootstrap): `resamples` resamples of the
    differences with replacement, by a generator seeded with `seed` (the same input gives the same
    interval). NaN for fewer than 2 values."""
    values = np.asarray(differences, dtype=float)
    if values.size < 2:
        return math.nan, math.nan
    low, high = values.min(), values.max()

    def mean(sample, axis=-1):  # a mean lies within the values' range: clipping undoes the rounding of n equal values
        return np.clip(np.mean(sample, axis=axis), low, high)

    return _bootstrap((values,), mean, confidence, resamples, seed)


def bootstrap_interval_two_sample(
    a: list[float], b: list[float], confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(a) - mean(b) (scipy.stats.bootstrap), each side resampled
    with replacement on its own, by a generator seeded with `seed`. NaN when either side has fewer than
    2 values."""
    left, right = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if left.size < 2 or right.size < 2:
        return math.nan, math.nan

    def gap(x, y, axis=-1):
        return np.clip(np.mean(x, axis=axis), left.min(), left.max()) - np.clip(np.mean(y, axis=axis), right.min(), right.max())

    return _bootstrap((left, right), gap, confidence, resamples, seed)


def _bootstrap(samples: tuple, statistic, confidence: float, resamples: int, seed: int) -> tuple[float, float]:
    result = stats.bootstrap(
        samples,
        statistic,
        n_resamples=resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def holm(p_values: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order; NaN (not tested) stays NaN and does not
    count as a comparison."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    adjusted = [math.nan] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        adjusted[i] = running
    return adjusted


def with_holm(differences: list[Difference], primary: list[bool] | None = None) -> list[Difference]:
    """The differences with their Holm p-values and Bonferroni simultaneous intervals filled in, over the
    primary ones only (`primary` is a mask in the same order; None: all are primary). Each simultaneous
    interval uses its own difference's degrees of freedom (Welch's for an unpaired one). The others get
    NaN there and `primary=False`: they are exploratory, outside the family the correction counts."""
    if primary is None:
        primary = [True] * len(differences)
    if len(primary) != len(differences):
        raise ValueError(f"with_holm got {len(primary)} primary flags for {len(differences)} differences")
    family = [i for i, is_primary in enumerate(primary) if is_primary]
    corrected = dict(zip(family, holm([differences[i].p for i in family])))
    tested = sum(not math.isnan(differences[i].p) for i in family)
    done = []
    for i, d in enumerate(differences):
        if i not in corrected:
            done.append(replace(d, p_holm=math.nan, joint_low=math.nan, joint_high=math.nan, primary=False))
            continue
        joint_low = joint_high = math.nan
        if not math.isnan(d.error) and tested:
            half_width = 0.0 if d.error == 0 else float(stats.t.ppf(1 - ALPHA / (2 * tested), d.df)) * d.error
            joint_low, joint_high = d.mean - half_width, d.mean + half_width
        done.append(replace(d, p_holm=corrected[i], joint_low=joint_low, joint_high=joint_high, primary=True))
    return done


def verdict(difference: Difference, mode: str) -> str:
    """In words, for a metric where `mode` ("max" or "min") is better: from the Holm-corrected p-value
    (Holm rejects whenever Bonferroni does, so a verdict can say "better" where the simultaneous
    interval still touches zero, never the reverse). A comparison outside the primary family gets no
    verdict: it is exploratory."""
    if difference.paired and difference.n < 2:
        return "needs 2 or more paired seeds"
    if not difference.paired and min(difference.n, difference.n_baseline) < 2:
        return "needs 2 or more seeds on each side"
    if not difference.primary:
        return "exploratory (not corrected)"
    if math.isnan(difference.p_holm):
        if difference.paired:
            return "the same difference on every seed: not testable"
        return "no spread on either side: not testable"
    if difference.p_holm < ALPHA:
        better = difference.mean > 0 if mode == "max" else difference.mean < 0
        return "better" if better else "worse"
    return "no detectable difference"


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval for a success probability from `successes` of `trials`
    (scipy.stats.binomtest); NaN for no trials."""
    if trials == 0:
        return math.nan, math.nan
    found = stats.binomtest(successes, trials).proportion_ci(confidence_level=confidence, method="exact")
    return float(found.low), float(found.high)


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample std (0 for a single value; NaN for none)."""
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0
