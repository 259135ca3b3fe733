"""`compare`'s report, built only from the runs' records on disk: results.csv (one row per run, nothing
wall-clock, so an interrupted and resumed sweep writes the same file as one that never stopped),
timings.csv, results.md (tables with paired statistics) and results.png.

Tables, for the monitored validation metric of the recipe's task (and the test metric with --test):
* every arm x grid point: mean ± std over seeds, parameters, training FLOPs, seeds done / failed;
* with a grid, the tuned table: each arm's grid point with the best mean *validation* value, and that
  point's *test* value (selection never sees the test split);
  both also show every other test metric the records hold (test/loss, test/f1_macro, ...), which
  results.csv has a column each for, after its fixed ones;
* the paired comparison of every arm with the baseline: seed-by-seed differences, 95% t-interval,
  simultaneous (Bonferroni) interval,
  p-value and Holm-corrected p-value across the arms compared;
* with --success-threshold, the runs that reached it, with exact binomial intervals.
"""

from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from lit_attention.training.records import TIMING_FIELDS
from lit_attention.sweep.statistics import PairedDifference, clopper_pearson, mean_std, paired_difference, verdict, with_holm
from lit_attention.sweep.runs import Plan, RunState, point_label

# results.csv's first columns ("test": the monitored metric's test value); then one per test metric (test_metrics).
CSV_FIELDS = ["arm", "variant", "point", "seed", "status", "best", "best_step", "final", "test", "params_total",
              "params_non_embedding", "params_attention", "train_flops", "optimizer_steps", "samples_seen",
              "tokens_seen", "first_batch_sha256", "error"]


@dataclass
class Cell:
    """The runs of one arm at one grid point."""

    arm: str
    point: tuple
    states: list[RunState]

    @property
    def records(self) -> list[dict]:
        return [s.record for s in self.states if s.record is not None]

    def by_seed(self, value) -> dict[int, float]:
        found = {}
        for state in self.states:
            if state.record is not None and value(state.record) is not None:
                found[state.run.seed] = value(state.record)
        return found


def best_value(record: dict) -> float | None:
    return record["best"]["value"] if record.get("best") else None


def test_value(record: dict) -> float | None:
    test = record.get("test") or {}
    return test.get(record["monitor"].replace("val/", "test/"))


def present(records: list[dict], value) -> list[float]:
    """`value(record)` of every record that has one (a run may have no validation or no test value)."""
    return [v for record in records if (v := value(record)) is not None]


def test_metrics(records: list[dict]) -> list[str]:
    """Every test metric the records hold, whatever the task logs (test/acc, test/loss, ...), sorted."""
    return sorted({name for record in records for name in record.get("test") or {}})


def write_report(plan: Plan, states: list[RunState], output: Path, command: str, baseline: str,
                 success_threshold: float | None) -> str:
    """Write results.csv, timings.csv, results.md and results.png into `output`; returns the markdown."""
    cells = {(arm, point): Cell(arm, point, []) for point in plan.points for arm in plan.arms}
    for state in states:
        cells[(state.run.arm, state.run.point)].states.append(state)
    write_csv(output / "results.csv", states)
    write_timings(output / "timings.csv", states)
    finished = [s.record for s in states if s.record is not None]
    if not finished:
        failed = [s for s in states if s.failure is not None]
        text = f"# Comparison\n\n`{command}`\n\nNo run has finished yet.\n"
        if failed:  # say why, run by run
            text += "\n## Failed runs\n\n" + markdown(["arm", "point", "seed", "error"], [
                [s.run.arm, point_label(s.run.point), str(s.run.seed), s.failure.get("message", "").replace("|", "/")]
                for s in sorted(failed, key=lambda s: (s.run.arm, s.run.point, s.run.seed))])
        (output / "results.md").write_text(text)
        return text
    monitor, mode = finished[0]["monitor"], finished[0]["mode"]
    has_test = any(test_value(r) is not None for r in finished)
    others = [name for name in test_metrics(finished) if name != monitor.replace("val/", "test/")]
    tuned = tuned_points(plan, cells, mode)
    sections = [
        f"# Comparison\n\n`{command}`\n",
        seeds_paragraph(plan, monitor, mode, has_test, any(r.get("data_seed") is not None for r in finished)),
        "## Every run\n\n" + full_table(plan, cells, monitor, has_test, others),
    ]
    if len(plan.points) > 1:
        sections.append("## Tuned per arm\n\n" + tuned_table(plan, cells, tuned, monitor, has_test, others))
    sections.append(comparison_section(plan, cells, tuned, baseline, monitor, mode, has_test))
    if success_threshold is not None:
        sections.append(success_section(plan, cells, tuned, success_threshold, monitor, mode))
    sections.append("![curves](results.png)\n")
    text = "\n".join(sections)
    (output / "results.md").write_text(text)
    plot(output / "results.png", plan, cells, tuned, monitor)
    return text


def write_csv(path: Path, states: list[RunState]) -> None:
    metrics = test_metrics([s.record for s in states if s.record is not None])
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(CSV_FIELDS + metrics)
        for state in sorted(states, key=lambda s: (s.run.arm, s.run.point, s.run.seed)):
            run, record = state.run, state.record or {}
            status = "finished" if state.record else "failed" if state.failure else "missing"
            params = record.get("params", {})
            best = record.get("best") or {}
            test = record.get("test") or {}
            writer.writerow([run.arm, run.variant, point_label(run.point), run.seed, status, best.get("value"),
                             best.get("step"), record.get("final"), test_value(record) if record else None,
                             params.get("total"), params.get("non_embedding"), params.get("attention"),
                             record.get("train_flops"), record.get("optimizer_steps"), record.get("samples_seen"),
                             record.get("tokens_seen"), record.get("first_batch_sha256"),
                             (state.failure or {}).get("message") if not state.record else None,
                             *map(test.get, metrics)])


def write_timings(path: Path, states: list[RunState]) -> None:
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["arm", "point", "seed", *TIMING_FIELDS])
        for state in states:
            if state.record is not None:
                writer.writerow([state.run.arm, point_label(state.run.point), state.run.seed,
                                 *(state.record.get(field) for field in TIMING_FIELDS)])


def seeds_paragraph(plan: Plan, monitor: str, mode: str, has_test: bool, fixed_order: bool) -> str:
    direction = "higher" if mode == "max" else "lower"
    test = (f" and {monitor.replace('val/', 'test/')} on the held-out test split (the best checkpoint)"
            if has_test else "; run with --test for held-out test numbers")
    varied = ("the initialisation and dropout; the training data order is fixed (data_seed) and the data "
              "splits stay fixed" if fixed_order else
              "the initialisation, the training data order and dropout; the data splits stay fixed")
    return (f"Metric: {monitor} ({direction} is better) on the validation split{test}. Each seed "
            f"({', '.join(map(str, plan.seeds))}) varies {varied}. Runs with the same seed see the same "
            "batches, so arms are compared seed by seed.\n")


def _pm(values: list[float], digits: int = 4) -> str:
    mean, std = mean_std(values)
    return "n/a" if math.isnan(mean) else f"{mean:.{digits}f} ± {std:.{digits}f}"


def _count(value) -> str:
    if value is None:
        return "n/a"
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:.3g}"


def metric_means(records: list[dict], names: list[str]) -> list[str]:
    """Mean ± std over `records` of each test metric in `names`."""
    return [_pm([r["test"][name] for r in records if name in (r.get("test") or {})]) for name in names]


def full_table(plan: Plan, cells: dict, monitor: str, has_test: bool, others: list[str]) -> str:
    header = ["arm", "grid point", f"best {monitor}", f"final {monitor}"]
    header += [monitor.replace("val/", "test/")] if has_test else []
    header += others
    header += ["params (non-emb.)", "attention params", "train FLOPs", "seeds done", "failed"]
    rows = []
    for point in plan.points:
        for arm in plan.arms:
            cell = cells[(arm, point)]
            records = cell.records
            row = [arm, point_label(point), _pm(present(records, best_value)),
                   _pm([r["final"] for r in records if r.get("final") is not None])]
            if has_test:
                row.append(_pm(present(records, test_value)))
            row += metric_means(records, others)
            params = records[0]["params"] if records else {}
            flops = [r["train_flops"] for r in records if r.get("train_flops")]
            failed = [s for s in cell.states if s.failure is not None and s.record is None]
            row += [_count(params.get("non_embedding")), _count(params.get("attention")),
                    _count(statistics.fmean(flops)) if flops else "n/a", f"{len(records)}/{len(cell.states)}",
                    "; ".join(f"seed {s.run.seed}: {s.failure['message']}" for s in failed).replace("|", "/") or "-"]
            rows.append(row)
    return markdown(header, rows)


def tuned_points(plan: Plan, cells: dict, mode: str) -> dict[str, tuple]:
    """Each arm's grid point with the best mean best-validation value over its seeds. Only points where
    every seed finished take part (a learning rate that diverged on some seeds must not win on its
    survivors), unless no point of the arm is complete."""
    pick = max if mode == "max" else min
    tuned = {}
    for arm in plan.arms:
        complete = [p for p in plan.points if all(s.record is not None for s in cells[(arm, p)].states)]
        scored = [(statistics.fmean(v), point) for point in (complete or plan.points)
                  if (v := present(cells[(arm, point)].records, best_value))]
        if scored:
            tuned[arm] = pick(scored, key=lambda item: item[0])[1]
    return tuned


def tuned_table(plan: Plan, cells: dict, tuned: dict, monitor: str, has_test: bool, others: list[str]) -> str:
    header = ["arm", "chosen on validation", f"best {monitor}"]
    header += [monitor.replace("val/", "test/")] if has_test else []
    header += others
    rows = []
    for arm in plan.arms:
        if arm not in tuned:
            continue
        records = cells[(arm, tuned[arm])].records
        row = [arm, point_label(tuned[arm]), _pm(present(records, best_value))]
        if has_test:
            row.append(_pm(present(records, test_value)))
        rows.append(row + metric_means(records, others))
    return markdown(header, rows)


def comparison_pairs(plan: Plan, cells: dict, tuned: dict, baseline: str, has_test: bool) -> list[tuple[str, PairedDifference]]:
    """(arm, paired difference with the baseline) for every other arm, Holm-corrected together: at the
    one grid point, or with a grid at each arm's tuned point (so each side got its own tuning)."""
    value = test_value if has_test else best_value
    if baseline not in plan.arms or baseline not in tuned:
        return []
    reference = cells[(baseline, tuned[baseline])].by_seed(value)
    arms = [arm for arm in plan.arms if arm != baseline and arm in tuned]
    differences = [paired_difference(cells[(arm, tuned[arm])].by_seed(value), reference) for arm in arms]
    return list(zip(arms, with_holm(differences)))


def comparison_section(plan: Plan, cells: dict, tuned: dict, baseline: str, monitor: str, mode: str,
                       has_test: bool) -> str:
    metric = monitor.replace("val/", "test/") if has_test else f"best {monitor}"
    title = f"## Against `{baseline}`: paired differences in {metric}\n\n"
    pairs = comparison_pairs(plan, cells, tuned, baseline, has_test)
    if not pairs:
        if baseline not in tuned:
            why = f"the baseline `{baseline}` has no finished run (choose one with --baseline)"
        elif len(plan.arms) == 1:
            why = f"`{baseline}` is the only arm (add arms with --variants, --add-control or --arm)"
        else:
            why = f"no arm other than `{baseline}` has a finished run"
        return title + f"No comparison: {why}.\n"
    where = " at each arm's tuned grid point" if len(plan.points) > 1 else ""
    if len(plan.points) > 1 and not has_test:
        title += ("**Optimistic:** without --test these are the validation values that chose each grid point, "
                  "so the differences are biased toward the tuned arms; rerun with --test for held-out ones.\n\n")
    tested = sum(not math.isnan(d.p) for _, d in pairs)  # the arms the corrections count
    header = ["arm", "seeds", f"difference (arm − {baseline})", "95% interval", f"simultaneous 95% ({tested} arms)",
              "p", "p (Holm)", "verdict"]
    rows = []
    for arm, d in pairs:
        rows.append([arm, str(d.n), "n/a" if math.isnan(d.mean) else f"{d.mean:+.4f}", interval(d.low, d.high),
                     interval(d.joint_low, d.joint_high), p_value(d.p), p_value(d.p_holm), verdict(d, mode)])
    note = (f"Seed-by-seed differences{where}. The 95% interval is the paired t-interval of one comparison on "
            f"its own; the simultaneous interval (Bonferroni) holds for all {tested} tested together, and the verdict "
            "uses the p-value corrected with Holm's method across them. \"No detectable difference\" means the "
            "corrected test did not reject equality: the intervals show the differences still compatible with "
            "the data, not that the arms are equal.\n\n")
    return title + note + markdown(header, rows) + beyond_range_note(pairs, metric)


# The largest difference two runs can have in a bounded metric (the last part of its name).
DIFFERENCE_BOUNDS = {"acc": 1.0, "acc_top5": 1.0, "f1_macro": 1.0, "bleu": 100.0}


def beyond_range_note(pairs: list[tuple[str, PairedDifference]], metric: str) -> str:
    """A sentence naming the arms whose intervals reach past what a difference of a bounded metric can be:
    printed as computed, so that the width says how little these seeds pin the difference down."""
    bound = DIFFERENCE_BOUNDS.get(metric.split("/")[-1])
    if bound is None:
        return ""
    wide = [arm for arm, d in pairs if not math.isnan(d.joint_low) and (d.joint_low < -bound or d.joint_high > bound)]
    if not wide:
        return ""
    return (f"\nThe intervals of {', '.join(f'`{arm}`' for arm in wide)} reach past ±{bound:g}, the most a difference "
            f"in {metric} can be: they are left as computed, and say that these seeds are too few to bound that "
            "difference (add seeds), not that such values are possible.\n")


def interval(low: float, high: float) -> str:
    return "n/a" if math.isnan(low) else f"[{low:+.4f}, {high:+.4f}]"


def p_value(p: float) -> str:
    return "n/a" if math.isnan(p) else f"{p:.3g}"


def success_section(plan: Plan, cells: dict, tuned: dict, threshold: float, monitor: str, mode: str) -> str:
    reached = (lambda v: v >= threshold) if mode == "max" else (lambda v: v <= threshold)
    header = ["arm", "grid point", f"runs with best {monitor} {'≥' if mode == 'max' else '≤'} {threshold}",
              "95% interval (exact)"]
    rows = []
    for point in plan.points:
        for arm in plan.arms:
            values = [best_value(r) for r in cells[(arm, point)].records if best_value(r) is not None]
            k, n = sum(reached(v) for v in values), len(values)
            low, high = clopper_pearson(k, n)
            rows.append([arm, point_label(point), f"{k}/{n}", "n/a" if n == 0 else f"[{low:.2f}, {high:.2f}]"])
    return "## Runs that reached the threshold\n\n" + markdown(header, rows)


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"


def plot(path: Path, plan: Plan, cells: dict, tuned: dict, monitor: str) -> None:
    """Validation curves (mean ± std over seeds) of each arm at its tuned point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7.5, 4.6))
    for arm in plan.arms:
        if arm not in tuned:
            continue
        curves = [r["curve"] for r in cells[(arm, tuned[arm])].records if r["curve"]]
        length = min((len(c) for c in curves), default=0)
        if length == 0:
            continue
        steps = [curves[0][i][1] for i in range(length)]
        stats = [mean_std([c[i][2] for c in curves]) for i in range(length)]
        line, = axes.plot(steps, [m for m, _ in stats], label=f"{arm} ({point_label(tuned[arm])})")
        axes.fill_between(steps, [m - s for m, s in stats], [m + s for m, s in stats], color=line.get_color(), alpha=0.2)
    axes.set_xlabel("training step")
    axes.set_ylabel(monitor)
    axes.set_title("validation curves (mean ± std over seeds)")
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
