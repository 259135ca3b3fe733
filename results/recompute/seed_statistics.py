"""The statistics of a comparison, written from their definitions (docs/statistics.md): paired t or Welch,
the sign-flip or label-permutation p enumerated exactly, Holm's correction and Bonferroni's simultaneous
interval over the primary family, and the verdict."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

ALPHA = 0.05
EXACT_LIMIT = 200_000  # arrangements enumerated; above, the report's p is Monte Carlo and is not rechecked


@dataclass
class Result:
    paired: bool
    n: int
    n_reference: int
    mean: float
    error: float = math.nan
    df: float = math.nan
    low: float = math.nan
    high: float = math.nan
    p: float = math.nan
    p_exact: float = math.nan
    exact_is_monte_carlo: bool = False
    primary: bool = True
    p_holm: float = math.nan
    joint_low: float = math.nan
    joint_high: float = math.nan
    p_exact_holm: float = math.nan


def t_parts(result: Result) -> None:
    """The 95% t-interval and two-sided p; no spread: the point itself, p 1 only for a zero difference."""
    if result.error <= 1e-12 * max(1.0, abs(result.mean)):
        result.low = result.high = result.mean
        result.error = 0.0
        result.p = 1.0 if abs(result.mean) <= 1e-12 else math.nan
        return
    half = stats.t.ppf(0.975, result.df) * result.error
    result.low, result.high = result.mean - half, result.mean + half
    result.p = 2 * stats.t.sf(abs(result.mean) / result.error, result.df)


def paired(arm: dict[int, float], reference: dict[int, float]) -> Result:
    seeds = sorted(arm.keys() & reference.keys())
    d = np.array([arm[s] - reference[s] for s in seeds], dtype=float)
    result = Result(True, d.size, d.size, float(d.mean()) if d.size else math.nan)
    if d.size < 2:
        return result
    result.error, result.df = float(d.std(ddof=1) / math.sqrt(d.size)), d.size - 1
    t_parts(result)
    result.p_exact, result.exact_is_monte_carlo = sign_flip(d)
    return result


def sign_flip(d: np.ndarray) -> tuple[float, bool]:
    """The share of the 2^n sign assignments whose |sum| reaches the observed |sum|."""
    if 2**d.size > EXACT_LIMIT:
        return math.nan, True
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
    sums = np.abs(signs @ d)
    return float(np.mean(sums >= abs(d.sum()) - 1e-9 * np.abs(d).sum())), False


def welch(arm: dict[int, float], reference: dict[int, float]) -> Result:
    a, b = np.array(list(arm.values()), dtype=float), np.array(list(reference.values()), dtype=float)
    result = Result(False, a.size, b.size, float(a.mean() - b.mean()) if a.size and b.size else math.nan)
    if a.size < 2 or b.size < 2:
        return result
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    result.error = math.sqrt(va + vb)
    spread = va**2 / (a.size - 1) + vb**2 / (b.size - 1)
    result.df = (va + vb) ** 2 / spread if spread > 0 else math.nan
    t_parts(result)
    result.p_exact, result.exact_is_monte_carlo = relabel(a, b)
    return result


def relabel(a: np.ndarray, b: np.ndarray) -> tuple[float, bool]:
    """The share of the C(n_a + n_b, n_a) relabellings whose |mean gap| reaches the observed one."""
    if math.comb(a.size + b.size, a.size) > EXACT_LIMIT:
        return math.nan, True
    pooled, total = np.concatenate([a, b]), a.sum() + b.sum()
    picks = np.array(list(itertools.combinations(range(pooled.size), a.size)))
    left = pooled[picks].sum(axis=1)
    gaps = np.abs(left / a.size - (total - left) / b.size)
    observed = abs(a.mean() - b.mean())
    return float(np.mean(gaps >= observed - 1e-9 * np.abs(pooled).sum() * (1 / a.size + 1 / b.size))), False


def holm(ps: list[float]) -> list[float]:
    """Holm-adjusted p-values in input order (NaN stays NaN and is not counted)."""
    order = sorted((p, i) for i, p in enumerate(ps) if not math.isnan(p))
    out, running = [math.nan] * len(ps), 0.0
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p))
        out[i] = running
    return out


def correct(results: list[Result], primary: list[bool]) -> None:
    """Holm's p (of the t-test and of the exact test) and the simultaneous interval over the primary ones."""
    family = [r for r, is_primary in zip(results, primary) if is_primary]
    for r, is_primary in zip(results, primary):
        r.primary = is_primary
    for r, p in zip(family, holm([r.p for r in family])):
        r.p_holm = p
    m = sum(not math.isnan(r.p) for r in family)
    for r in family:
        if not math.isnan(r.error) and m:
            half = 0.0 if r.error == 0 else stats.t.ppf(1 - ALPHA / (2 * m), r.df) * r.error
            r.joint_low, r.joint_high = r.mean - half, r.mean + half
    tested = [r for r in family if not math.isnan(r.p)]
    for r, p in zip(tested, holm([r.p_exact for r in tested])):
        r.p_exact_holm = p


def verdict(r: Result, mode: str) -> str:
    if r.paired and r.n < 2:
        return "needs 2 or more paired seeds"
    if not r.paired and min(r.n, r.n_reference) < 2:
        return "needs 2 or more seeds on each side"
    if not r.primary:
        return "exploratory (not corrected)"
    if math.isnan(r.p_holm):
        return "the same difference on every seed: not testable" if r.paired else "no spread on either side: not testable"
    if r.p_holm < ALPHA:
        return "better" if (r.mean > 0) == (mode == "max") else "worse"
    return "no detectable difference"


def mean_std(values: list[float]) -> list[float]:
    if not values:
        return [math.nan, math.nan]
    array = np.array(values, dtype=float)
    return [float(array.mean()), float(array.std(ddof=1)) if array.size > 1 else 0.0]
