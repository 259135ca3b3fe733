"""A scaled sweep's tuned learning rate against N: per arm, least squares of log lr* on log N over its sizes
with a tuned rate (N of the tuned runs' first seed), the slope b with its t-interval on n − 2 df, and the
fitted line at 2x the largest N with the line's t-interval there (no intervals with two sizes). Every number
of the table is deterministic, so all of them are checked."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

import markdown_tables as markdown
from printed_numbers import Checker
from section_check import keyed

NEXT_SIZE = 2.0


def trend(runs: dict) -> dict | None:
    """{sizes, slope, low, high, at, predicted, predicted_low, predicted_high, same} of one arm's
    {size: SizeRuns}; None with fewer than two sizes with a rate."""
    pairs = sorted((r.params, r.lr) for r in runs.values() if r.lr is not None and r.lr > 0)
    if len(pairs) < 2:
        return None
    x, y = np.log([n for n, _ in pairs]), np.log([lr for _, lr in pairs])
    dx = x - x.mean()
    slope = float(dx @ (y - y.mean()) / (dx @ dx))
    intercept = float(y.mean() - slope * x.mean())
    at = NEXT_SIZE * pairs[-1][0]
    line = intercept + slope * math.log(at)
    found = {
        "sizes": len(pairs),
        "slope": slope,
        "at": at,
        "predicted": math.exp(line),
        "same": len({lr for _, lr in pairs}) == 1,
        "interval": [],
        "predicted_interval": [],
    }
    if len(pairs) > 2:
        spread = float(np.sum((y - intercept - slope * x) ** 2)) / (len(pairs) - 2)
        t = float(stats.t.ppf(0.975, len(pairs) - 2))
        slope_half = t * math.sqrt(spread / (dx @ dx))
        line_half = t * math.sqrt(spread * (1 / len(pairs) + (math.log(at) - x.mean()) ** 2 / (dx @ dx)))
        found["interval"] = [slope - slope_half, slope + slope_half]
        found["predicted_interval"] = [math.exp(line - line_half), math.exp(line + line_half)]
    return found


def check_rates(arms: dict, text: str, where: str, checker: Checker) -> None:
    mine = {arm: found for arm, runs in arms.items() if (found := trend(runs)) is not None}
    printed = keyed((markdown.tables(text) or [[]])[0], ("arm",), where, checker)
    for arm in printed.keys() ^ mine.keys():
        checker.mismatch(
            f"{where}, {arm}", "row" if arm in printed else "no row", "a row" if arm in mine else "no rate at two sizes"
        )
    for arm in printed.keys() & mine.keys():
        t, row, at = mine[arm], printed[arm], f"{where}, {arm}"
        checker.text(f"{at}, sizes", row["sizes"], str(t["sizes"]))
        exponent = next(column for column in row if column.startswith("exponent b"))
        there = next(column for column in row if column.startswith("lr* there"))
        if t["same"]:
            checker.text(f"{at}, exponent", row[exponent], "0 (one rate at every size)")
            checker.numbers(f"{at}, lr* there", row[there], [t["predicted"]], significant=3)
        else:
            # With two sizes the report prints the intervals as "nan": only the point values are numbers.
            checker.numbers(f"{at}, exponent", row[exponent], [t["slope"], *t["interval"]])
            checker.numbers(f"{at}, lr* there", row[there], [t["predicted"], *t["predicted_interval"]], significant=3)
        column = next(c for c in row if c.startswith("N ("))
        checker.text(f"{at}, N header", column, f"N ({NEXT_SIZE:g}× the largest)")
        checker.count(f"{at}, N", row[column], t["at"])
