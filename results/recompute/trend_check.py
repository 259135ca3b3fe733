"""A size trend (`compare --trend`): each size's tuned arms against the baseline, Holm over the arms at each
size, and whether the difference changes with size: the least-squares slope of every seed's difference
against log2 of the baseline's non-embedding parameters (t-interval), and the largest size's differences
minus the smallest's (Welch, with the exact label permutation), and what the sizes could have detected
(trend_power.py), recomputed from the sizes' records; and, where the trend wrote comparisons.csv, the same
numbers unrounded in its rows (each size's differences, each arm's slope and change)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

import markdown_tables as markdown
import seed_statistics as stats
from printed_numbers import Checker
from section_check import comparison_csv, keyed
from sweep_records import label, load, test, tuned
from trend_power import check_power

TITLE = "# Size trend"
BASELINE = "standard"


def trend_sections(results: Path) -> list[str]:
    return sorted(
        d.name
        for d in results.iterdir()
        if (d / "results.md").is_file()
        and not (d / "runs").exists()
        and (d / "results.md").read_text(encoding="utf-8").startswith(TITLE)
    )


def check_trend(directory: Path, results: Path, checker: Checker) -> None:
    text = (directory / "results.md").read_text(encoding="utf-8")
    first, second, third = (markdown.tables(text) + [[], [], []])[:3]
    names = list(dict.fromkeys(row["size"] for row in first))
    where = directory.name
    sizes = {}
    for name in names:
        sweep = load(results / name)
        sizes[name] = (sweep, tuned(sweep))
    common = set.intersection(*(set(choices) for _, choices in sizes.values()))
    printed = keyed(first, ("size", "arm"), where, checker)
    written = comparison_csv(directory)  # {} for a trend written before the file
    per_arm: dict[str, list[tuple[int, dict[int, float]]]] = {}
    for name, (sweep, choices) in sizes.items():
        runs = {arm: sweep.cells[(arm, choices[arm][0])] for arm in common}
        values = {arm: {s: v for s, r in rs.items() if (v := test(r)) is not None} for arm, rs in runs.items()}
        arms = [arm for arm in sweep.arms if arm in common and arm != BASELINE]
        results_ = [stats.paired(values[arm], values[BASELINE]) for arm in arms]
        stats.correct(results_, [True] * len(results_))
        baseline_params = next(iter(runs[BASELINE].values()))["params"]["non_embedding"]
        for arm, r in zip(arms, results_):
            seeds = sorted(values[arm].keys() & values[BASELINE].keys())
            per_arm.setdefault(arm, []).append((baseline_params, {s: values[arm][s] - values[BASELINE][s] for s in seeds}))
            row = printed.pop((name, arm), None)
            at = f"{where}, {name}, {arm}"
            if row is None:
                checker.mismatch(at, "no row", "a row")
                continue
            records = list(runs[arm].values())
            params = records[0]["params"]["non_embedding"]
            tokens = [r["tokens_seen"] / r["params"]["non_embedding"] for r in records if r.get("tokens_seen")]
            checker.text(f"{at}, lr chosen on validation", row["lr chosen on validation"], label(choices[arm][0]))
            checker.text(f"{at}, non-embedding params", row["non-embedding params"], f"{params:,}")
            checker.numbers(
                f"{at}, tokens per parameter",
                row["training tokens per non-embedding parameter (this arm)"],
                [float(np.mean(tokens)) if tokens else math.nan],
            )
            metric = next(c for c in row if c.startswith("test/"))
            checker.numbers(f"{at}, {metric}", row[metric], stats.mean_std(list(values[arm].values())))
            checker.numbers(f"{at}, difference", row[f"difference vs {BASELINE}"], [r.mean])
            checker.numbers(f"{at}, 95% interval", row["95% interval"], [r.low, r.high])
            checker.numbers(f"{at}, simultaneous", row["simultaneous 95% (per size)"], [r.joint_low, r.joint_high])
            checker.numbers(f"{at}, p (Holm)", row["p (Holm, per size)"], [r.p_holm], significant=3)
            checker.text(f"{at}, verdict", row["verdict"], stats.verdict(r, sweep.mode))
            if written:
                check_written(
                    written.get(f"size {name}", {}).get((arm, BASELINE)),
                    [
                        ("difference", r.mean),
                        ("low", r.low),
                        ("high", r.high),
                        ("p_holm", r.p_holm),
                        ("simultaneous_low", r.joint_low),
                        ("simultaneous_high", r.joint_high),
                    ],
                    f"{at} (comparisons.csv)",
                    checker,
                )
    for key in printed:
        checker.mismatch(f"{where}, {key}", "row", "no such tuned arm")
    check_slopes(
        per_arm, keyed(second, ("arm",), where, checker), keyed(third, ("arm",), where, checker), where, checker, written
    )


def check_written(row: dict | None, expected: list[tuple[str, float]], where: str, checker: Checker) -> None:
    """One row of comparisons.csv against recomputed numbers, to float rounding."""
    if row is None:
        checker.mismatch(where, "no row", "a row")
        return
    for column, value in expected:
        checker.close(f"{where}, {column}", row[column], value)


def check_slopes(per_arm: dict, printed: dict, power: dict, where: str, checker: Checker, written: dict) -> None:
    """The slope table and, under it, what the sizes could have detected (trend_power.py)."""
    for table, rows in (("trend", printed), ("detectable", power)):
        for arm in rows.keys() - per_arm.keys():
            checker.mismatch(f"{where}, {table}, {arm}", "row", "no such arm in every size")
    for arm, sizes in per_arm.items():
        row = printed.get(arm)
        at = f"{where}, trend, {arm}"
        if row is None:
            checker.mismatch(at, "no row", "a row")
            continue
        sizes = sorted(sizes, key=lambda size: size[0])
        x = np.array([math.log2(params) for params, seeds in sizes for _ in seeds])
        y = np.array([d for _, seeds in sizes for d in seeds.values()])
        # Least squares by hand: slope, its standard error and the t-test of slope = 0 on n - 2 df.
        dx = x - x.mean()
        slope = float(dx @ (y - y.mean()) / (dx @ dx))
        residual = y - y.mean() - slope * dx
        error = math.sqrt(residual @ residual / (x.size - 2) / (dx @ dx))
        half = scipy_stats.t.ppf(0.975, x.size - 2) * error
        p = 2 * scipy_stats.t.sf(abs(slope) / error, x.size - 2)
        checker.numbers(f"{at}, slope", row["slope per doubling of parameters"], [slope])
        checker.numbers(f"{at}, slope interval", row["95% interval"], [slope - half, slope + half])
        checker.numbers(f"{at}, slope p", row["p"], [p], significant=3)
        check_power(sizes, error, x.size - 2, power.get(arm), f"{where}, detectable, {arm}", checker)
        (small, first), (large, last) = sizes[0], sizes[-1]
        checker.numbers(f"{at}, largest / smallest size", row["largest / smallest size"], [large / small])
        change = stats.welch(last, first)
        checker.numbers(f"{at}, largest minus smallest", row["largest minus smallest"], [change.mean])
        checker.numbers(f"{at}, Welch interval", row["95% interval (Welch)"], [change.low, change.high])
        checker.numbers(f"{at}, p (Welch)", row["p (Welch)"], [change.p], significant=3)
        if "(MC)" in row["exact p (permutation)"]:
            checker.skip()
        else:
            checker.numbers(f"{at}, exact p", row["exact p (permutation)"], [change.p_exact], significant=3)
        checker.skip()  # the bootstrap interval
        if written:
            slope_at, change_at = (f"{at} (comparisons.csv, {table})" for table in ("slope", "change"))
            check_written(
                written.get("slope per doubling", {}).get((arm, BASELINE)),
                [("difference", slope), ("low", slope - half), ("high", slope + half), ("p", p)],
                slope_at,
                checker,
            )
            check_written(
                written.get("largest minus smallest", {}).get((arm, BASELINE)),
                [("difference", change.mean), ("low", change.low), ("high", change.high), ("p", change.p)],
                change_at,
                checker,
            )
