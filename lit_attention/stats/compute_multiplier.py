"""The compute multiplier of a variant: how much training compute the baseline needs to reach the variant's
loss, over what the variant used (the scorecard's headline on the language-modelling ladder).

The baseline is trained at several budgets C_1 < ... < C_k (its ladder), the variant at one budget C_0 (its
own FLOPs, W_A and the query MLP included), on the same seeds. Then:

* the baseline's curve is the mean loss over seeds at each budget, made non-increasing in C by the
  pool-adjacent-violators algorithm (more compute never hurts: a bump between two budgets is noise);
* C_std(L), the compute at which that curve reaches the variant's mean loss L, is read between the two
  budgets that bracket L on the monotone cubic through the curve's points in log C (cost_to_reach), and
  m = C_std(L) / C_0. m > 1: the variant is worth more compute than it costs;
* outside the measured range m is censored, never extrapolated: a loss worse than the smallest budget's gives
  m < C_1 / C_0, one better than the largest's m > C_k / C_0;
* the interval is a paired bootstrap: the same seeds are drawn for the ladder and the variant (a seed is one
  initialisation and data order for every arm), and, where per-item losses are given, the test items are drawn
  too (two-way), the curve refitted at every resample. The percentile levels are widened for few seeds (the
  "expanded percentile" interval: the level α/2 becomes Φ(√(n/(n−1)) t_{n−1, α/2}), n the seeds), since the
  plain percentile bootstrap is too narrow with five. A resample outside the range is censored the same way,
  so a bound can be censored too. With 5 seeds, 95% intervals hold a planted m about 93% of the time
  (tests/test_compute_multiplier.py); with 3 they hold it far less often (a bootstrap of 3 seeds has 10
  distinct draws), so a protocol asks for 5 or more.

The same reading in wall-clock training time is this function with the measured seconds as the costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000


@dataclass(frozen=True)
class Multiplier:
    """m with its interval. A censored value lies beyond an end of the measured range: it is given as that end,
    with its side, "below" (m < range_low) or "above" (m > range_high); None where it lies inside."""

    estimate: float
    censored: str | None
    low: float
    low_censored: str | None
    high: float
    high_censored: str | None
    range_low: float  # C_1 / C_0
    range_high: float  # C_k / C_0
    seeds: int
    items: int
    resamples: int

    def text(self) -> str:
        """ "1.83× [1.41×, 2.6×]" (3 significant figures, trailing zeros dropped), with "< 0.5×" or "> 4×" where a number is censored."""
        return (
            f"{shown(self.estimate, self.censored)} "
            f"[{shown(self.low, self.low_censored)}, {shown(self.high, self.high_censored)}]"
        )

    def covers(self, m: float) -> bool:
        """Whether the interval holds `m` (a censored bound is open beyond its end)."""
        above_low = self.low_censored == "below" or (m >= self.low if self.low_censored is None else m > self.low)
        below_high = self.high_censored == "above" or (m <= self.high if self.high_censored is None else m < self.high)
        return above_low and below_high


def shown(value: float, censored: str | None) -> str:
    return {"below": f"< {value:.3g}×", "above": f"> {value:.3g}×"}.get(censored, f"{figures(value)}×")


def figures(value: float) -> str:
    """Three significant figures, or as many more (up to 6) as keep a value other than 1 from printing as 1:
    the rule asks whether a bound is above 1, and "1×" for 1.0005 would say it touches it."""
    for digits in range(3, 7):
        text = f"{value:.{digits}g}"
        if value == 1 or float(text) != 1:
            return text
    return text


def non_increasing(curves: np.ndarray) -> np.ndarray:
    """The least-squares non-increasing fit to each row of `curves` (rows, budgets), equal weights: at budget i,
    min over j <= i of max over k >= i of the mean of budgets j..k (the isotonic minimax formula; the ladders
    are a handful of budgets, so every window is computed, for all rows at once)."""
    rows, budgets = curves.shape
    sums = np.concatenate([np.zeros((rows, 1)), np.cumsum(curves, axis=1)], axis=1)
    fit = np.empty_like(curves)
    for i in range(budgets):
        best = np.full(rows, np.inf)
        for j in range(i + 1):
            window = np.stack([(sums[:, k + 1] - sums[:, j]) / (k + 1 - j) for k in range(i, budgets)], axis=1)
            best = np.minimum(best, window.max(axis=1))
        fit[:, i] = best
    return fit


def cost_to_reach(losses: np.ndarray, costs: np.ndarray, curves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row: the cost at which the non-increasing curve (row of `curves`, over ascending `costs`) reaches
    that row's loss, and the side it is censored on: -1 when the loss is above the whole curve (the cost given
    is costs[0]), +1 below it (costs[-1]), 0 inside. Between two budgets the curve is the monotone cubic
    (PCHIP, Fritsch and Carlson) through the budgets' points in log cost: it keeps the measured points, never
    overshoots them, and follows a curve's bend where straight lines between 2x-apart budgets would not (a
    chord of a convex curve reads every loss between its ends at too high a cost). Where the curve is flat the
    smallest cost that reaches the loss is read."""
    from scipy.interpolate import PchipInterpolator

    log_costs = np.log(costs)
    reached = curves <= losses[:, None]
    side = np.where(~reached[:, -1], 1, np.where(losses > curves[:, 0], -1, 0))
    at = np.argmax(reached, axis=1)  # the first budget that reaches it
    before = np.maximum(at - 1, 0)
    rows = np.arange(len(losses))
    # Each row's cubic on its interval [before, at], as coefficients of powers of (x - log_costs[before]).
    pieces = PchipInterpolator(log_costs, curves, axis=1).c  # (4, budgets - 1, rows)
    c = pieces[:, np.minimum(before, len(costs) - 2), rows]  # (4, rows)
    # Bisection in log cost, every row at once: the cubic is monotone on its interval.
    low, high = log_costs[before], log_costs[at]
    for _ in range(50):
        middle = (low + high) / 2
        x = middle - log_costs[before]
        above = ((c[0] * x + c[1]) * x + c[2]) * x + c[3] > losses  # still above the loss: the answer is right of it
        low, high = np.where(above, middle, low), np.where(above, high, middle)
    # A budget that reaches the loss exactly (the first, or a flat stretch's start) is given exactly.
    found = np.where((at == 0) | (curves[rows, at] == losses), costs[at], np.exp(high))
    return np.where(side == -1, costs[0], np.where(side == 1, costs[-1], found)), side


def draw_counts(rng: np.random.Generator, rows: int, size: int) -> np.ndarray:
    """(rows, size): how often each of `size` units is drawn in each of `rows` resamples with replacement."""
    drawn = rng.integers(0, size, (rows, size)) + size * np.arange(rows)[:, None]
    return np.bincount(drawn.ravel(), minlength=rows * size).reshape(rows, size).astype(float)


def expanded_levels(seeds: int, confidence: float = 0.95) -> tuple[float, float]:
    """The percentile levels of the expanded percentile interval for `seeds` resampled units."""
    from scipy import stats

    alpha = 1 - confidence
    if seeds < 2:
        return alpha / 2, 1 - alpha / 2
    tail = float(stats.norm.cdf(math.sqrt(seeds / (seeds - 1)) * stats.t.ppf(alpha / 2, seeds - 1)))
    return tail, 1 - tail


def compute_multiplier(
    ladder_losses,
    ladder_costs,
    variant_losses,
    variant_cost: float,
    weights=None,
    resamples: int = RESAMPLES,
    rng: np.random.Generator | None = None,
    confidence: float = 0.95,
) -> Multiplier:
    """m and its paired bootstrap interval. `ladder_losses`: the baseline's losses, (budgets, seeds) or
    (budgets, seeds, items) for per-item losses; `ladder_costs` (budgets,) ascending; `variant_losses`: (seeds,)
    or (seeds, items), the same seeds in the same order; `variant_cost` C_0; `weights` (items,), an item's weight
    (a window's scored tokens), equal by default. Lower loss is better."""
    ladder, variant = np.asarray(ladder_losses, dtype=float), np.asarray(variant_losses, dtype=float)
    if ladder.ndim == 2:
        ladder, variant = ladder[:, :, None], variant[:, None]
    costs = np.asarray(ladder_costs, dtype=float)
    budgets, seeds, items = ladder.shape
    if budgets < 2 or costs.shape != (budgets,) or np.any(np.diff(costs) <= 0):
        raise ValueError(f"the ladder needs 2 or more budgets in ascending cost, got costs {costs.tolist()}")
    if variant.shape != (seeds, items):
        raise ValueError(f"the variant's losses have shape {variant.shape}, the ladder's seeds and items {(seeds, items)}")
    if not (np.all(np.isfinite(ladder)) and np.all(np.isfinite(variant)) and np.all(costs > 0) and variant_cost > 0):
        raise ValueError("every loss must be finite and every cost positive (a diverged run has no place on a ladder)")
    weights = np.ones(items) if weights is None else np.asarray(weights, dtype=float)
    rng = rng if rng is not None else np.random.default_rng(0)

    # Every sample is a pair of count vectors: how often each seed and each item is drawn (all ones: the data).
    def readings(seed_counts: np.ndarray, item_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        item_weights = item_counts * weights  # (rows, items)
        per_seed = np.einsum("bsi,ri->rbs", ladder, item_weights) / item_weights.sum(axis=1)[:, None, None]
        curves = np.einsum("rbs,rs->rb", per_seed, seed_counts) / seeds
        mine = np.einsum("si,ri->rs", variant, item_weights) / item_weights.sum(axis=1)[:, None]
        return cost_to_reach((mine * seed_counts).sum(axis=1) / seeds, costs, non_increasing(curves))

    [cost], [side] = readings(np.ones((1, seeds)), np.ones((1, items)))
    drawn = []
    for start in range(0, resamples, 1000):
        rows = min(1000, resamples - start)
        seed_counts = draw_counts(rng, rows, seeds)
        item_counts = draw_counts(rng, rows, items) if items > 1 else np.ones((rows, 1))
        found, sides = readings(seed_counts, item_counts)
        drawn.append(np.where(sides == -1, -np.inf, np.where(sides == 1, np.inf, np.log(found / variant_cost))))
    low, high = np.quantile(np.concatenate(drawn), expanded_levels(seeds, confidence), method="inverted_cdf")
    range_low, range_high = float(costs[0] / variant_cost), float(costs[-1] / variant_cost)

    def bound(log_m: float) -> tuple[float, str | None]:
        if log_m == -np.inf:
            return range_low, "below"
        if log_m == np.inf:
            return range_high, "above"
        return float(math.exp(log_m)), None

    return Multiplier(
        float(cost / variant_cost),
        {-1: "below", 1: "above"}.get(int(side)),
        *bound(low),
        *bound(high),
        range_low,
        range_high,
        seeds,
        items,
        resamples,
    )
