"""What a size trend could have detected (`compare --trend`'s last table), recomputed for one arm: the
smallest slope the pooled least-squares t-test detects at 80% power, (t_0.975,df + t_0.80,df) x SE, and
the slope of the sizes' mean differences weighted by the inverse variance of each mean, with its normal
interval (the weights taken as known)."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as scipy_stats

from printed_numbers import Checker

ALPHA, POWER = 0.05, 0.80


def detectable(error: float, df: int) -> float:
    return float(scipy_stats.t.ppf(1 - ALPHA / 2, df) + scipy_stats.t.ppf(POWER, df)) * error


def weighted(x: list[float], seeds: list[list[float]]) -> tuple[float, float, float]:
    """(slope, low, high) of the weighted fit; NaN where a size has fewer than two seeds, their values do
    not vary, or every size has the same x."""
    if len(set(x)) < 2 or any(len(v) < 2 for v in seeds):
        return math.nan, math.nan, math.nan
    variance_of_mean = np.array([np.var(v, ddof=1) / len(v) for v in seeds])
    if not (variance_of_mean > 0).all():
        return math.nan, math.nan, math.nan
    # The normal equations of y = a + b x with weights W: (X'WX) beta = X'Wy, cov(beta) = (X'WX)^-1.
    design = np.column_stack([np.ones(len(x)), x])
    w = np.diag(1 / variance_of_mean)
    information = design.T @ w @ design
    beta = np.linalg.solve(information, design.T @ w @ np.array([np.mean(v) for v in seeds]))
    half = float(scipy_stats.norm.ppf(1 - ALPHA / 2)) * math.sqrt(np.linalg.inv(information)[1, 1])
    return float(beta[1]), float(beta[1]) - half, float(beta[1]) + half


def check_power(
    sizes: list[tuple[int, dict[int, float]]], error: float, df: int, row: dict | None, where: str, checker: Checker
) -> None:
    """`sizes`: (the baseline's non-embedding parameters, {seed: difference}) sorted by parameters; `error`
    and `df`: the pooled slope's standard error and degrees of freedom; `row`: the report's row."""
    if row is None:
        checker.mismatch(where, "no row", "a row")
        return
    checker.text(f"{where}, sizes", row["sizes"], str(len(sizes)))
    checker.numbers(f"{where}, doublings spanned", row["doublings spanned"], [math.log2(sizes[-1][0] / sizes[0][0])])
    column = next((c for c in row if c.startswith("smallest slope detectable")), "missing")
    checker.text(f"{where}, detectable header", column, f"smallest slope detectable ({POWER:.0%} power)")
    checker.numbers(f"{where}, {column}", row.get(column, ""), [detectable(error, df)])
    slope, low, high = weighted([math.log2(params) for params, _ in sizes], [list(s.values()) for _, s in sizes])
    checker.numbers(f"{where}, weighted slope", row["weighted slope per doubling"], [slope])
    checker.numbers(f"{where}, weighted interval", row["95% interval (weighted)"], [low, high])
