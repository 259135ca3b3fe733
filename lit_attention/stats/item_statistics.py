"""Statistics over seeds *and* test items, from the runs' per-example outcomes (training/outcome_files.py).

Every seed of a sweep is scored on the same test items, so an interval over seeds (statistics.py) says
how much the difference would move with other seeds on *these* items, not on other items drawn like
them. Here each arm is a matrix of outcomes, one row per seed and one column per test item (the same
items, in the same order, in every run), and the metric of a run is the weighted mean of its row (the
weights: each language-model window's scored tokens; 1 for a classified item).

- `two_way_bootstrap`: the percentile interval of the mean difference when seeds and items are both
  resampled with replacement, jointly and paired: each resample draws seeds and items once and uses
  them for both arms. scipy.stats.bootstrap resamples along one axis (or the same indices for several
  samples), not rows and columns of one matrix at once, so the draws are made here with numpy, as
  multinomial counts, by a generator of fixed seed (a report rebuilds byte for byte).
- `mcnemar_test`: McNemar's exact test on a seed-aggregated basis, for accuracies: an item counts for
  the variant when it is right on more of the paired seeds than the baseline, for the baseline in the
  reverse case, and drops out on a tie; p is the two-sided exact binomial test (scipy.stats.binomtest) of
  the variant's share of those discordant items against 1/2. With one seed it is McNemar's test itself.
- `item_sign_flip_test`: for losses, the sign-flip permutation over items of each item's seed-averaged
  difference (scipy.stats.permutation_test), exact up to 2^17 items' arrangements, else Monte Carlo.

Both per-item tests are conditional on the trained runs: they ask whether, on items drawn like these,
*these* models of the two arms differ, and ignore the seeds' variation, which the two-way interval keeps.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from lit_attention.stats.statistics import EXACT_RELABELLINGS_MAX, TIE_TOLERANCE

RESAMPLES = 10_000
ITEM_DRAWS = 10_000  # Monte Carlo sign flips of the item test: standard error of p at most 0.005
VALUES_PER_BATCH = 4_000_000  # resampled values computed at once: bounds the memory on large test sets
SEED = 0


def weighted_differences(variant: np.ndarray, baseline: np.ndarray, weights: np.ndarray | None) -> tuple:
    """(the seed-by-item differences, the item weights as floats, 1 where None), checking shapes."""
    variant, baseline = np.asarray(variant, dtype=float), np.asarray(baseline, dtype=float)
    if variant.shape != baseline.shape or variant.ndim != 2:
        raise ValueError(f"outcome matrices of shapes {variant.shape} and {baseline.shape}: need one (seeds, items) shape")
    items = variant.shape[1]
    weights = np.ones(items) if weights is None else np.asarray(weights, dtype=float)
    if weights.shape != (items,):
        raise ValueError(f"{weights.shape[0]} weights for {items} items")
    return variant - baseline, weights


def mean_difference(variant, baseline, weights=None) -> float:
    """The mean over seeds of each seed's weighted mean over items of variant - baseline."""
    differences, weights = weighted_differences(variant, baseline, weights)
    return float(np.mean(differences @ weights) / weights.sum())


def two_way_bootstrap(
    variant, baseline, weights=None, confidence: float = 0.95, resamples: int = RESAMPLES, seed: int = SEED, items: bool = True
) -> tuple[float, float]:
    """Percentile interval of `mean_difference` with seeds and, when `items`, test items resampled with
    replacement (`items=False`: seeds only, the items fixed, as in the table over seeds). A resample is
    a count per seed c (multinomial, n_seeds draws) and per item k (n_items draws), and its statistic is
    Σ_s Σ_i c_s k_i w_i d_si / (n_seeds Σ_i k_i w_i). NaN with fewer than 2 seeds and fewer than 2 items."""
    differences, weights = weighted_differences(variant, baseline, weights)
    n_seeds, n_items = differences.shape
    if n_seeds * n_items < 2 or (n_seeds < 2 and not items) or n_items == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    found = np.empty(resamples)
    batch = max(1, VALUES_PER_BATCH // max(n_items, n_seeds))
    for start in range(0, resamples, batch):
        size = min(batch, resamples - start)
        seed_counts = rng.multinomial(n_seeds, np.full(n_seeds, 1 / n_seeds), size=size)
        item_weights = (
            rng.multinomial(n_items, np.full(n_items, 1 / n_items), size=size) * weights
            if items
            else np.broadcast_to(weights, (size, n_items))
        )
        per_item = seed_counts @ differences  # (size, n_items): each item's difference summed over the drawn seeds
        found[start : start + size] = np.einsum("ri,ri->r", per_item, item_weights) / (n_seeds * item_weights.sum(axis=1))
    low, high = np.quantile(found, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


def mcnemar_test(variant, baseline) -> tuple[float, int, int]:
    """(p, items the variant wins, items the baseline wins) of McNemar's exact test on a seed-aggregated
    basis (the module's docstring): `variant` and `baseline` are (seeds, items) counts of correct answers
    (0/1 per classified item; a window's correct targets for a language model). p is NaN when no item is
    discordant."""
    differences, _ = weighted_differences(variant, baseline, None)
    per_item = differences.sum(axis=0)
    wins, losses = int(np.count_nonzero(per_item > 0)), int(np.count_nonzero(per_item < 0))
    if wins + losses == 0:
        return math.nan, 0, 0
    return float(stats.binomtest(wins, wins + losses, 0.5).pvalue), wins, losses


def _absolute_mean(values, axis=-1):
    return np.abs(np.mean(values, axis=axis))


def item_sign_flip_test(variant, baseline, weights=None, draws: int = ITEM_DRAWS) -> tuple[float, bool]:
    """(two-sided p, whether it is a Monte Carlo estimate) of the sign-flip test over items of
    x_i = w_i · mean_s d_si: the share of sign assignments whose |mean(x)| reaches the observed one
    (ties within a small relative tolerance), every one of the 2^n while they number at most
    EXACT_RELABELLINGS_MAX, else `draws` random ones, (hits + 1) / (draws + 1). NaN for no items."""
    differences, weights = weighted_differences(variant, baseline, weights)
    values = differences.mean(axis=0) * weights / weights.mean()
    if values.size == 0:
        return math.nan, False
    if values.size == 1:
        return 1.0, False
    monte_carlo = 2**values.size > EXACT_RELABELLINGS_MAX
    result = stats.permutation_test(
        (values,),
        _absolute_mean,
        permutation_type="samples",
        vectorized=True,
        n_resamples=draws if monte_carlo else np.inf,
        alternative="greater",
        batch=max(1, VALUES_PER_BATCH // values.size),
        rng=np.random.default_rng(SEED),
    )
    tolerance = TIE_TOLERANCE * float(np.abs(values).sum()) / values.size
    hits = int(np.count_nonzero(result.null_distribution >= result.statistic - tolerance))
    if monte_carlo:
        return (hits + 1) / (result.null_distribution.size + 1), True
    return hits / result.null_distribution.size, False
