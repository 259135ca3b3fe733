"""The statistics `compare` reports: paired differences over seeds with t-intervals, Holm's correction
for comparing several variants with one baseline (with Bonferroni's simultaneous intervals beside it),
and exact binomial intervals for success counts.

Runs with the same seed share their data order (and, where shapes allow, their initial weights), so a
variant is compared with the baseline seed by seed: the differences, not the two spreads, carry the
uncertainty. "No detectable difference" means the Holm-corrected test did not reject equality at 5%:
the interval shows the differences still compatible with the data, and it does not mean the variants
are the same.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

from scipy import stats

ALPHA = 0.05


@dataclass(frozen=True)
class PairedDifference:
    """variant - baseline over the seeds both have: mean, 95% t-interval, two-sided p (paired t-test),
    and, across the m comparisons made together, the Holm-adjusted p-value and the simultaneous 95%
    interval (each at confidence 1 - 0.05/m, Bonferroni: all m cover their true differences together
    at least 95% of the time)."""

    n: int
    mean: float
    low: float
    high: float
    p: float
    error: float = math.nan  # standard error of the mean difference
    p_holm: float = math.nan
    joint_low: float = math.nan
    joint_high: float = math.nan


def paired_difference(variant: dict[int, float], baseline: dict[int, float], confidence: float = 0.95) -> PairedDifference:
    """Seed-by-seed differences `variant[seed] - baseline[seed]` over the seeds present in both."""
    seeds = sorted(set(variant) & set(baseline))
    differences = [variant[s] - baseline[s] for s in seeds]
    n = len(differences)
    if n == 0:
        return PairedDifference(0, math.nan, math.nan, math.nan, math.nan)
    mean = statistics.fmean(differences)
    if n < 2:
        return PairedDifference(n, mean, math.nan, math.nan, math.nan)
    error = statistics.stdev(differences) / math.sqrt(n)
    if error <= 1e-12 * max(1.0, abs(mean)):  # every seed gave the same difference: nothing to test against
        return PairedDifference(n, mean, mean, mean, 1.0 if abs(mean) <= 1e-12 else math.nan, 0.0)
    half_width = stats.t.ppf(0.5 + confidence / 2, n - 1) * error
    p = 2.0 * stats.t.sf(abs(mean / error), n - 1)
    return PairedDifference(n, mean, mean - half_width, mean + half_width, float(p), error)


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


def with_holm(differences: list[PairedDifference]) -> list[PairedDifference]:
    """The differences with their Holm p-values and Bonferroni simultaneous intervals filled in."""
    corrected = holm([d.p for d in differences])
    tested = sum(not math.isnan(d.p) for d in differences)
    done = []
    for d, p_holm in zip(differences, corrected):
        joint_low = joint_high = math.nan
        if not math.isnan(d.error) and tested:
            half_width = stats.t.ppf(1 - ALPHA / (2 * tested), d.n - 1) * d.error
            joint_low, joint_high = d.mean - half_width, d.mean + half_width
        done.append(replace(d, p_holm=p_holm, joint_low=joint_low, joint_high=joint_high))
    return done


def verdict(difference: PairedDifference, mode: str) -> str:
    """In words, for a metric where `mode` ("max" or "min") is better: from the Holm-corrected p-value
    (Holm rejects whenever Bonferroni does, so a verdict can say "better" where the simultaneous
    interval still touches zero, never the reverse)."""
    if difference.n < 2:
        return "needs 2 or more paired seeds"
    if math.isnan(difference.p_holm):
        return "the same difference on every seed: not testable"
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
