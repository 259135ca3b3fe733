"""One section: recompute its tuned table and its comparison tables from the records, and check the ones
its results.md prints."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from scipy import stats as scipy_stats

import markdown_tables as markdown
import seed_statistics as stats
from printed_numbers import Checker
from comparison_rows import Row, compare
from item_check import check_items, item_table
from sweep_records import Sweep, best, choose, edges, label, load, orphans, test, tuned

CROSS_FIT = "Cross-fitted tuning: chosen on half of the seeds, scored on the other half"
CROSS_FIT_EXTENDED = "Cross-fitted tuning over every point each arm ran, extensions included"


def sections_with_records(results: Path) -> list[str]:
    return sorted(d.name for d in results.iterdir() if (d / "results.md").is_file() and (d / "runs").is_dir())


def check_section(directory: Path, checker: Checker, runs: Path | None = None, name: str | None = None) -> dict:
    """Check `directory`'s results.md against the records under `runs` (default: its runs/; one size of a
    scaled sweep: that size's runs folder); returns what was recomputed (for RESULTS.md)."""
    name = name or directory.name
    sweep = load(directory, runs)
    report = markdown.sections((directory / "results.md").read_text(encoding="utf-8"))
    has_test = any(test(r) is not None for runs in sweep.cells.values() for r in runs.values())
    value = test if has_test else best
    metric = sweep.monitor.replace("val/", "test/") if has_test else f"best {sweep.monitor}"
    choices = tuned(sweep)
    left = orphans(sweep)
    if left:
        checker.note(f"runs on disk outside every arm's plan (not part of the report): {', '.join(left)}")
    check_every_run(sweep, table_under(report, "Every run", 0, name, checker), f"{name} every run", checker)
    if sweep.threshold is not None:
        table = table_under(report, "Runs that reached the threshold", 0, name, checker)
        check_threshold(sweep, table, f"{name} threshold", checker)
    if len({p for points in sweep.points.values() for p in points}) > 1:
        check_tuned(sweep, choices, table_under(report, "Tuned per arm", 0, name, checker), f"{name} tuned", checker)
    if len(sweep.arms) < 2:  # one arm (a scorecard's ladder rung): the report compares nothing
        only = f"No comparison: `{sweep.baseline}` is the only arm"
        checker.text(f"{name} comparison", str(any(only in text for text in report.values())), "True")
        return {"sweep": sweep, "tuned": choices, "rows": [], "fits": {}, "extended_fits": {}}
    chosen = {arm: at_point(sweep, arm, point, value) for arm, (point, _) in choices.items()}
    rows = compare(chosen, sweep.arms, sweep.baseline, sweep.primary, sweep.mode)
    heading = f"Against `{sweep.baseline}`: differences in {metric}"
    check_comparisons(rows, sweep.mode, table_under(report, heading, 0, name, checker), f"{name} comparison", checker)
    written = comparison_csv(directory)  # the same comparisons, unrounded, where the report wrote the file
    grid = len({p for points in sweep.points.values() for p in points}) > 1
    if written:
        check_comparison_values(rows, sweep.mode, written.get("tuned" if grid else "main"), f"{name} comparison", checker)
    items = item_table(report.get(heading, ""))
    if items is not None:
        places = {arm: sweep.places.get((arm, point), {}) for arm, (point, _) in choices.items()}
        check_items(
            rows,
            chosen,
            places,
            metric,
            items,
            f"{name} over seeds and test items",
            checker,
            written.get(f"{'tuned' if grid else 'main'} over seeds and test items") if written else None,
        )
    if sweep.at is not None:
        at_chosen = {arm: found for arm in sweep.arms if (found := at_point(sweep, arm, sweep.at, value))[1]}
        at_rows = compare(at_chosen, sweep.arms, sweep.baseline, sweep.primary, sweep.mode)
        heading = f"Every arm at {label(sweep.at)}: differences in {metric}"
        check_comparisons(
            at_rows, sweep.mode, table_under(report, heading, 0, name, checker), f"{name} at {label(sweep.at)}", checker
        )
        if written:
            check_comparison_values(
                at_rows, sweep.mode, written.get(f"at {label(sweep.at)}"), f"{name} at {label(sweep.at)}", checker
            )
    fits = extended_fits = {}
    extended = any(p not in sweep.grid for points in sweep.points.values() for p in points)
    if sweep.cross_fit:
        # The strict table chooses among the grid's own points; where --extend-edges added some, a second
        # table chooses among every point each arm ran, its comparisons a family of their own.
        fits = check_cross_fit_tables(
            sweep, lambda arm: sweep.grid, value, report, CROSS_FIT, name, "cross-fit", checker, written, "cross-fit"
        )
        if extended:
            extended_fits = check_cross_fit_tables(
                sweep,
                lambda arm: sweep.points[arm],
                value,
                report,
                CROSS_FIT_EXTENDED,
                name,
                "extended cross-fit",
                checker,
                written,
                "cross-fit over every point",
            )
    if CROSS_FIT_EXTENDED in report and not (sweep.cross_fit and extended):
        checker.mismatch(name, f"a table under '## {CROSS_FIT_EXTENDED}'", "none (no --cross-fit, or no point past the grid)")
    return {"sweep": sweep, "tuned": choices, "rows": rows, "fits": fits, "extended_fits": extended_fits}


def check_cross_fit_tables(
    sweep: Sweep,
    candidates,
    value,
    report: dict,
    heading: str,
    name: str,
    scope: str,
    checker: Checker,
    written: dict | None = None,
    table: str = "",
) -> dict:
    """A cross-fitted section: each half's choice among `candidates(arm)`, the values at the other half's
    choice, and the comparisons at those choices; returns the fits."""
    fits, fit_chosen = cross_fitted(sweep, value, candidates)
    check_cross_fit(fits, table_under(report, heading, 0, name, checker), f"{name} {scope}", checker)
    fit_rows = compare(fit_chosen, sweep.arms, sweep.baseline, sweep.primary, sweep.mode)
    check_comparisons(fit_rows, sweep.mode, table_under(report, heading, 1, name, checker), f"{name} {scope} comparison", checker)
    if written:  # comparisons.csv, where the report wrote one
        check_comparison_values(fit_rows, sweep.mode, written.get(table), f"{name} {scope} comparison", checker)
    return fits


def table_under(report: dict, heading: str, index: int, name: str, checker: Checker) -> list[dict]:
    found = markdown.tables(report.get(heading, ""))
    if len(found) <= index:
        checker.mismatch(f"{name}", f"no table {index + 1} under '## {heading}'", "a table")
        return []
    return found[index]


def keyed(table: list[dict], columns: tuple[str, ...], where: str, checker: Checker) -> dict:
    """{the row's cells in `columns` (one cell: the cell itself): row}; a key printed twice is a mismatch."""
    found = {}
    for row in table:
        key = tuple(row.get(c, "") for c in columns)
        key = key[0] if len(key) == 1 else key
        if key in found:
            checker.mismatch(f"{where}, {key}", "the row twice", "once")
        found[key] = row
    return found


def at_point(sweep: Sweep, arm: str, point: tuple, value) -> tuple[dict, dict]:
    runs = sweep.cells.get((arm, point), {})
    return runs, {seed: v for seed, r in runs.items() if (v := value(r)) is not None}


def check_tuned(sweep: Sweep, choices: dict, table: list[dict], where: str, checker: Checker) -> None:
    printed = keyed(table, ("arm",), where, checker)
    for arm in set(choices) ^ set(printed):
        checker.mismatch(
            f"{where}, arm {arm}", "row" if arm in printed else "no row", "a row" if arm in choices else "no tuned point"
        )
    for arm in choices.keys() & printed.keys():
        point, row = choices[arm][0], printed[arm]
        runs = list(sweep.cells[(arm, point)].values())
        checker.text(f"{where}, {arm}, chosen on validation", row["chosen on validation"], label(point))
        for column, cell in row.items():
            if column.startswith("best "):
                checker.numbers(f"{where}, {arm}, {column}", cell, stats.mean_std([best(r) for r in runs if best(r) is not None]))
            elif column.startswith("test/"):
                values = [r["test"][column] for r in runs if column in (r.get("test") or {})]
                checker.numbers(f"{where}, {arm}, {column}", cell, stats.mean_std(values))
        flags = "; ".join(
            f"{key.split('.')[-1]}={dict(point)[key]} is the {side} tried" for key, side in edges(point, sweep.points[arm])
        )
        checker.text(f"{where}, {arm}, at the grid's edge", row["at the grid's edge"], flags or "-")


def p_text(p: float) -> str:
    return "n/a" if math.isnan(p) else f"{p:.3g}"


def comparison_csv(directory: Path) -> dict[str, dict[tuple[str, str], dict]]:
    """comparisons.csv beside a report, by table and (arm, reference); {} where a report has none (older)."""
    path = directory / "comparisons.csv"
    if not path.is_file():
        return {}
    found: dict[str, dict[tuple[str, str], dict]] = {}
    with path.open(newline="", encoding="utf-8") as file:
        for row in csv.DictReader(file):
            found.setdefault(row["table"], {})[(row["arm"], row["reference"])] = row
    return found


def check_comparison_values(
    rows: list[Row], mode: str, written: dict[tuple[str, str], dict] | None, where: str, checker: Checker
) -> None:
    """The comparisons of one table against their rows of comparisons.csv, unrounded: the same pairs, and each
    number equal to float rounding (the bootstrap and Monte Carlo p, randomised, skipped as in the markdown)."""
    if written is None:
        checker.mismatch(f"{where} (comparisons.csv)", "no such table", "its comparisons")
        return
    mine = {row.pair: row for row in rows}
    for pair in mine.keys() ^ written.keys():
        checker.mismatch(
            f"{where} (comparisons.csv), {pair[0]} vs {pair[1]}",
            "row" if pair in written else "no row",
            "a row" if pair in mine else "no comparison",
        )
    for pair in mine.keys() & written.keys():
        r, row, at = mine[pair].result, written[pair], f"{where} (comparisons.csv), {pair[0]} vs {pair[1]}"
        if r is None:
            checker.text(f"{at}, verdict", row["verdict"], "not compared: other data")
            continue
        checker.text(
            f"{at}, seeds", f"{row['seeds']}/{row['seeds_reference']}/{row['paired']}", f"{r.n}/{r.n_reference}/{r.paired}"
        )
        for column, value in (
            ("difference", r.mean),
            ("low", r.low),
            ("high", r.high),
            ("p", r.p),
            ("p_holm", r.p_holm),
            ("simultaneous_low", r.joint_low),
            ("simultaneous_high", r.joint_high),
        ):
            checker.close(f"{at}, {column}", row[column], value)
        for column, value, flag in (
            ("p_exact", r.p_exact, "p_exact_monte_carlo"),
            ("p_exact_holm", r.p_exact_holm, "p_exact_holm_monte_carlo"),
        ):
            if row[flag] == "True":
                checker.skip()
            else:
                checker.close(f"{at}, {column}", row[column], value)
        checker.skip(2)  # the bootstrap interval: 10,000 random resamples
        checker.text(f"{at}, verdict", row["verdict"], stats.verdict(r, mode))


def check_comparisons(rows: list[Row], mode: str, table: list[dict], where: str, checker: Checker) -> None:
    printed = keyed(table, ("arm",), where, checker)
    mine = {row.name: row for row in rows}
    for name in mine.keys() ^ printed.keys():
        checker.mismatch(
            f"{where}, row {name}", "row" if name in printed else "no row", "a row" if name in mine else "no comparison"
        )
    tested = sum(r.result is not None and r.result.primary and not math.isnan(r.result.p) for r in rows)
    for name in [n for n in mine if n in printed]:
        r, cells = mine[name].result, printed[name]
        at = f"{where}, {name}"
        if r is None:
            checker.text(f"{at}, verdict", cells["verdict"], "not compared: other data")
            continue
        checker.text(f"{at}, seeds", cells["seeds"], str(r.n) if r.paired else f"{r.n} + {r.n_reference} (unpaired)")
        checker.numbers(f"{at}, difference", cells["difference"], [r.mean])
        checker.numbers(f"{at}, 95% interval", cells["95% interval"], [r.low, r.high])
        joint = next(column for column in cells if column.startswith("simultaneous"))
        checker.text(f"{at}, simultaneous header", joint, f"simultaneous 95% ({tested})")
        checker.numbers(f"{at}, {joint}", cells[joint], [r.joint_low, r.joint_high])
        checker.numbers(f"{at}, p", cells["p"], [r.p], significant=3)
        checker.numbers(f"{at}, p (Holm)", cells["p (Holm)"], [r.p_holm], significant=3)
        for column, p in (("exact p", r.p_exact), ("exact p (Holm)", r.p_exact_holm)):
            if "(MC)" in cells[column]:
                checker.skip()
            else:
                checker.numbers(f"{at}, {column}", cells[column], [p], significant=3)
        checker.skip()  # the bootstrap interval: 10,000 random resamples
        checker.text(f"{at}, verdict", cells["verdict"], stats.verdict(r, mode))


def cross_fitted(sweep: Sweep, value, candidates) -> tuple[dict, dict]:
    """{arm: (chosen on the first half, on the second, {seed: value at the other half's choice})}, and the
    chosen runs and values for the comparisons; each half chooses among the points of `candidates(arm)`
    the arm ran."""
    first, second = set(sweep.seeds[: len(sweep.seeds) // 2]), set(sweep.seeds[len(sweep.seeds) // 2 :])
    fits, chosen = {}, {}
    for arm in sweep.arms:
        points = [p for p in candidates(arm) if (arm, p) in sweep.cells]
        on_first, on_second = choose(sweep, arm, points, first)[0], choose(sweep, arm, points, second)[0]
        records, values = {}, {}
        for half, point in ((second, on_first), (first, on_second)):
            if point is None:
                continue
            runs, found = at_point(sweep, arm, point, value)
            records.update({s: r for s, r in runs.items() if s in half})
            values.update({s: v for s, v in found.items() if s in half})
        if values:
            fits[arm] = (on_first, on_second, values)
            chosen[arm] = (records, values)
    return fits, chosen


def check_cross_fit(fits: dict, table: list[dict], where: str, checker: Checker) -> None:
    printed = keyed(table, ("arm",), where, checker)
    for arm in fits.keys() ^ printed.keys():
        checker.mismatch(f"{where}, arm {arm}", "row" if arm in printed else "no row", "a row" if arm in fits else "none")
    for arm in fits.keys() & printed.keys():
        on_first, on_second, values = fits[arm]
        row = printed[arm]
        checker.text(f"{where}, {arm}, first half", row["chosen on the first half"], label(on_first) if on_first else "n/a")
        checker.text(f"{where}, {arm}, second half", row["chosen on the second half"], label(on_second) if on_second else "n/a")
        column = next(c for c in row if c.endswith("(other half's choice)"))
        checker.numbers(f"{where}, {arm}, {column}", row[column], stats.mean_std(list(values.values())))


def plan_rows(sweep: Sweep, printed: dict, where: str, checker: Checker):
    """((arm, point), the report's row) for every cell of the plan, in no particular order; a row on one
    side only is a mismatch."""
    mine = {(arm, label(point)): (arm, point) for arm in sweep.arms for point in sweep.points[arm]}
    for key in mine.keys() ^ printed.keys():
        checker.mismatch(
            f"{where}, {' '.join(key)}",
            "row" if key in printed else "no row",
            "a row" if key in mine else "no such cell in the plan",
        )
    return [(mine[key], printed[key]) for key in mine.keys() & printed.keys()]


def check_every_run(sweep: Sweep, table: list[dict], where: str, checker: Checker) -> None:
    """Mean ± std of every arm x grid point (validation, final, each test metric) and the seeds done."""
    printed = keyed(table, ("arm", "grid point"), where, checker)
    for (arm, point), row in plan_rows(sweep, printed, where, checker):
        runs = list(sweep.cells.get((arm, point), {}).values())
        at = f"{where}, {arm} {label(point)}"
        for column, cell in row.items():
            if column.startswith("best "):
                values = [best(r) for r in runs if best(r) is not None]
            elif column.startswith("final "):
                values = [r["final"] for r in runs if r.get("final") is not None]
            elif column.startswith("test/"):
                values = [r["test"][column] for r in runs if column in (r.get("test") or {})]
            else:
                continue
            checker.numbers(f"{at}, {column}", cell, stats.mean_std(values))
        checker.text(f"{at}, seeds done", row["seeds done"], f"{len(runs)}/{len(sweep.seeds)}")


def check_threshold(sweep: Sweep, table: list[dict], where: str, checker: Checker) -> None:
    """The runs whose best validation value reached the threshold, with the Clopper-Pearson interval."""
    printed = keyed(table, ("arm", "grid point"), where, checker)
    reached = (lambda v: v >= sweep.threshold) if sweep.mode == "max" else (lambda v: v <= sweep.threshold)
    for (arm, point), row in plan_rows(sweep, printed, where, checker):
        values = [best(r) for r in sweep.cells.get((arm, point), {}).values() if best(r) is not None]
        k, n = sum(map(reached, values)), len(values)
        at = f"{where}, {arm} {label(point)}"
        checker.text(f"{at}, count", next(c for col, c in row.items() if col.startswith("runs with")), f"{k}/{n}")
        low = 0.0 if k == 0 else float(scipy_stats.beta.ppf(0.025, k, n - k + 1))
        high = 1.0 if k == n else float(scipy_stats.beta.ppf(0.975, k + 1, n - k))
        checker.numbers(f"{at}, interval", row["95% interval (exact)"], [low, high] if n else [math.nan, math.nan])
