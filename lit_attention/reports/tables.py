"""How the report writes numbers and tables: markdown tables, mean ± std, counts, intervals, p-values
(shared by every report section: report.py, comparisons.py, verification.py, ...)."""

from __future__ import annotations

import math

from lit_attention.markdown import markdown_table
from lit_attention.stats.statistics import mean_std


def markdown(header: list[str], rows: list[list[str]]) -> str:
    """A report's table, ending its line."""
    return markdown_table(header, rows) + "\n"


def plus_minus(values: list[float], digits: int = 4) -> str:
    mean, std = mean_std(values)
    return "n/a" if math.isnan(mean) else f"{mean:.{digits}f} ± {std:.{digits}f}"


def count(value) -> str:
    if value is None:
        return "n/a"
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:.3g}"


def interval(low: float, high: float) -> str:
    return "n/a" if math.isnan(low) else f"[{low:+.4f}, {high:+.4f}]"


def p_value(p: float) -> str:
    return "n/a" if math.isnan(p) else f"{p:.3g}"
