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


def agrees(printed: str, value: float, significant: int | None, slack: float = 0.0) -> bool:
    """Within half a unit of the last printed place, and `slack` more where the value comes from another
    optimiser than the report's."""
    if math.isnan(value):
        return False
    # A hair over half a unit: the report rounds its own float, computed in another order.
    tolerance = half_unit(printed, significant) * (1 + 1e-6) + 1e-12 * max(1.0, abs(value)) + slack
    return abs(float(printed) - value) <= tolerance


UNITS = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def counted(text: str) -> tuple[float, float] | None:
    """A count as the reports print it (3 significant digits, then k, M, G or T): (its value, half a unit
    of its last digit); None where it is no such count."""
    found = re.fullmatch(r"(\d+\.?\d*(?:e[+\-]?\d+)?)([kMGT]?)", text.strip())
    if found is None:
        return None
    unit = UNITS.get(found[2], 1.0)
    return float(found[1]) * unit, half_unit(found[1], 3) * unit


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

    def numbers(self, where: str, cell: str, values: list[float], significant: int | None = None, slack: float = 0.0) -> None:
        """A cell of numbers (one, a mean ± std, an interval) against `values`; "n/a" against NaN; `slack`:
        an absolute tolerance past the printed rounding (see agrees)."""
        self.checked += max(1, len(values))
        if cell.strip() == NOT_AVAILABLE or all(math.isnan(v) for v in values):
            if not (cell.strip() == NOT_AVAILABLE and all(math.isnan(v) for v in values)):
                self.mismatch(where, cell, ", ".join(f"{v:.6g}" for v in values))
            return
        printed = numbers_in(cell)
        if len(printed) != len(values) or not all(agrees(p, v, significant, slack) for p, v in zip(printed, values)):
            self.mismatch(where, cell, ", ".join(f"{v:.6g}" for v in values))

    def close(self, where: str, given: str, value: float, relative: float = 1e-9) -> None:
        """An unrounded number of comparisons.csv against `value`: equal to float rounding ("nan" against NaN)."""
        self.checked += 1
        written = float(given) if given not in ("", "nan") else math.nan
        if math.isnan(written) or math.isnan(value):
            if not (math.isnan(written) and math.isnan(value)):
                self.mismatch(where, given, f"{value!r}")
            return
        if not math.isclose(written, value, rel_tol=relative, abs_tol=1e-12):
            self.mismatch(where, given, f"{value!r}")

    def count(self, where: str, cell: str, value: float) -> None:
        """A count printed as 6.44k or 2.17T against `value`, to its 3 significant digits."""
        self.checked += 1
        found = counted(cell)
        if found is None or abs(found[0] - value) > found[1] * (1 + 1e-6):
            self.mismatch(where, cell, f"{value:.6g}")

    def text(self, where: str, cell: str, expected: str) -> None:
        self.checked += 1
        if cell.strip() != expected:
            self.mismatch(where, cell, repr(expected))

    def summary(self, scope: str) -> None:
        for note in self.notes:
            print(f"{scope}: {note}")
        print(
            f"{scope}: {self.checked} numbers checked, {self.mismatches} mismatches, {self.skipped} skipped "
            "(randomised: bootstrap, Monte Carlo p)"
        )
        self.checked = self.mismatches = self.skipped = 0
        self.notes = []
