"""A scaled sweep (`compare --scale`): each size's own report (sizes/<size>/results.md, an ordinary compare
report of the records under runs/<size>/), the top-level table of sizes and budgets, and from each size's
tuned runs the scaling section's laws, multipliers and tuned-rate trend (scaling_check.py,
rate_trend_check.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import markdown_tables as markdown
from printed_numbers import Checker
from rate_trend_check import check_rates
from scaling_check import check_scaling
from section_check import check_section, keyed, table_under
from sweep_records import Sweep, arm_order, best, label, load, number, parse_command, test, tuned


NOT_RUN = "No run has finished yet."


@dataclass(frozen=True)
class SizeRuns:
    """One arm at one size at its tuned point: N and C of its first seed's record, each seed's validation
    and test value, and the point's learning rate (None without one)."""

    params: float
    flops: float
    validation: dict[int, float]
    test: dict[int, float]
    lr: float | None


def sizes_of(given: dict) -> list[tuple[str, list[tuple[str, str]]]]:
    """[(label, [(key, value), ...])] of the --scale options, zipped (keys changed together)."""
    axes = [(words[0].partition("=")[0].lstrip("-"), words[0].partition("=")[2].split(",")) for words in given.get("--scale", [])]
    settings = [list(zip([key for key, _ in axes], values)) for values in zip(*(values for _, values in axes))]
    return [(label(tuple(pairs)), pairs) for pairs in settings]


def slug(text: str) -> str:
    """A label as a folder name: letters, digits and . , = + ~ - kept, anything else an underscore."""
    return re.sub(r"[^\w.,=+~-]", "_", text)


def check_scaled(directory: Path, checker: Checker) -> None:
    name = directory.name
    text = (directory / "results.md").read_text(encoding="utf-8")
    given = parse_command(text)[1]
    sweeps = {}
    for size, _ in sizes_of(given):
        folder, runs = directory / "sizes" / slug(size), directory / "runs" / slug(size)
        if not any(runs.rglob("record.json")):  # a size not run yet: its report says so, and has no tables
            said = (folder / "results.md").is_file() and NOT_RUN in (folder / "results.md").read_text(encoding="utf-8")
            checker.text(f"{name} {size}, report", NOT_RUN if said else "(not said)", NOT_RUN)
            sweeps[size] = load(directory, runs)
        elif (folder / "results.md").is_file():
            sweeps[size] = check_section(folder, checker, runs, f"{name} {size}")["sweep"]
        else:
            checker.mismatch(f"{name} {size}", f"no report sizes/{slug(size)}/results.md", "one")
            sweeps[size] = load(directory, runs)
    report = markdown.sections(text)
    check_budgets(
        sweeps,
        sizes_of(given),
        arm_order(given),
        table_under(report, "Sizes and budgets", 0, name, checker),
        f"{name} sizes",
        checker,
    )
    arms, variants = scaling_input(sweeps)
    baseline = next(iter(sweeps.values())).baseline
    if not arms.get(baseline):
        arms.pop(baseline, None)  # as the report does: no law, and no multiplier against it
    scaling = markdown.sections(report.get("Scaling with size", ""), "### ")
    mode = next((sweep.mode for sweep in sweeps.values() if sweep.cells), "min")
    check_scaling(arms, baseline, mode, variants, scaling, name, checker)
    check_rates(arms, scaling.get("Tuned learning rate against N", ""), f"{name} tuned lr", checker)


def check_budgets(
    sweeps: dict[str, Sweep], sizes: list, named: list[str], table: list[dict], where: str, checker: Checker
) -> None:
    """Each size's settings, the baseline's N, the budget its records carry and the runs finished of those
    its plan holds (the arms `named` by the command and those with records, at the grid and the extension
    rounds replayed, every seed)."""
    printed = keyed(table, ("size",), where, checker)
    for size in printed.keys() - sweeps.keys():
        checker.mismatch(f"{where}, {size}", "row", "no such size in the command")
    for size, settings in sizes:
        row, sweep = printed.get(size), sweeps[size]
        at = f"{where}, {size}"
        if row is None:
            checker.mismatch(at, "no row", "a row")
            continue
        checker.text(f"{at}, settings", row["settings"], ", ".join(f"{key}={value}" for key, value in settings))
        records = [r for (arm, point), runs in sweep.cells.items() if point in sweep.points.get(arm, []) for r in runs.values()]
        baseline = {
            r["params"]["non_embedding"] for (arm, _), runs in sweep.cells.items() if arm == sweep.baseline for r in runs.values()
        }
        if len(baseline) > 1:
            checker.note(f"{at}: the baseline's records hold {len(baseline)} different N; its row names one of them")
        params = min(baseline) if baseline else None
        if params is None:
            checker.text(f"{at}, N", row["N (baseline)"], "-")
        else:
            checker.count(f"{at}, N", row["N (baseline)"], params)
        arms = list(dict.fromkeys(named + sweep.arms))  # an arm the command names plans runs without any record
        planned = sum(len(sweep.points.get(arm, sweep.grid)) for arm in arms) * len(sweep.seeds)
        checker.text(f"{at}, runs finished", row["runs finished"], f"{len(records)}/{planned}")
        folder = f"sizes/{slug(size)}"
        checker.text(f"{at}, tables", row["tables"], f"[{folder}]({folder}/results.md)")
        if not records:  # the budget was planned from the model's parameter count, which only records hold here
            checker.note(f"{at}: no finished run, so no record holds its budget: not checked")
            continue
        budget = records[0]["settings"]
        ratio = row["tokens per parameter"]
        if "max_steps" in budget and params:
            given, _, reached = ratio.partition(" (reached: ")
            checker.text(f"{at}, tokens per parameter", given, f"{float(budget['tokens_per_parameter']):g}")
            checker.numbers(
                f"{at}, tokens per parameter reached",
                reached.rstrip(")"),
                [int(budget["max_steps"]) * int(budget["tokens_per_step"]) / params],
                significant=3,
            )
        else:
            checker.text(f"{at}, tokens per parameter", ratio, budget.get("tokens_per_parameter", "-"))
        checker.text(f"{at}, tokens per step", row["tokens per step"], budget.get("tokens_per_step", "-"))
        checker.text(f"{at}, max_steps", row["max_steps"], budget.get("max_steps", "the recipe's"))
        checker.text(f"{at}, warmup_steps", row["warmup_steps"], budget.get("warmup_steps", "the recipe's"))


def point_rate(point: tuple) -> float | None:
    """The learning rate of a grid point: its key whose last part is `lr`."""
    return next((number(value) for key, value in point if key.split(".")[-1] == "lr"), None)


def scaling_input(sweeps: dict[str, Sweep]) -> tuple[dict[str, dict[str, SizeRuns]], dict[str, str]]:
    """({arm: {size: SizeRuns}} at each arm's tuned point of each size where every record there counted
    its training FLOPs, {arm: its variant})."""
    arms: dict[str, dict[str, SizeRuns]] = {}
    variants = {}
    for size, sweep in sweeps.items():
        for arm in sweep.arms:
            arms.setdefault(arm, {})
        for arm, (point, _) in tuned(sweep).items():
            records = sweep.cells[(arm, point)]
            variants[arm] = next(iter(records.values()))["variant"]
            if not records or any(r.get("train_flops") is None for r in records.values()):
                continue
            first = records[min(records)]
            arms[arm][size] = SizeRuns(
                float(first["params"]["non_embedding"]),
                float(first["train_flops"]),
                {s: v for s, r in records.items() if (v := best(r)) is not None},
                {s: v for s, r in records.items() if (v := test(r)) is not None},
                point_rate(point),
            )
    return arms, variants
