"""What a size trend could have detected, for `compare --trend` (trend.py):

* `detectable_slope`: the smallest true slope the least-squares t-test of the slope (two-sided, level
  ALPHA) detects with probability POWER, (t_{1-ALPHA/2, df} + t_{POWER, df}) x SE(slope): the usual
  approximation, which takes the slope's standard error to be the one measured;
* `weighted_slope`: the weighted least-squares slope of the sizes' mean differences against x, each
  weighted by 1 / the variance of its mean (its seeds' variance over their number), so that a size whose
  seeds scatter more counts less, where the pooled fit takes every size's spread to be the same. With
  the weights taken as known, SE = 1 / sqrt(sum w (x - x_w)^2) (x_w the weighted mean of x) and the
  interval is the normal one; estimated from a few seeds a size, the weights make it somewhat too narrow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats

from lit_attention.stats.statistics import ALPHA

POWER = 0.80


def detectable_slope(stderr: float, df: int, power: float = POWER, alpha: float = ALPHA) -> float:
    """The smallest slope a two-sided level-`alpha` t-test with `df` degrees of freedom detects with
    probability `power`, given the slope's standard error."""
    return (float(stats.t.ppf(1 - alpha / 2, df)) + float(stats.t.ppf(power, df))) * stderr


@dataclass(frozen=True)
class WeightedSlope:
    slope: float
    stderr: float
    low: float
    high: float


def weighted_slope(
    x: list[float], means: list[float], variances: list[float], confidence: float = 1 - ALPHA
) -> WeightedSlope | None:
    """The slope of `means` against `x` weighted by 1 / `variances` (each the variance of its mean), with
    its normal interval; None with fewer than two distinct x or a variance that is not positive."""
    if len(set(x)) < 2 or any(not v > 0 for v in variances):
        return None
    weights = [1 / v for v in variances]
    total = sum(weights)
    x_bar = sum(w * xi for w, xi in zip(weights, x)) / total
    y_bar = sum(w * yi for w, yi in zip(weights, means)) / total
    spread = sum(w * (xi - x_bar) ** 2 for w, xi in zip(weights, x))
    slope = sum(w * (xi - x_bar) * (yi - y_bar) for w, xi, yi in zip(weights, x, means)) / spread
    stderr = 1 / math.sqrt(spread)
    half = float(stats.norm.ppf(1 - (1 - confidence) / 2)) * stderr
    return WeightedSlope(slope, stderr, slope - half, slope + half)
