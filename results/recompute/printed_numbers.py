"""Comparing a printed cell with a recomputed number, to the rounding it was printed at, and keeping count."""

from __future__ import annotations

import math
import re

NUMBER = re.compile(r"[+\-−]?(?:\d+\.?\d*|\.\d+)(?:e[+\-]?\d+)?", re.IGNORECASE)
NOT_AVAILABLE = "n/a"


def numbers_in(text: str) -> list[str]:
    """The numbers of a cell as printed ("−" read as a minus), in order."""
    return [found.replace("−", "-") for found in NUMBER.findall(text)]


def half_unit(printed: str, significant: int | None) -> float:
    """Half a unit in the last place `printed` can claim: fixed decimals (`significant` None) or that many
    significant digits (%g, which drops trailing zeros, so the digits are counted from the value)."""
    mantissa, _, exponent = printed.lower().partition("e")
    if significant is not None:
        value = abs(float(printed))
        if value == 0:
            return 0.0
        return 0.5 * 10 ** (math.floor(math.log10(value)) - significant + 1)
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10 ** (-decimals + (int(exponent) if exponent else 0))


def agrees(printed: str, value: float, significant: int | None) -> bool:
    if math.isnan(value):
        return False
    # A hair over half a unit: the report rounds its own float, computed in another order.
    return abs(float(printed) - value) <= half_unit(printed, significant) * (1 + 1e-6) + 1e-12 * max(1.0, abs(value))


class Checker:
    """Counts of numbers checked, mismatches and skipped cells, per scope (a section or RESULTS.md)."""

    def __init__(self) -> None:
        self.checked = self.mismatches = self.skipped = 0
        self.total_mismatches = 0
        self.notes: list[str] = []

    def mismatch(self, where: str, printed: str, expected: str) -> None:
        self.mismatches += 1
        self.total_mismatches += 1
        print(f"MISMATCH {where}: printed {printed!r}, recomputed {expected}")

    def note(self, text: str) -> None:
        self.notes.append(text)

    def skip(self, count: int = 1) -> None:
        self.skipped += count

    def numbers(self, where: str, cell: str, values: list[float], significant: int | None = None) -> None:
        """A cell of numbers (one, a mean ± std, an interval) against `values`; "n/a" against NaN."""
        self.checked += max(1, len(values))
        if cell.strip() == NOT_AVAILABLE or all(math.isnan(v) for v in values):
            if not (cell.strip() == NOT_AVAILABLE and all(math.isnan(v) for v in values)):
                self.mismatch(where, cell, ", ".join(f"{v:.6g}" for v in values))
            return
        printed = numbers_in(cell)
        if len(printed) != len(values) or not all(agrees(p, v, significant) for p, v in zip(printed, values)):
            self.mismatch(where, cell, ", ".join(f"{v:.6g}" for v in values))

    def text(self, where: str, cell: str, expected: str) -> None:
        self.checked += 1
        if cell.strip() != expected:
            self.mismatch(where, cell, repr(expected))

    def summary(self, scope: str) -> None:
        for note in self.notes:
            print(f"{scope}: {note}")
        print(f"{scope}: {self.checked} numbers checked, {self.mismatches} mismatches, {self.skipped} skipped "
              "(randomised: bootstrap, Monte Carlo p)")
        self.checked = self.mismatches = self.skipped = 0
        self.notes = []
