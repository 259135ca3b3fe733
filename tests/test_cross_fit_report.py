"""--cross-fit's two tables on hand-made records: the strict one chooses among the grid's own points, the
extended one (only where --extend-edges added points) among every point each arm ran."""

from test_validity_guards import point, sweep  # tests/ is on sys.path under pytest

from lit_attention.reports.cross_fits import EXTENDED, STRICT, cross_fit_section
from lit_attention.stats.selection import cells_of

LOW, HIGH, PAST = point(lr="1e-3"), point(lr="3e-3"), point(lr="9e-3")


def extended_sweep(extend: bool = True):
    """standard ran 1e-3 and 3e-3 (the grid) and 9e-3 past its edge. Among the grid both halves prefer
    3e-3; with 9e-3 seeds 0, 1 prefer it and seeds 2, 3 still prefer 3e-3. super ran the grid only."""
    values = {
        ("standard", LOW): lambda s: (0.7, 0.50 + s / 100),
        ("standard", HIGH): lambda s: (0.8, 0.60 + s / 100),
        ("standard", PAST): lambda s: (0.9 if s < 2 else 0.75, 0.70 + s / 100),
        ("super", LOW): lambda s: (0.9, 0.80 + s / 100),
        ("super", HIGH): lambda s: (0.8, 0.85),
    }
    if not extend:
        del values[("standard", PAST)]
    plan, states = sweep(values, seeds=(0, 1, 2, 3))
    if extend:
        plan.points.remove(PAST)
        plan.extensions = {"standard": [PAST]}
    return plan, cells_of(plan, states)


def section(plan, cells) -> str:
    return cross_fit_section(plan, cells, "standard", None, "val/acc", "max", True, lambda r: r["test"]["test/acc"])


def test_the_strict_table_chooses_among_the_grid_and_the_extended_one_among_every_point_run():
    text = section(*extended_sweep())
    strict, extended = text.split("## Cross-fitted tuning over every point each arm ran, extensions included")
    # Strict: 3e-3 on both halves, standard 0.60-0.63, super at 1e-3 0.20 above it on every seed.
    assert STRICT in strict and EXTENDED not in strict
    assert "| standard | lr=3e-3 | lr=3e-3 | 0.6150 ± 0.0129 |" in strict
    assert "| super | 4 | +0.2000 |" in strict
    # Extended: seeds 0, 1 choose 9e-3, at which seeds 2, 3 are scored (0.72, 0.73); seeds 2, 3 choose
    # 3e-3, at which seeds 0, 1 are scored (0.60, 0.61): super's differences 0.20, 0.20, 0.10, 0.10.
    assert EXTENDED in extended and STRICT not in extended
    assert "| standard | lr=9e-3 | lr=3e-3 | 0.6650 ± 0.0695 |" in extended
    assert "| super | 4 | +0.1500 |" in extended


def test_without_extensions_there_is_only_the_strict_table():
    text = section(*extended_sweep(extend=False))
    assert STRICT in text and "extensions included" not in text and EXTENDED not in text
    assert "| standard | lr=3e-3 | lr=3e-3 | 0.6150 ± 0.0129 |" in text
