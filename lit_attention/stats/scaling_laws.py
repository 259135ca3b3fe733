"""The law L(x) = E + A·x^(−α) fitted over sizes by least squares, where x is a model's non-embedding
parameters N or its training FLOPs C, and its inverse (the size at which a law reaches a loss).

Parameterisation: x enters as log(x / x_ref), x_ref the geometric mean of the sizes fitted, so the
amplitude is the law's excess over E at the middle size and neither it nor α is tied to the other
through a huge x^α. Bounds: E ≥ 0 (a loss is never negative), A ≥ 0 (the loss falls with size) and
α in [0.01, 2]: below 0.01 a power law cannot be told from a constant over any sweep's range (16× in
size moves it by 3%), above 2 the excess would fall faster than 1/x², which is no scaling regime.
A pure power law (E = 0) is the same fit with E held at 0.

Two routes to the same minimum of the squared error:
* `fit_law`, one fit: scipy's bounded least squares on (E, log A, log α), started from the profile
  below on its coarse grid (it reports whether it converged);
* `fit_many`, thousands of bootstrap fits at once: for a fixed α the law is linear in (E, A), so the
  best non-negative (E, A) has a closed form; the error is then minimised over log α on a grid, on
  three grids each 10× finer around the best point so far, and at the vertex of the parabola through
  the last best point and its neighbours, vectorised over resamples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

ALPHA_BOUNDS = (0.01, 2.0)
GRID_POINTS = 61  # α steps of 9% between the bounds
REFINE_ROUNDS, REFINE_POINTS = 3, 21  # finer grids over the best point's two steps: each 10× finer
MAX_EVALUATIONS = 200  # of scipy's least squares; it needs a handful from the profile's start
BOUND_TOLERANCE = 1e-3  # relative distance of α from a bound that counts as at it


@dataclass(frozen=True)
class Law:
    """E + amplitude·(x / reference)^(−alpha); `converged`: whether scipy's least squares ended on
    one of its convergence tests."""

    E: float
    amplitude: float
    alpha: float
    reference: float
    pure: bool
    converged: bool = True

    @property
    def A(self) -> float:
        """The A of the usual form E + A·x^(−α)."""
        return self.amplitude * self.reference**self.alpha

    def __call__(self, x):
        return law_values(self.E, self.amplitude, self.alpha, self.reference, x)

    def size_at(self, loss):
        return size_at(self.E, self.amplitude, self.alpha, self.reference, loss)

    @property
    def at_bound(self) -> float | None:
        """The bound of α the fit sits at, if any."""
        return next((b for b in ALPHA_BOUNDS if abs(self.alpha - b) <= BOUND_TOLERANCE * b), None)


def law_values(E, amplitude, alpha, reference, x):
    """The law at sizes x (arrays broadcast: parameters of shape (B, 1) against x of shape (S,))."""
    return E + amplitude * np.exp(-alpha * np.log(np.asarray(x, dtype=float) / reference))


def size_at(E, amplitude, alpha, reference, loss):
    """The x at which the law equals `loss`: inf where the loss is at or below E (never reached), 0
    where the law is flat (A = 0) above it."""
    E, amplitude, alpha, loss = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (E, amplitude, alpha, loss)))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        excess = (loss - E) / amplitude
        found = reference * np.exp(-np.log(excess) / alpha)
    return np.where(loss <= E, np.inf, np.where(amplitude <= 0, 0.0, found))


def best_pair(y: np.ndarray, z: np.ndarray, pure: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each row of `y` (shape (..., S)) and `z` (the (x / x_ref)^(−α) of its sizes, broadcast
    against y): the (E, A), both ≥ 0, minimising Σ(E + A·z − y)², and that sum. With two unknowns the
    constrained optimum is the unconstrained one when it is feasible, otherwise the better of the two
    edges (E = 0 or A = 0). The sums of squares come from the moments, so no (rows × sizes) residual
    is formed per candidate."""
    n = y.shape[-1]
    sz, szz, szy = z.sum(-1), (z * z).sum(-1), (z * y).sum(-1)
    sy, syy = y.sum(-1), (y * y).sum(-1)

    def error(E, A):
        return syy - 2 * E * sy - 2 * A * szy + n * E * E + 2 * E * A * sz + A * A * szz

    zero = np.zeros(np.broadcast_shapes(sz.shape, sy.shape))
    best_A = np.maximum(szy / szz, 0.0) + zero  # E = 0
    best_E, best_error = zero, error(zero, best_A)
    if pure:
        return best_E, best_A, best_error
    flat = np.maximum(sy / n, 0.0) + zero  # A = 0
    flat_error = error(flat, zero)
    determinant = n * szz - sz * sz
    with np.errstate(divide="ignore", invalid="ignore"):
        amplitude = (n * szy - sz * sy) / determinant
        floor = (sy - amplitude * sz) / n
    feasible = (determinant > 1e-12 * n * szz) & (amplitude >= 0) & (floor >= 0)
    free_error = np.where(feasible, error(floor, amplitude), np.inf)
    for E, A, candidate in ((flat, zero, flat_error), (floor, amplitude, free_error)):
        better = candidate < best_error
        best_E, best_A, best_error = (
            np.where(better, E, best_E),
            np.where(better, A, best_A),
            np.where(better, candidate, best_error),
        )
    return best_E, best_A, best_error


def fit_many(x: np.ndarray, y: np.ndarray, pure: bool, rounds: int = REFINE_ROUNDS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(E, amplitude, α) of each row of `y` (shape (B, S)) against the centred log sizes `x` (shape
    (S,), log(x / x_ref)): the profile least squares described above, with `rounds` finer grids."""
    y = np.asarray(y, dtype=float)[:, None, :]
    log_alpha = np.broadcast_to(np.log(np.geomspace(*ALPHA_BOUNDS, GRID_POINTS)), (y.shape[0], GRID_POINTS))
    lowest, highest = math.log(ALPHA_BOUNDS[0]), math.log(ALPHA_BOUNDS[1])
    step = (highest - lowest) / (GRID_POINTS - 1)  # the spacing of the current grid (clipping aside)
    offsets = np.linspace(-1.0, 1.0, REFINE_POINTS)
    rows = np.arange(y.shape[0])
    for level in range(rounds + 1):
        E, A, errors = best_pair(y, np.exp(-np.exp(log_alpha)[..., None] * x), pure)
        best = errors.argmin(axis=1)
        centre = log_alpha[rows, best]
        if level < rounds:  # a finer grid over the two steps around each row's best point, kept in bounds
            log_alpha = np.clip(centre[:, None] + step * offsets, lowest, highest)
            step *= offsets[1] - offsets[0]
    # The vertex of the parabola through the best point and its neighbours, where it is interior.
    inner = (best > 0) & (best < log_alpha.shape[1] - 1)
    around = np.clip(best, 1, log_alpha.shape[1] - 2)
    left, mid, right = (errors[rows, around + k] for k in (-1, 0, 1))
    curvature = left - 2 * mid + right
    with np.errstate(divide="ignore", invalid="ignore"):
        shift = np.where(inner & (curvature > 0), 0.5 * (left - right) / curvature, 0.0)
    vertex = np.clip(log_alpha[rows, around] + np.clip(shift, -1, 1) * step, lowest, highest)
    E_v, A_v, error_v = best_pair(y[:, 0], np.exp(-np.exp(vertex)[:, None] * x), pure)
    better = error_v < errors[rows, best]
    return (np.where(better, E_v, E[rows, best]), np.where(better, A_v, A[rows, best]), np.exp(np.where(better, vertex, centre)))


def fit_law(sizes, losses, pure: bool, weights=None) -> Law:
    """One law through (sizes, losses) by scipy's bounded least squares, started from the profile fit on
    the coarse grid alone, so that scipy does the last steps and says whether they converged. Where the
    error is nearly flat along a valley (E traded against A and α), scipy may stop short of the
    refined profile's minimum; the law is then the profile's, so the point fit and the resamples' fits
    are the same estimator. `weights`: each residual's factor (1 / a mean's standard error gives the
    weighted fit a goodness-of-fit test needs; the profile start stays unweighted)."""
    sizes, losses = np.asarray(sizes, dtype=float), np.asarray(losses, dtype=float)
    w = np.ones_like(losses) if weights is None else np.asarray(weights, dtype=float)
    reference = float(np.exp(np.log(sizes).mean()))
    x = np.log(sizes / reference)
    E0, A0, alpha0 = (float(v[0]) for v in fit_many(x, losses[None], pure, rounds=0))
    scale = float(np.abs(losses).max())
    start = [math.log(max(A0, 1e-9 * scale)), math.log(alpha0)]
    low, high = [-np.inf, math.log(ALPHA_BOUNDS[0])], [np.inf, math.log(ALPHA_BOUNDS[1])]
    if not pure:
        start, low, high = [E0, *start], [0.0, *low], [np.inf, *high]

    def residuals(theta):
        E = 0.0 if pure else theta[0]
        return w * (E + np.exp(theta[-2] - np.exp(theta[-1]) * x) - losses)

    result = least_squares(residuals, np.clip(start, low, high), bounds=(low, high), max_nfev=MAX_EVALUATIONS, x_scale="jac")
    converged = bool(result.success and result.status > 0)
    law = Law(
        0.0 if pure else float(result.x[0]),
        float(math.exp(result.x[-2])),
        float(math.exp(result.x[-1])),
        reference,
        pure,
        converged,
    )
    E, amplitude, alpha = (float(v[0]) for v in fit_many(x, losses[None], pure))
    profile = Law(E, amplitude, alpha, reference, pure, converged)
    return min((law, profile), key=lambda found: float(np.sum((w * (found(sizes) - losses)) ** 2)))
