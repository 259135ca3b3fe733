"""`compare`'s report, built only from the runs' records on disk: results.csv (one row per run, nothing
wall-clock, so an interrupted and resumed sweep writes the same file as one that never stopped),
timings.csv, results.md (tables with paired statistics) and results.png, each replaced whole through a
temporary file and a rename (sweep/report_files.py), so that a kill while they are written leaves the previous ones.

Tables, for the monitored validation metric of the recipe's task (and the test metric with --test):
* every arm x grid point: mean ± std over seeds, parameters, training FLOPs, seeds done / failed;
* with a grid, the tuned table: each arm's grid point with the best mean *validation* value, and that
  point's *test* value (selection never sees the test split), flagged where the choice sits at an end
  of the grid (selection.py); with --cross-fit, the same choice made on half of the seeds and scored
  on the other half, among the grid's own points and, where --extend-edges added some, among every
  point each arm ran (cross_fits.py);
  both also show every other test metric the records hold (test/loss, test/f1_macro, ...), which
  results.csv has a column each for, after its fixed ones; under the tuned table, how many tuned runs
  had their best validation value late in training (budget.py: was the budget long enough?);
* the comparison of every arm with the baseline (and the --primary pairs): seed-by-seed differences
  where the records show the arms paired (validity.py), Welch's otherwise; the t-interval, a bootstrap
  interval, the exact sign-flip (or permutation) p, and Holm's correction over the primary comparisons;
  with test values, the same differences over seeds and test items where the runs kept per-example
  outcomes, else one sentence saying that the intervals are over seeds only (item_comparisons.py);
* with --at POINT, the same comparisons with every arm at that one grid point (what an arm's own tuned
  setting contributes);
* with --success-threshold, the runs that reached it, with exact binomial intervals;
* provenance: every distinct code version, machine and data fingerprint among the runs;
* results.png: the tuned arms' validation curves and, with a grid, the baseline's at every grid point.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from pathlib import Path

from lit_attention.training.records import TIMING_FIELDS
from lit_attention.sweep.report_files import write_atomically
from lit_attention.reports.budget import budget_note
from lit_attention.reports.comparisons import CSV_FIELDS as COMPARISON_FIELDS
from lit_attention.reports.comparisons import compare_arms, comparison_table, equivalence_note, wanted_comparisons
from lit_attention.reports.cross_fits import cross_fit_section
from lit_attention.reports.floors import floors_line
from lit_attention.reports.inspection import inspection_section
from lit_attention.reports.verification import verification_section
from lit_attention.reports.item_comparisons import item_section
from lit_attention.sweep.runs import Plan, RunState, point_label
from lit_attention.stats.selection import best_value, cells_of, edge_flags, ties_note, tuned_choices, tuned_points
from lit_attention.stats.statistics import ALPHA, clopper_pearson, mean_std
from lit_attention.reports.tables import count, markdown, plus_minus
from lit_attention.stats.validity import provenance_rows

# results.csv's first columns ("test": the monitored metric's test value); then one per test metric (test_metrics).
CSV_FIELDS = [
    "arm",
    "variant",
    "point",
    "seed",
    "status",
    "best",
    "best_step",
    "final",
    "test",
    "params_total",
    "params_non_embedding",
    "params_attention",
    "train_flops",
    "optimizer_steps",
    "samples_seen",
    "tokens_seen",
    "first_batch_sha256",
    "error",
]


def test_value(record: dict) -> float | None:
    test = record.get("test") or {}
    return test.get(record["monitor"].replace("val/", "test/"))


def present(records: list[dict], value) -> list[float]:
    """`value(record)` of every record that has one (a run may have no validation or no test value)."""
    return [v for record in records if (v := value(record)) is not None]


def test_metrics(records: list[dict]) -> list[str]:
    """Every test metric the records hold, whatever the task logs (test/acc, test/loss, ...), sorted."""
    return sorted({name for record in records for name in record.get("test") or {}})


def write_report(
    plan: Plan,
    states: list[RunState],
    output: Path,
    command: str,
    baseline: str,
    success_threshold: float | None,
    primary: list[tuple[str, str]] | None = None,
    cross_fitted: bool = False,
    extension_rounds: int | None = None,
    common_point: tuple | None = None,
    equivalence: dict | None = None,
) -> str:
    """Write results.csv, timings.csv, comparisons.csv, results.md and results.png into `output`; returns the markdown.
    `primary`: the (arm, reference) comparisons declared confirmatory (None: every arm against the
    baseline); `cross_fitted`: add the cross-fitted tuned table; `extension_rounds`: how many rounds of
    --extend-edges were allowed (None: not asked for); `common_point`: a grid point to compare every arm
    at as well (compare --at); `equivalence`: {(arm, reference): margin} declared with --equivalence."""
    cells = cells_of(plan, states)
    write_csv(output / "results.csv", states)
    write_timings(output / "timings.csv", states)
    finished = [s.record for s in states if s.record is not None]
    if not finished:
        failed = [s for s in states if s.failure is not None]
        text = f"# Comparison\n\n`{command}`\n\nNo run has finished yet.\n"
        if failed:  # say why, run by run
            text += "\n## Failed runs\n\n" + markdown(
                ["arm", "point", "seed", "error"],
                [
                    [s.run.arm, point_label(s.run.point), str(s.run.seed), s.failure.get("message", "").replace("|", "/")]
                    for s in sorted(failed, key=lambda s: (s.run.arm, s.run.point, s.run.seed))
                ],
            )
        write_comparisons(output / "comparisons.csv", [])
        write_atomically(output / "results.md", text)
        return text
    monitor, mode = finished[0]["monitor"], finished[0]["mode"]
    has_test = any(test_value(r) is not None for r in finished)
    others = [name for name in test_metrics(finished) if name != monitor.replace("val/", "test/")]
    tuned = tuned_points(plan, cells, mode)
    grid = len(plan.all_points) > 1
    floors = floors_line(finished)  # under each table of losses: the data's unigram and bigram losses
    sections = [
        f"# Comparison\n\n`{command}`\n",
        seeds_paragraph(plan, monitor, mode, has_test, any(r.get("data_seed") is not None for r in finished)),
        "## Every run\n\n" + full_table(plan, cells, monitor, has_test, others) + floors,
    ]
    if grid:
        sections.append(
            "## Tuned per arm\n\n"
            + tuned_table(plan, cells, tuned, monitor, has_test, others)
            + floors
            + ties_note(tuned_choices(plan, cells, mode), point_label)
            + edges_note(plan, tuned, extension_rounds)
            + budget_note(plan, cells, tuned)
        )
    value = test_value if has_test else best_value
    chosen = {arm: (cells[(arm, point)].records_by_seed(), cells[(arm, point)].by_seed(value)) for arm, point in tuned.items()}
    places = {
        arm: {s.run.seed: s.directory for s in cells[(arm, point)].states if s.record is not None} for arm, point in tuned.items()
    }
    csv_rows: list[dict] = []  # comparisons.csv: every comparison of every table below, unrounded
    table, smallest_effect = comparison_section(
        plan, chosen, baseline, primary, monitor, mode, has_test, grid, places, equivalence or {}, csv_rows
    )
    sections.append(table)
    if common_point is not None:
        sections.append(common_point_section(plan, cells, common_point, baseline, primary, monitor, mode, has_test, csv_rows))
    if cross_fitted and grid:
        sections.append(cross_fit_section(plan, cells, baseline, primary, monitor, mode, has_test, value, csv_rows))
    if success_threshold is not None:
        sections.append(success_section(plan, cells, tuned, success_threshold, monitor, mode))
    sections.append(verification_section(plan, states, output, smallest_effect))
    sections.append(inspection_section(plan, states, output))
    sections.append(
        "## Provenance\n\nEvery distinct value among the finished runs' records (how many runs had "
        'it); a record older than a field says "not recorded".\n\n'
        + markdown(["what", "values (runs)"], provenance_rows(finished))
    )
    sections.append("![curves](results.png)\n")
    text = "\n".join(section for section in sections if section)
    write_comparisons(output / "comparisons.csv", csv_rows)
    write_atomically(output / "results.md", text)
    plot(output / "results.png", plan, cells, tuned, monitor, baseline)
    return text


def write_comparisons(path: Path, rows: list[dict]) -> None:
    """comparisons.csv: a row per comparison of results.md's tables (COMPARISON_FIELDS), numbers unrounded,
    NaN where the markdown says n/a; a program reads the differences, intervals, p values and verdicts here."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COMPARISON_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows([{k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()} for row in rows])
    write_atomically(path, buffer.getvalue())


def write_csv(path: Path, states: list[RunState]) -> None:
    metrics = test_metrics([s.record for s in states if s.record is not None])
    with io.StringIO(newline="") as file:
        writer = csv.writer(file)
        writer.writerow(CSV_FIELDS + metrics)
        for state in sorted(states, key=lambda s: (s.run.arm, s.run.point, s.run.seed)):
            run, record = state.run, state.record or {}
            status = "finished" if state.record else "failed" if state.failure else "missing"
            params = record.get("params", {})
            best = record.get("best") or {}
            test = record.get("test") or {}
            writer.writerow(
                [
                    run.arm,
                    run.variant,
                    point_label(run.point),
                    run.seed,
                    status,
                    best.get("value"),
                    best.get("step"),
                    record.get("final"),
                    test_value(record) if record else None,
                    params.get("total"),
                    params.get("non_embedding"),
                    params.get("attention"),
                    record.get("train_flops"),
                    record.get("optimizer_steps"),
                    record.get("samples_seen"),
                    record.get("tokens_seen"),
                    record.get("first_batch_sha256"),
                    (state.failure or {}).get("message") if not state.record else None,
                    *map(test.get, metrics),
                ]
            )
        write_atomically(path, file.getvalue())


def write_timings(path: Path, states: list[RunState]) -> None:
    with io.StringIO(newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["arm", "point", "seed", *TIMING_FIELDS])
        for state in states:
            if state.record is not None:
                writer.writerow(
                    [
                        state.run.arm,
                        point_label(state.run.point),
                        state.run.seed,
                        *(state.record.get(field) for field in TIMING_FIELDS),
                    ]
                )
        write_atomically(path, file.getvalue())


def seeds_paragraph(plan: Plan, monitor: str, mode: str, has_test: bool, fixed_order: bool) -> str:
    direction = "higher" if mode == "max" else "lower"
    test = (
        f" and {monitor.replace('val/', 'test/')} on the held-out test split (the best checkpoint)"
        if has_test
        else "; run with --test for held-out test numbers"
    )
    varied = (
        "the initialisation and dropout; the training data order is fixed (data_seed) and the data splits stay fixed"
        if fixed_order
        else "the initialisation, the training data order and dropout; the data splits stay fixed"
    )
    return (
        f"Metric: {monitor} ({direction} is better) on the validation split{test}. Each seed "
        f"({', '.join(map(str, plan.seeds))}) varies {varied}. Arms are compared seed by seed where their "
        "records show that runs of one seed began with the same training batch on the same data (each "
        "comparison says whether they did).\n"
    )


def metric_means(records: list[dict], names: list[str]) -> list[str]:
    """Mean ± std over `records` of each test metric in `names`."""
    return [plus_minus([r["test"][name] for r in records if name in (r.get("test") or {})]) for name in names]


def full_table(plan: Plan, cells: dict, monitor: str, has_test: bool, others: list[str]) -> str:
    header = ["arm", "grid point", f"best {monitor}", f"final {monitor}"]
    header += [monitor.replace("val/", "test/")] if has_test else []
    header += others
    header += ["params (non-emb.)", "attention params", "train FLOPs", "seeds done", "failed"]
    rows = []
    for point in plan.all_points:
        for arm in plan.arms:
            if (arm, point) not in cells:  # a point past the grid's edge that another arm ran
                continue
            cell = cells[(arm, point)]
            records = cell.records
            row = [
                arm,
                point_label(point),
                plus_minus(present(records, best_value)),
                plus_minus([r["final"] for r in records if r.get("final") is not None]),
            ]
            if has_test:
                row.append(plus_minus(present(records, test_value)))
            row += metric_means(records, others)
            params = records[0]["params"] if records else {}
            flops = [r["train_flops"] for r in records if r.get("train_flops")]
            failed = [s for s in cell.states if s.failure is not None and s.record is None]
            row += [
                count(params.get("non_embedding")),
                count(params.get("attention")),
                count(statistics.fmean(flops)) if flops else "n/a",
                f"{len(records)}/{len(cell.states)}",
                "; ".join(f"seed {s.run.seed}: {s.failure['message']}" for s in failed).replace("|", "/") or "-",
            ]
            rows.append(row)
    return markdown(header, rows)


def tuned_table(plan: Plan, cells: dict, tuned: dict, monitor: str, has_test: bool, others: list[str]) -> str:
    header = ["arm", "chosen on validation", f"best {monitor}"]
    header += [monitor.replace("val/", "test/")] if has_test else []
    header += others + ["at the grid's edge"]
    rows = []
    for arm in plan.arms:
        if arm not in tuned:
            continue
        records = cells[(arm, tuned[arm])].records
        row = [arm, point_label(tuned[arm]), plus_minus(present(records, best_value))]
        if has_test:
            row.append(plus_minus(present(records, test_value)))
        edges = edge_flags(tuned[arm], plan.points_of(arm))
        rows.append(row + metric_means(records, others) + ["; ".join(map(str, edges)) or "-"])
    return markdown(header, rows)


def edges_note(plan: Plan, tuned: dict, extension_rounds: int | None) -> str:
    """A sentence naming the arms whose choice sits at an end of a grid axis."""
    at_edge = [f"`{arm}`" for arm, point in tuned.items() if edge_flags(point, plan.points_of(arm))]
    extended = sum(len(points) for points in plan.extensions.values())
    done = (
        f" `--extend-edges` added {extended} point(s) past the grid in up to {extension_rounds} round(s)."
        if extension_rounds is not None
        else ""
    )
    if not at_edge:
        return f"\nNo arm's choice sits at an end of the grid.{done}\n"
    hint = (
        " (still, after --extend-edges: its rounds ran out, or no point past that edge could be run)"
        if extension_rounds is not None
        else "; `--extend-edges` runs the next point past the edge until the choice is inside the grid"
    )
    return (
        f"\n**At the grid's edge:** {', '.join(at_edge)} chose the lowest or highest value tried, so the best "
        f"setting may lie outside the grid and every difference built on that choice inherits it{hint}.{done}\n"
    )


def comparison_section(
    plan: Plan,
    chosen: dict,
    baseline: str,
    primary,
    monitor: str,
    mode: str,
    has_test: bool,
    grid: bool,
    places: dict | None = None,
    equivalence: dict | None = None,
    csv_rows: list[dict] | None = None,
) -> tuple[str, float | None]:
    """The comparison table and the smallest difference it claims (a "better" or "worse" verdict), for the
    re-run check; None when it claims none. With test values, the comparison over seeds and test items
    follows the table (item_comparisons.py; `places`: {arm: {seed: its run's directory}})."""
    metric = monitor.replace("val/", "test/") if has_test else f"best {monitor}"
    title = f"## Against `{baseline}`: differences in {metric}\n\n"
    comparisons = compare_arms(chosen, wanted_comparisons(plan, baseline, primary), primary)
    if not comparisons:
        if baseline not in chosen:
            why = f"the baseline `{baseline}` has no finished run (choose one with --baseline)"
        elif len(plan.arms) == 1:
            why = f"`{baseline}` is the only arm (add arms with --variants, --add-control or --arm)"
        else:
            why = f"no arm other than `{baseline}` has a finished run"
        return title + f"No comparison: {why}.\n", None
    if grid and not has_test:
        title += (
            "**Optimistic:** without --test these are the validation values that chose each grid point, "
            "so the differences are biased toward the tuned arms; rerun with --test for held-out ones.\n\n"
        )
    where = " at each arm's tuned grid point" if grid else ""
    name = "tuned" if grid else "main"
    text = comparison_table(comparisons, baseline, primary, metric, mode, where, csv_rows, name)
    text += equivalence_note(comparisons, equivalence or {}, baseline)
    if has_test:
        text += item_section(
            comparisons,
            {arm: records for arm, (records, _) in chosen.items()},
            places or {},
            metric,
            primary,
            baseline,
            csv_rows,
            name,
        )
    # The smallest effect the table claims: a difference whose corrected test rejects equality.
    effects = [
        abs(c.difference.mean)
        for c in comparisons
        if c.difference is not None and c.difference.primary and c.difference.p_holm < ALPHA
    ]
    return title + text, min(effects, default=None)


def common_point_section(
    plan: Plan,
    cells: dict,
    point: tuple,
    baseline: str,
    primary,
    monitor: str,
    mode: str,
    has_test: bool,
    csv_rows: list[dict] | None = None,
) -> str:
    """The comparison again with every arm at one grid point instead of its tuned one (compare --at): what
    is left of a difference when no arm gets a setting of its own, e.g. at a common, conservative rate."""
    value = test_value if has_test else best_value
    metric = monitor.replace("val/", "test/") if has_test else f"best {monitor}"
    title = f"## Every arm at {point_label(point)}: differences in {metric}\n\n"
    chosen = {
        arm: (cells[(arm, point)].records_by_seed(), values)
        for arm in plan.arms
        if (arm, point) in cells and (values := cells[(arm, point)].by_seed(value))
    }  # finished runs only
    comparisons = compare_arms(chosen, wanted_comparisons(plan, baseline, primary), primary)
    if not comparisons:
        who = f"`{baseline}` has no" if baseline not in chosen else f"no arm but `{baseline}` has a"
        return title + f"No comparison: {who} finished run at {point_label(point)}.\n"
    return (
        title + "The same comparisons with every arm at this one setting instead of its tuned one: a check on how "
        "much of a tuned difference comes from the setting each arm chose. Corrected as a family of its own, "
        "not together with the table above, so across both tables a false verdict is up to twice as likely "
        "as either table's 5%.\n\n"
        + comparison_table(
            comparisons, baseline, primary, metric, mode, f" at {point_label(point)}", csv_rows, f"at {point_label(point)}"
        )
    )


def success_section(plan: Plan, cells: dict, tuned: dict, threshold: float, monitor: str, mode: str) -> str:
    reached = (lambda v: v >= threshold) if mode == "max" else (lambda v: v <= threshold)
    header = [
        "arm",
        "grid point",
        f"runs with best {monitor} {'≥' if mode == 'max' else '≤'} {threshold}",
        "95% interval (exact)",
    ]
    rows = []
    for point in plan.all_points:
        for arm in plan.arms:
            if (arm, point) not in cells:
                continue
            values = [best_value(r) for r in cells[(arm, point)].records if best_value(r) is not None]
            k, n = sum(reached(v) for v in values), len(values)
            low, high = clopper_pearson(k, n)
            rows.append([arm, point_label(point), f"{k}/{n}", "n/a" if n == 0 else f"[{low:.2f}, {high:.2f}]"])
    return "## Runs that reached the threshold\n\n" + markdown(header, rows)


def plot(path: Path, plan: Plan, cells: dict, tuned: dict, monitor: str, baseline: str) -> None:
    """Validation curves (mean ± std over seeds) of each arm at its tuned point and, beside them when the
    baseline ran at several grid points, the baseline's at each: how the setting shapes its curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [p for p in plan.points_of(baseline) if (baseline, p) in cells and cells[(baseline, p)].records]
    panels = 2 if len(points) > 1 else 1
    figure, axes = plt.subplots(1, panels, figsize=(7.5 * panels, 4.6), squeeze=False)
    tuned_axes = axes[0][0]
    for arm in plan.arms:
        if arm in tuned:
            draw_curve(tuned_axes, cells[(arm, tuned[arm])].records, f"{arm} ({point_label(tuned[arm])})")
    tuned_axes.set_title("validation curves (mean ± std over seeds)")
    if panels == 2:
        for point in points:
            draw_curve(axes[0][1], cells[(baseline, point)].records, point_label(point))
        axes[0][1].set_title(f"{baseline} at every grid point (mean ± std over seeds)")
    for each in axes[0]:
        each.set_xlabel("training step")
        each.set_ylabel(monitor)
        each.legend(fontsize=7)
    figure.tight_layout()
    image = io.BytesIO()
    figure.savefig(image, format="png", dpi=110)
    plt.close(figure)
    write_atomically(path, image.getvalue())


def draw_curve(axes, records: list[dict], label: str) -> None:
    """One line: the records' validation curves, mean ± std over seeds, up to the shortest."""
    curves = [r["curve"] for r in records if r.get("curve")]
    length = min((len(c) for c in curves), default=0)
    if length == 0:
        return
    steps = [curves[0][i][1] for i in range(length)]
    stats = [mean_std([c[i][2] for c in curves]) for i in range(length)]
    (line,) = axes.plot(steps, [m for m, _ in stats], label=label)
    axes.fill_between(steps, [m - s for m, s in stats], [m + s for m, s in stats], color=line.get_color(), alpha=0.2)
