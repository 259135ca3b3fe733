"""The law L(x) = E + A·x^(−α) refitted over an arm's sizes by bounded least squares (E ≥ 0, A ≥ 0, α in
[0.01, 2]; E held at 0, a pure power law, below 4 sizes), and the size at which a law reaches a loss.

Written from the definition, not from the project's optimiser: scipy's bounded least squares started from
every α of a coarse grid (E and A at each start from non-negative linear least squares, since the law is
linear in them for a fixed α), the best end kept. x enters as x / x_ref, x_ref the geometric mean of the
sizes, so that A and α are not tied together through a huge x^α while the optimiser moves."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares, nnls

ALPHA_BOUNDS = (0.01, 2.0)
FLOOR_SIZES = 4  # the fewest sizes at which E is fitted rather than held at 0
STARTS = 7  # values of α the optimiser starts from, evenly spaced in log α between the bounds


@dataclass(frozen=True)
class Law:
    E: float
    A: float
    alpha: float
    pure: bool

    def __call__(self, x):
        return self.E + self.A * np.asarray(x, dtype=float) ** -self.alpha

    def size_at(self, loss: float) -> float:
        """The x at which the law reaches `loss`: infinite at or below E, 0 for a flat law above it."""
        if loss <= self.E:
            return math.inf
        if self.A <= 0:
            return 0.0
        return ((loss - self.E) / self.A) ** (-1 / self.alpha)


def falls(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether the loss falls with size at all: the least-squares slope of y on log x is negative."""
    log_x = np.log(x)
    return float((log_x - log_x.mean()) @ (y - y.mean())) < 0


def fit(x, y, weights=None) -> Law:
    """The least-squares law through (x, y); E held at 0 with fewer than FLOOR_SIZES sizes. `weights`: each
    residual's factor (1 / its standard error for the weighted fit a goodness-of-fit test needs)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    w = np.ones_like(y) if weights is None else np.asarray(weights, dtype=float)
    pure = x.size < FLOOR_SIZES
    reference = math.exp(float(np.log(x).mean()))
    log_z = np.log(x / reference)

    # theta: (E, B, α) with B = A·x_ref^(−α), the law's excess over E at x_ref; a pure law drops E.
    def parts(theta):
        return (0.0, *theta) if pure else tuple(theta)

    def residuals(theta):
        E, B, alpha = parts(theta)
        return w * (E + B * np.exp(-alpha * log_z) - y)

    def jacobian(theta):
        _, B, alpha = parts(theta)
        power = np.exp(-alpha * log_z)
        columns = [power, -B * log_z * power]
        return w[:, None] * np.column_stack(columns if pure else [np.ones_like(y), *columns])

    low, high = [0.0, ALPHA_BOUNDS[0]], [np.inf, ALPHA_BOUNDS[1]]
    if not pure:
        low, high = [0.0, *low], [np.inf, *high]
    best = None
    for alpha in np.geomspace(*ALPHA_BOUNDS, STARTS):
        power = np.exp(-alpha * log_z)
        linear = nnls(w[:, None] * np.column_stack([power] if pure else [np.ones_like(y), power]), w * y)[0]
        result = least_squares(
            residuals,
            np.clip([*linear, alpha], low, high),
            jac=jacobian,
            bounds=(low, high),
            x_scale="jac",
            ftol=1e-12,
            xtol=1e-12,
            gtol=1e-12,
            max_nfev=1000,
        )
        if best is None or result.cost < best.cost:
            best = result
    E, B, alpha = parts(best.x)
    return Law(float(E), float(B * reference**alpha), float(alpha), pure)
