"""The report of a `compare --scale` sweep, built only from the records on disk: each size's own report
(report.write_report: tables, tuning, comparisons) in `<output>/sizes/<size>/`, and `<output>/results.md`
with each size's budget, the scaling section of the scaling engine (fit_section.scaling_section:
laws over the sizes, multipliers against the baseline, claims, the tuned rate against N) and its
figure, scaling.png."""

from __future__ import annotations

from pathlib import Path

from lit_attention.sweep.report_files import write_atomically
from lit_attention.reports.floors import floor_values, floors_line
from lit_attention.sweep.output_dir import INSPECT, SIZES
from lit_attention.reports.report import write_report
from lit_attention.sweep.runs import slug
from lit_attention.scaling.fits import SizeRuns
from lit_attention.scaling.size_runs import size_runs
from lit_attention.scaling.fit_section import scaling_section
from lit_attention.stats.selection import cells_of, tuned_points
from lit_attention.reports.tables import count, markdown
from lit_attention.sweep.verify import VERIFY

FIGURE = "scaling.png"
CONTROL_TOLERANCE = 0.01  # an arm of the baseline's variant whose N differs by more is a parameter control


def write_scaled_report(parts, output: Path, command: str, baseline: str, success_threshold, **options) -> str:
    """Write every size's report and the scaling report; returns the scaling report's markdown. `parts`:
    [(sizes.Size, its Plan, its RunStates)]; `options`: what report.write_report takes besides."""
    output = Path(output)
    arms: dict[str, dict[str, SizeRuns]] = {}
    variants = {run.arm: run.variant for _, plan, _ in parts for run in plan.runs}
    mode = "min"
    rows, finished = [], []
    for size, plan, states in parts:
        folder = output / SIZES / slug(size.label)
        folder.mkdir(parents=True, exist_ok=True)
        write_report(plan, states, folder, command, baseline, success_threshold, **options)
        records = [s.record for s in states if s.record is not None]
        finished += records
        if records:
            mode = records[0]["mode"]
        cells = cells_of(plan, states)
        for arm in plan.arms:
            arms.setdefault(arm, {})
        for arm, point in tuned_points(plan, cells, mode).items():
            found = cells[(arm, point)].records_by_seed()
            if found and all(r.get("train_flops") is not None for r in found.values()):
                arms[arm][size.label] = size_runs(found, point)
        rows.append(budget_row(size, plan, states, baseline, folder.relative_to(output)))
    if not arms.get(baseline):
        arms.pop(baseline, None)  # the engine says that the baseline has no finished run at any size
    if any(arms.values()):
        scaling = scaling_section(
            arms,
            baseline,
            mode,
            claims=control_claims(arms, baseline, variants),
            figure=output / FIGURE,
            floors=floors_line(finished),
            floor_losses=floor_values(finished),
        )
    else:
        (output / FIGURE).unlink(missing_ok=True)  # a figure from earlier records would outlive them
        scaling = "## Scaling with size\n\nNo arm has a finished run at any size yet: no law can be fitted.\n"
    sections = [
        f"# Comparison over sizes\n\n`{command}`\n",
        "## Sizes and budgets\n\nEach size is a sweep of its own: every arm at every grid point and seed, "
        "tuned on its own validation values. N: the baseline's non-embedding parameters at the size (from "
        'its records; "-" before one finished). Tokens per step: batch size × sequence length for a '
        'language model, samples for other tasks (a classifier\'s "token" is a sample), times gradient '
        "accumulation and devices.\n\n"
        + markdown(
            [
                "size",
                "settings",
                "N (baseline)",
                "tokens per parameter",
                "tokens per step",
                "max_steps",
                "warmup_steps",
                "runs finished",
                "tables",
            ],
            rows,
        ),
        checks_section(parts, output),
        scaling,
    ]
    text = "\n".join(section for section in sections if section)
    write_atomically(output / "results.md", text)
    return text


def checks_section(parts, output: Path) -> str:
    """Where each size's --verify re-run check and --inspect figure are ("" when no size has either): in
    that size's own report, which sets them beside that size's comparisons."""
    rows = []
    for size, _, _ in parts:
        folder = Path(SIZES) / slug(size.label)
        reruns = sum(1 for _ in (output / folder / VERIFY).rglob("record.json"))
        inspected = (output / folder / INSPECT / "compare.md").is_file()
        if reruns or inspected:
            rows.append(
                [
                    size.label,
                    f"{reruns} re-run(s): [{folder}/results.md]({folder}/results.md)" if reruns else "-",
                    f"[{folder}/{INSPECT}/compare.md]({folder}/{INSPECT}/compare.md)" if inspected else "-",
                ]
            )
    if not rows:
        return ""
    return (
        "## Re-run checks and what each arm learned, per size\n\nEach size's `--verify` re-runs (its own K runs, "
        "set beside the smallest effect of that size's comparison table) and `--inspect` reports (its own tuned "
        "runs) are in that size's report.\n\n" + markdown(["size", "re-run check", "what each arm learned"], rows)
    )


def budget_row(size, plan, states, baseline: str, folder: Path) -> list[str]:
    budget = dict(size.budget)
    params = next((s.record["params"]["non_embedding"] for s in states if s.record is not None and s.run.arm == baseline), None)
    steps = budget.get("max_steps", "the recipe's")
    if "max_steps" in budget and params:
        ratio = f"{float(budget['tokens_per_parameter']):g} (reached: {int(steps) * int(budget['tokens_per_step']) / params:.3g})"
    else:
        ratio = budget.get("tokens_per_parameter", "-")
    settings = ", ".join(f"{key}={value}" for key, value in size.settings)
    finished = sum(s.record is not None for s in states)
    return [
        size.label,
        settings,
        count(params) if params else "-",
        ratio,
        budget.get("tokens_per_step", "-"),
        steps,
        budget.get("warmup_steps", "the recipe's"),
        f"{finished}/{len(states)}",
        f"[{folder}]({folder}/results.md)",
    ]


def control_claims(arms: dict[str, dict[str, SizeRuns]], baseline: str, variants: dict[str, str]) -> list[tuple]:
    """Claims against each parameter control: an arm of the baseline's variant whose N is a steady ratio r
    (over the sizes both finished, more than 1% from 1) of the baseline's. Every arm of another variant
    is read against r: m > r says it does at N what the baseline needs r·N for, "beats the baseline with
    r× the parameters". (The control's own m is read against 1 in the multipliers table: its N already
    counts its extra parameters.)"""
    if baseline not in arms:
        return []
    claims = []
    for control, runs in arms.items():
        shared = [s for s in runs if s in arms[baseline]]
        if control == baseline or variants[control] != variants[baseline] or not shared:
            continue
        ratios = [runs[s].params / arms[baseline][s].params for s in shared]
        ratio = sum(ratios) / len(ratios)
        if max(ratios) - min(ratios) > CONTROL_TOLERANCE * ratio or abs(ratio - 1) <= CONTROL_TOLERANCE:
            continue
        claims += [
            (arm, ratio, f"beats `{control}`, `{baseline}` with {ratio - 1:+.1%} parameters")
            for arm in arms
            if variants[arm] != variants[baseline]
        ]
    return claims
