"""`compare --trend DIR1 DIR2 ... --output OUT`: how an arm's difference from the baseline changes with
model size, over separate compare outputs of one recipe at several sizes (one folder a size), built only
from what those sweeps wrote (each folder's results.csv and one record for the metric's direction).

Each arm at its learning rate chosen on validation (compare's rule and tie-break, selection.best_of) is
scored on test and compared with the baseline seed by seed at every size; then whether that difference
changes with size: the least-squares slope of the seed-by-seed differences against log2 of the
baseline's non-embedding parameters (every seed of every size, t-interval), and the difference at the
largest size minus the one at the smallest (Welch's interval and a label permutation: the sizes' seeds
are separate models, so they are not paired); and what the sizes could have detected: the smallest slope
the least-squares test detects with 80% power, and the slope over the size means weighted by the inverse
variance of each mean (trend_statistics.py). It writes OUT/results.md, OUT/size_trend.png and
OUT/comparisons.csv (every size's differences, the slopes and the changes, unrounded, in compare's columns).

A `compare --scale` sweep reports its sizes with fitted laws and multipliers (fit_section.py); this
reads sweeps that were run one size at a time, as the committed results/size_trend and ratio_trend are.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from pathlib import Path

from lit_attention.errors import ConfigError
from lit_attention.sweep.report_files import write_atomically
from lit_attention.sweep.output_dir import TREND_FIGURE
from lit_attention.reports.comparisons import Comparison, comparison_records, marked
from lit_attention.reports.report import write_comparisons
from lit_attention.stats.validity import PAIRED, Pairing
from lit_attention.stats.selection import best_of
from lit_attention.stats.statistics import ALPHA, mean_std, paired_difference, unpaired_difference, verdict, with_holm
from lit_attention.reports.tables import interval, markdown, p_value
from lit_attention.stats.trend_statistics import POWER, detectable_slope, weighted_slope

FIGURE = TREND_FIGURE


def check_folders(folders: list[Path]) -> None:
    for folder in folders:
        if not (Path(folder) / "results.csv").is_file():
            raise ConfigError(f"--trend {folder} has no results.csv; give folders that `lit-attention compare` wrote.")
        if next(Path(folder).glob("runs/**/record.json"), None) is None:
            raise ConfigError(
                f"--trend {folder} holds no run record (runs/**/record.json); give folders of finished compare sweeps."
            )
        if any(not row["test"] for row in load(Path(folder))[0]):
            raise ConfigError(
                f"--trend {folder} holds runs without test scores (its sweep ran without --test), and a "
                "trend compares each size's test scores; run that sweep's command again with --test, which "
                "tests its finished runs without training them again."
            )


def load(folder: Path) -> tuple[list[dict], str, str]:
    """(finished rows of results.csv, monitored metric, "max" or "min")."""
    with open(folder / "results.csv", newline="") as file:
        rows = [row for row in csv.DictReader(file) if row["status"] == "finished"]
    record = json.loads(next(folder.glob("runs/**/record.json")).read_text())
    return rows, record["monitor"], record["mode"]


def tuned(rows: list[dict], mode: str) -> dict[str, list[dict]]:
    """{arm: the rows of its grid point with the best mean validation value}, ties broken as compare
    breaks them (the lower setting)."""
    by_arm: dict[str, dict[tuple, list[dict]]] = {}
    for row in rows:  # the point as a tuple of (key, value), from its label `lr=1e-3,...` (`default`: no grid)
        point = tuple(tuple(part.split("=", 1)) for part in row["point"].split(",") if "=" in part)
        by_arm.setdefault(row["arm"], {}).setdefault(point, []).append(row)
    return {
        arm: points[best_of([(statistics.fmean(float(r["best"]) for r in rs), point) for point, rs in points.items()], mode)[0]]
        for arm, points in by_arm.items()
    }


def write_trend(folders: list[Path], output: Path, baseline: str = "standard") -> str:
    """Write `output`/results.md and size_trend.png from the compare outputs `folders` (smallest model
    first, though the trend sorts them by parameters); returns the markdown."""
    folders = [Path(folder) for folder in folders]
    check_folders(folders)
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    loaded = {folder: load(folder) for folder in folders}
    # Only the arms every size has: each size's Holm and Bonferroni corrections then count the same arms.
    common = set.intersection(*({row["arm"] for row in rows} for rows, _, _ in loaded.values()))
    if baseline not in common:
        raise ConfigError(
            f"--baseline {baseline} is not an arm of every --trend folder; the arms they all have: "
            f"{', '.join(sorted(common)) or 'none'}."
        )
    sizes, table, per_seed = [], [], {}  # per_seed: {arm: [(baseline's parameters, {seed: difference})]}
    records: list[dict] = []  # comparisons.csv
    for folder, (rows, monitor, mode) in loaded.items():
        chosen = tuned([row for row in rows if row["arm"] in common], mode)
        test = {arm: {int(r["seed"]): float(r["test"]) for r in rs} for arm, rs in chosen.items()}
        arms = [arm for arm in chosen if arm != baseline]
        differences = with_holm([paired_difference(test[arm], test[baseline]) for arm in arms])
        records += comparison_records(
            [Comparison(arm, baseline, Pairing(PAIRED), d) for arm, d in zip(arms, differences)],
            f"size {folder.name}",
            monitor.replace("val/", "test/"),
            mode,
        )
        size = {"name": folder.name, "arms": {}}
        for arm, rs in chosen.items():
            values = [float(r["test"]) for r in rs]
            size["arms"][arm] = {
                "params": int(rs[0]["params_non_embedding"]),
                "flops": float(rs[0]["train_flops"]),
                "test": mean_std(values),
                "point": rs[0]["point"],
            }
        for arm in arms:
            seeds = sorted(set(test[arm]) & set(test[baseline]))
            per_seed.setdefault(arm, []).append(
                (size["arms"][baseline]["params"], {s: test[arm][s] - test[baseline][s] for s in seeds})
            )
        for arm, d in zip(arms, differences):
            tokens = [float(r["tokens_seen"]) / int(r["params_non_embedding"]) for r in chosen[arm] if r["tokens_seen"]]
            table.append(
                [
                    folder.name,
                    arm,
                    size["arms"][arm]["point"],
                    f"{size['arms'][arm]['params']:,}",
                    f"{statistics.fmean(tokens):.2f}" if tokens else "n/a",
                    "{:.4f} ± {:.4f}".format(*size["arms"][arm]["test"]),
                    f"{d.mean:+.4f}",
                    interval(d.low, d.high),
                    interval(d.joint_low, d.joint_high),
                    p_value(d.p_holm),
                    verdict(d, mode),
                ]
            )
        sizes.append(size)
    metric = monitor.replace("val/", "test/")
    header = [
        "size",
        "arm",
        "lr chosen on validation",
        "non-embedding params",
        "training tokens per non-embedding parameter (this arm)",
        metric,
        f"difference vs {baseline}",
        "95% interval",
        "simultaneous 95% (per size)",
        "p (Holm, per size)",
        "verdict",
    ]
    text = (
        f"# Size trend\n\n{metric} of each arm at its tuned learning rate (the arms every size has); "
        f"differences with `{baseline}` are paired over seeds and corrected over the arms at each size.\n\n"
        + markdown(header, table)
        + trend_section(per_seed, baseline, metric, records)
        + f"\n![trend]({FIGURE})\n"
    )
    write_atomically(output / "results.md", text)
    write_comparisons(output / "comparisons.csv", records)
    plot(sizes, metric, output / FIGURE)
    return text


def trend_section(
    per_seed: dict[str, list[tuple[int, dict[int, float]]]], baseline: str, metric: str, records: list[dict] | None = None
) -> str:
    """Does each arm's difference from the baseline change with size? The least-squares slope of every
    seed's difference against log2(parameters), and the largest size's mean difference minus the smallest's;
    their rows of comparisons.csv go to `records` (tables "slope per doubling" and "largest minus smallest")."""
    from scipy import stats

    rows, power_rows = [], []
    for arm, sizes in per_seed.items():
        if len(sizes) < 2:
            continue
        sizes = sorted(sizes, key=lambda size: size[0])  # by parameters, whatever order the folders came in
        x = [math.log2(params) for params, seeds in sizes for _ in seeds]
        y = [value for _, seeds in sizes for value in seeds.values()]
        fit = stats.linregress(x, y)
        half = float(stats.t.ppf(0.975, len(x) - 2)) * fit.stderr
        (small, first), (large, last) = sizes[0], sizes[-1]
        change = unpaired_difference(last, first)
        rows.append(
            [
                arm,
                f"{fit.slope:+.4f}",
                interval(fit.slope - half, fit.slope + half),
                p_value(fit.pvalue),
                f"{large / small:.1f}x",
                f"{change.mean:+.4f}",
                interval(change.low, change.high),
                interval(change.boot_low, change.boot_high),
                p_value(change.p),
                marked(change.p_exact, change.p_exact_monte_carlo),
            ]
        )
        power_rows.append(power_row(arm, sizes, fit.stderr, len(x) - 2))
        if records is not None:
            pair = {"metric": metric, "arm": arm, "reference": baseline, "verdict": ""}
            records.append(
                {
                    **pair,
                    "table": "slope per doubling",
                    "paired": True,
                    "seeds": len(x),
                    "difference": fit.slope,
                    "low": fit.slope - half,
                    "high": fit.slope + half,
                    "p": fit.pvalue,
                }
            )
            records.append(
                {
                    **pair,
                    "table": "largest minus smallest",
                    "paired": False,
                    "seeds": change.n,
                    "seeds_reference": change.n_baseline,
                    "difference": change.mean,
                    "low": change.low,
                    "high": change.high,
                    "bootstrap_low": change.boot_low,
                    "bootstrap_high": change.boot_high,
                    "p": change.p,
                    "p_exact": change.p_exact,
                    "p_exact_monte_carlo": change.p_exact_monte_carlo,
                }
            )
    if not rows:
        return ""
    header = [
        "arm",
        "slope per doubling of parameters",
        "95% interval",
        "p",
        "largest / smallest size",
        "largest minus smallest",
        "95% interval (Welch)",
        "bootstrap 95%",
        "p (Welch)",
        "exact p (permutation)",
    ]
    return (
        f"\n## Does the difference change with size?\n\nThe difference in {metric} from `{baseline}` (each seed's, "
        "at each arm's tuned rate) against log2 of the baseline's non-embedding parameters: the least-squares "
        "slope over every seed of every size, with its t-interval (which takes the seeds' spread to be the "
        "same at every size); and the mean difference at the largest size minus the one at the smallest, "
        "unpaired (each size's seeds are other models; Welch's interval allows each its own spread). Neither "
        "is corrected for the number of arms. Size is not the only thing that changes between the sizes: each "
        "has its own training budget (see the tokens per parameter above) and each arm its own tuned rate, "
        "so a slope describes these sizes at these budgets and this grid.\n\n"
        + markdown(header, rows)
        + (
            "\n(MC): a Monte Carlo estimate from 100,000 random relabellings, not exact.\n"
            if any("(MC)" in row[-1] for row in rows)
            else ""
        )
        + power_section(power_rows)
    )


def power_row(arm: str, sizes: list[tuple[int, dict[int, float]]], stderr: float, df: int) -> list[str]:
    """The smallest slope the pooled fit could detect, and the slope over the size means weighted by the
    inverse variance of each mean (trend_statistics.py), for one arm; `sizes` sorted by parameters."""
    doublings = math.log2(sizes[-1][0] / sizes[0][0])
    values = [list(seeds.values()) for _, seeds in sizes]
    weighted = (
        weighted_slope(
            [math.log2(params) for params, _ in sizes],
            [statistics.fmean(v) for v in values],
            [statistics.variance(v) / len(v) for v in values],
        )
        if all(len(v) > 1 for v in values)
        else None
    )
    return [
        arm,
        str(len(sizes)),
        f"{doublings:.1f}",
        f"{detectable_slope(stderr, df):.4f}",
        f"{weighted.slope:+.4f}" if weighted else "n/a",
        interval(weighted.low, weighted.high) if weighted else "n/a",
    ]


def power_section(rows: list[list[str]]) -> str:
    header = [
        "arm",
        "sizes",
        "doublings spanned",
        f"smallest slope detectable ({POWER:.0%} power)",
        "weighted slope per doubling",
        "95% interval (weighted)",
    ]
    return (
        "\n### What could these sizes have detected?\n\nThe smallest slope per doubling that the least-squares "
        f"test above detects with {POWER:.0%} power at a two-sided {ALPHA:.0%} level is (t_0.975,df + "
        f"t_{POWER:.2f},df) × SE(slope), df = the differences minus 2, SE the slope's standard error as measured "
        f"here: a true slope smaller than it would be detected less than {POWER:.0%} of the time. The weighted slope is the "
        "least-squares slope of the sizes' mean differences against log2 of the parameters, each mean weighted "
        "by w = n / s², the inverse of its variance (s² its seeds' variance, n their number), so that a size "
        "whose seeds scatter more counts less instead of sharing one spread with the others; its standard error "
        "is 1 / √(Σ w (x − x̄_w)²), x̄_w the weighted mean of x, and its interval the normal one, slope ± 1.96 "
        "SE, which takes the weights as known (estimated from a few seeds a size, they make it somewhat too "
        "narrow).\n\n" + markdown(header, rows)
    )


def plot(sizes: list[dict], metric: str, path: Path) -> None:
    """Each arm's test value (mean ± std over seeds) against its parameters and its training FLOPs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    figure, (by_params, by_flops) = plt.subplots(1, 2, figsize=(12, 4.6))
    for arm in sizes[0]["arms"]:
        points = [(s["arms"][arm]["params"], s["arms"][arm]["flops"], *s["arms"][arm]["test"]) for s in sizes if arm in s["arms"]]
        for axes, x in ((by_params, 0), (by_flops, 1)):
            axes.errorbar(
                [p[x] for p in points], [p[2] for p in points], yerr=[p[3] for p in points], marker="o", capsize=3, label=arm
            )
    for axes, label in ((by_params, "non-embedding parameters"), (by_flops, "training FLOPs")):
        axes.set_xscale("log")
        axes.xaxis.set_minor_formatter(NullFormatter())  # labelled minor ticks overlap on a short log axis
        axes.set_xlabel(label)
        axes.set_ylabel(f"{metric} (mean ± std over seeds)")
        axes.legend(fontsize=8)
    count = {2: "two", 3: "three", 4: "four", 5: "five"}.get(len(sizes), str(len(sizes)))
    figure.suptitle(f"the same arms at {count} sizes, each at its tuned learning rate")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
