"""The statistics `compare` reports: the difference of a variant from the baseline over seeds, with a
t-interval, an exact randomisation p-value and a bootstrap interval beside it; Holm's correction over
the confirmatory (primary) comparisons, with Bonferroni's simultaneous intervals; exact binomial
intervals for success counts.

Runs with the same seed share their data order and augmentation (the report checks this), so a variant
is compared with the baseline seed by seed (paired): the differences, not the two spreads, carry the
uncertainty. Where pairing is broken the comparison is unpaired (Welch), every value on each side used.

What each test assumes:
- t (paired t, Welch): the seed-by-seed differences (paired) or each side's values (Welch) are roughly
  normal; with five seeds that is assumed, not something the data can check.
- exact sign flip (paired) / label permutation (unpaired): only that, with no effect, each difference is
  as likely positive as negative (symmetry), or the labels are exchangeable. No normality, but a floor:
  with n pairs the smallest reachable p is 2 / 2^n (five seeds: 0.0625, never below 0.05).
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
from itertools import combinations

import numpy as np
from scipy import stats

ALPHA = 0.05
EXACT_SIGN_FLIP_MAX_N = 20  # 2^20 sums, about 8 MB: exact; above, Monte Carlo
EXACT_PERMUTATIONS_MAX = 50_000  # label arrangements enumerated exactly; above, Monte Carlo
MONTE_CARLO_DRAWS = 100_000
MONTE_CARLO_SEED = 0  # fixed, so a report rebuilds byte for byte
TIE_TOLERANCE = 1e-9  # relative to the sum of |values|: sums in another order round differently


@dataclass(frozen=True)
class Difference:
    """variant - baseline over seeds, with every number the report prints about it.

    Paired (`paired=True`): over the seeds both have; `mean` is the mean of the seed-by-seed differences,
    `low`/`high` the paired t-interval, `p` the paired t-test, `p_exact` the exact sign-flip test and
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
    boot_low: float = math.nan
    boot_high: float = math.nan
    p_holm: float = math.nan
    joint_low: float = math.nan
    joint_high: float = math.nan
    primary: bool = True


PairedDifference = Difference  # the name before unpaired comparisons existed


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
    return Difference(n, n, mean, df=n - 1, paired=True, p_exact=sign_flip_p(differences),
                      boot_low=boot_low, boot_high=boot_high, **_t_fields(mean, error, n - 1, confidence))


def unpaired_difference(variant: dict[int, float], baseline: dict[int, float], confidence: float = 0.95) -> Difference:
    """mean(variant) - mean(baseline) over every value on each side, seeds not matched: Welch's t (unequal
    variances), for arms whose seeds did not see the same data."""
    a, b = [variant[s] for s in sorted(variant)], [baseline[s] for s in sorted(baseline)]
    mean = statistics.fmean(a) - statistics.fmean(b) if a and b else math.nan
    if len(a) < 2 or len(b) < 2:
        return Difference(len(a), len(b), mean, paired=False)
    share_a, share_b = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    error = math.sqrt(share_a + share_b)
    spread = share_a ** 2 / (len(a) - 1) + share_b ** 2 / (len(b) - 1)
    df = (share_a + share_b) ** 2 / spread if spread > 0 else math.nan  # Welch-Satterthwaite
    boot_low, boot_high = bootstrap_interval_two_sample(a, b, confidence)
    return Difference(len(a), len(b), mean, df=df, paired=False, p_exact=permutation_p(a, b),
                      boot_low=boot_low, boot_high=boot_high, **_t_fields(mean, error, df, confidence))


def sign_flip_p(differences: list[float]) -> float:
    """Exact two-sided sign-flip p-value for "the differences are symmetric about 0": the share of the
    2^n ways to flip their signs whose |mean| is at least the observed |mean| (ties within a small
    relative tolerance count, since the same sum added in another order rounds differently). Enumerated
    exactly up to n = 20; above, a Monte Carlo estimate from 100,000 random sign assignments drawn by a
    generator with a fixed seed, (hits + 1) / (draws + 1), so the same input always gives the same p.
    NaN for no differences."""
    values = np.asarray(differences, dtype=float)
    if values.size == 0:
        return math.nan
    observed = abs(values.sum())
    threshold = observed - TIE_TOLERANCE * np.abs(values).sum()
    if values.size <= EXACT_SIGN_FLIP_MAX_N:
        sums = np.zeros(1)
        for value in values:  # every signed sum, doubling per value
            sums = np.concatenate((sums + value, sums - value))
        return float(np.count_nonzero(np.abs(sums) >= threshold) / sums.size)
    generator = np.random.default_rng(MONTE_CARLO_SEED)
    hits = 0
    for draws in _chunks(MONTE_CARLO_DRAWS, values.size):
        signs = generator.choice((-1.0, 1.0), size=(draws, values.size))
        hits += int(np.count_nonzero(np.abs(signs @ values) >= threshold))
    return (hits + 1) / (MONTE_CARLO_DRAWS + 1)


def smallest_exact_p(n: int) -> float:
    """The smallest p-value the exact sign-flip test can give with n pairs (all signs alike): 2 / 2^n,
    1.0 for n = 0. Above the test's alpha, no number of seeds' worth of agreement can reach significance."""
    return 1.0 if n <= 1 else 2.0 / 2 ** n


def permutation_p(a: list[float], b: list[float]) -> float:
    """Exact two-sided permutation p-value for the difference of means mean(a) - mean(b): the share of the
    C(n_a + n_b, n_a) ways to relabel the pooled values whose |difference| is at least the observed one
    (ties within a small relative tolerance). Exact while there are at most 50,000 arrangements; above, a
    Monte Carlo estimate from 100,000 random relabellings by a fixed-seed generator, (hits + 1) / (draws
    + 1), so the same input always gives the same p. NaN when either side is empty."""
    if not a or not b:
        return math.nan
    pooled = np.asarray([*a, *b], dtype=float)
    n_a, n_b, total = len(a), len(b), pooled.sum()

    def gaps(sums_a: np.ndarray) -> np.ndarray:  # |mean(a') - mean(b')| from the sums of the a side
        return np.abs(sums_a / n_a - (total - sums_a) / n_b)

    observed = gaps(np.asarray([pooled[:n_a].sum()]))[0]
    threshold = observed - TIE_TOLERANCE * np.abs(pooled).sum() * (1 / n_a + 1 / n_b)
    if math.comb(pooled.size, n_a) <= EXACT_PERMUTATIONS_MAX:
        chosen = np.array(list(combinations(range(pooled.size), n_a)))
        return float(np.count_nonzero(gaps(pooled[chosen].sum(axis=1)) >= threshold) / len(chosen))
    generator = np.random.default_rng(MONTE_CARLO_SEED)
    hits = 0
    for draws in _chunks(MONTE_CARLO_DRAWS, pooled.size):
        shuffled = generator.permuted(np.tile(pooled, (draws, 1)), axis=1)
        hits += int(np.count_nonzero(gaps(shuffled[:, :n_a].sum(axis=1)) >= threshold))
    return (hits + 1) / (MONTE_CARLO_DRAWS + 1)


def bootstrap_interval(differences: list[float], confidence: float = 0.95, resamples: int = 10_000,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean: `resamples` resamples of the differences with
    replacement, by a generator seeded with `seed` (the same input gives the same interval). NaN for
    fewer than 2 values."""
    values = np.asarray(differences, dtype=float)
    if values.size < 2:
        return math.nan, math.nan
    generator = np.random.default_rng(seed)
    means = values[generator.integers(0, values.size, size=(resamples, values.size))].mean(axis=1)
    # A mean lies within the values' range; clipping undoes the rounding of summing n equal values.
    return _percentiles(np.clip(means, values.min(), values.max()), confidence)


def bootstrap_interval_two_sample(a: list[float], b: list[float], confidence: float = 0.95,
                                  resamples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(a) - mean(b), each side resampled with replacement on its
    own, by a generator seeded with `seed`. NaN when either side has fewer than 2 values."""
    left, right = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if left.size < 2 or right.size < 2:
        return math.nan, math.nan
    generator = np.random.default_rng(seed)
    means_a = left[generator.integers(0, left.size, size=(resamples, left.size))].mean(axis=1)
    means_b = right[generator.integers(0, right.size, size=(resamples, right.size))].mean(axis=1)
    gaps = np.clip(means_a, left.min(), left.max()) - np.clip(means_b, right.min(), right.max())
    return _percentiles(gaps, confidence)


def _percentiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    low, high = np.quantile(values, [0.5 - confidence / 2, 0.5 + confidence / 2])
    return float(low), float(high)


def _chunks(draws: int, width: int, cells: int = 2_000_000) -> list[int]:
    """`draws` split into pieces of at most `cells` / `width` rows, to bound the memory of a Monte Carlo."""
    rows = max(1, cells // max(1, width))
    return [min(rows, draws - start) for start in range(0, draws, rows)]


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
    """Exact (Clopper-Pearson) interval for a success probability from `successes` of `trials`."""
    if trials == 0:
        return math.nan, math.nan
    alpha = 1.0 - confidence
    low = 0.0 if successes == 0 else float(stats.beta.ppf(alpha / 2, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(stats.beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
    return low, high


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample std (0 for a single value; NaN for none)."""
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0
