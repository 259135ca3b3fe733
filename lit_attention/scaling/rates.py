"""The tuned learning rate against model size: least squares of log lr* on log N over an arm's sizes,
so that a user can carry a rate to the next size. It describes the rates this grid chose at these
sizes; under the standard parameterisation nothing guarantees that the optimal rate follows a power
law in N (that is what muP is built to give), and a rate chosen at an end of its grid is only a bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from lit_attention.scaling.fits import CONFIDENCE, SizeRuns

NEXT_SIZE = 2.0  # the rate is predicted at this many times the largest measured N


@dataclass(frozen=True)
class RateTrend:
    """lr* ≈ exp(intercept)·N^slope over `sizes` sizes; the slope's t-interval and the predicted rate
    at NEXT_SIZE × the largest N with the t-interval of the fitted line there (NaN with two sizes:
    a line through two points has no residual to measure its error by)."""

    arm: str
    sizes: int
    slope: float
    slope_low: float
    slope_high: float
    largest: float
    predicted: float
    predicted_low: float
    predicted_high: float
    same_rate: bool  # every size chose the same rate


def rate_trend(arm: str, runs: dict[str, SizeRuns], confidence: float = CONFIDENCE) -> RateTrend | None:
    """The trend of the arm's tuned rate over its sizes that have one; None with fewer than two."""
    pairs = sorted((r.params, r.lr) for r in runs.values() if r.lr is not None and r.lr > 0)
    if len(pairs) < 2:
        return None
    x, y = np.log([p for p, _ in pairs]), np.log([lr for _, lr in pairs])
    slope, intercept = np.polyfit(x, y, 1)
    largest = float(pairs[-1][0])
    at = math.log(NEXT_SIZE * largest)
    predicted = intercept + slope * at
    low = high = predicted_low = predicted_high = math.nan
    if len(pairs) > 2:
        spread = float(np.sum((y - (intercept + slope * x)) ** 2) / (len(pairs) - 2))
        centred = float(np.sum((x - x.mean()) ** 2))
        t = float(stats.t.ppf(0.5 + confidence / 2, len(pairs) - 2))
        slope_error = math.sqrt(spread / centred)
        line_error = math.sqrt(spread * (1 / len(pairs) + (at - x.mean()) ** 2 / centred))
        low, high = slope - t * slope_error, slope + t * slope_error
        predicted_low, predicted_high = math.exp(predicted - t * line_error), math.exp(predicted + t * line_error)
    return RateTrend(
        arm,
        len(pairs),
        float(slope),
        low,
        high,
        largest,
        math.exp(predicted),
        predicted_low,
        predicted_high,
        same_rate=len({lr for _, lr in pairs}) == 1,
    )


def rate_sentences(trends: list[RateTrend]) -> list[str]:
    """What the table cannot show: the same rate at every size, and the warning."""
    sentences = [
        f"`{t.arm}` chose the same rate at every size: the grid's spacing, not the data, bounds its slope."
        for t in trends
        if t.same_rate
    ]
    return sentences + [
        "This trend describes the rates this grid chose at these sizes; it is no muP guarantee: under "
        "the standard parameterisation the best rate need not follow a power law in N, so check a "
        "carried rate with a short sweep around it; a rate at an end of its grid is only a bound on "
        "the best one."
    ]
