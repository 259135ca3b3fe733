"""`compare --cross-fit`'s tables: each arm's point chosen on one half of the seeds and scored on the
other half, both ways (selection.cross_fit), so that no seed both chooses a point and scores it.

Two candidate sets, because they answer different questions. The strict table chooses among the grid's
own points, fixed before any run. Where --extend-edges added points, a second table chooses among every
point each arm ran, the tuned table's candidates: the points past an edge exist because every seed (the
scoring half among them) chose that edge, but which of them each half picks is still decided by the
other half alone. Each table's comparisons are corrected as a family of their own.
"""

from __future__ import annotations

from lit_attention.reports.comparisons import compare_arms, comparison_table, wanted_comparisons
from lit_attention.sweep.runs import Plan, point_label
from lit_attention.stats.selection import cross_fit, ties_note
from lit_attention.reports.tables import markdown, plus_minus

STRICT = (
    "Candidates: the grid's own points, so no scoring seed influenced which points exist; a point that "
    "`--extend-edges` added cannot be chosen, so this table does not check a tuned choice of such a point."
)
EXTENDED = (
    "Candidates: every point each arm ran, the grid's and those `--extend-edges` added (the tuned table's); "
    "the points past the edge exist because all seeds, the scoring half among them, chose the edge, but the "
    "choice among them is still made by the other half only. Its comparisons are corrected as a family of "
    "their own."
)


def cross_fit_section(
    plan: Plan,
    cells: dict,
    baseline: str,
    primary,
    monitor: str,
    mode: str,
    has_test: bool,
    value,
    csv_rows: list[dict] | None = None,
) -> str:
    """The strict cross-fitted table and, when some arm has points past the grid, the extended one.
    `value`: a record's scored value (its test value, or its best validation value without --test);
    `csv_rows`: gets the comparisons' rows of comparisons.csv."""
    metric = monitor.replace("val/", "test/") if has_test else f"best {monitor}"
    title = "## Cross-fitted tuning: chosen on half of the seeds, scored on the other half\n\n"
    strict = {arm: [p for p in plan.points if (arm, p) in cells] for arm in plan.arms}
    section = cross_fit_tables(plan, cells, strict, STRICT, baseline, primary, metric, mode, value, csv_rows, "cross-fit")
    if section is None:
        return title + "Needs two or more seeds.\n"
    if not any(plan.extensions.get(arm) for arm in plan.arms):
        return title + section
    every = {arm: [p for p in plan.points_of(arm) if (arm, p) in cells] for arm in plan.arms}
    return (
        title
        + section
        + "\n## Cross-fitted tuning over every point each arm ran, extensions included\n\n"
        + cross_fit_tables(
            plan, cells, every, EXTENDED, baseline, primary, metric, mode, value, csv_rows, "cross-fit over every point"
        )
    )


def cross_fit_tables(
    plan: Plan,
    cells: dict,
    candidates: dict[str, list[tuple]],
    what: str,
    baseline: str,
    primary,
    metric: str,
    mode: str,
    value,
    csv_rows: list[dict] | None = None,
    name: str = "",
) -> str | None:
    """The halves, `what` the candidates are, each arm's two choices among its `candidates` ({arm: points})
    with its values at the other half's choice, and the comparison table at those choices; None when no
    arm can be cross-fitted."""
    fits, chosen = {}, {}
    for arm in plan.arms:
        points = candidates[arm]
        fit = cross_fit({p: cells[(arm, p)] for p in points}, points, plan.seeds, mode, value)
        if fit is None or not fit.values:
            continue
        fits[arm] = fit
        records = {}
        for half, point in ((fit.second_half, fit.chosen_on_first), (fit.first_half, fit.chosen_on_second)):
            if point is not None:
                records.update({s: r for s, r in cells[(arm, point)].records_by_seed().items() if s in half})
        chosen[arm] = (records, fit.values)
    if not fits:
        return None
    some = next(iter(fits.values()))
    halves = (
        f"seeds {', '.join(map(str, some.first_half))} choose the point that seeds "
        f"{', '.join(map(str, some.second_half))} are scored at, and the reverse"
    )
    rows = [
        [
            arm,
            point_label(f.chosen_on_first) if f.chosen_on_first else "n/a",
            point_label(f.chosen_on_second) if f.chosen_on_second else "n/a",
            plus_minus(list(f.values.values())),
        ]
        for arm, f in fits.items()
    ]
    table = markdown(["arm", "chosen on the first half", "chosen on the second half", f"{metric} (other half's choice)"], rows)
    table += ties_note(
        {
            f"{arm} ({half} half)": (point, tied)
            for arm, f in fits.items()
            for half, point, tied in (
                ("first", f.chosen_on_first, f.tied_on_first),
                ("second", f.chosen_on_second, f.tied_on_second),
            )
        },
        point_label,
    )
    comparisons = compare_arms(chosen, wanted_comparisons(plan, baseline, primary), primary)
    text = (
        comparison_table(comparisons, baseline, primary, metric, mode, " at the other half's choice", csv_rows, name)
        if comparisons
        else ""
    )
    return (
        f"Selection and scoring never share a seed: {halves}. Each seed's value is its run at the point the other "
        f"half chose. {what}\n\n" + table + ("\n" + text if text else "")
    )
