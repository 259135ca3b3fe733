"""`compare --inspect`: `lit-attention inspect` on one tuned run of every arm, and the side-by-side
figure beside the tables (lit_attention/analysis). The reports go to `<output>/inspect/`, never into
the runs' own folders."""

from __future__ import annotations

import json
from pathlib import Path

from lit_attention.sweep.output_dir import INSPECT
from lit_attention.sweep.runs import RunState, slug
from lit_attention.stats.selection import cells_of, tuned_points

WHICH = "runs.json"  # which run of each arm the reports are of


def inspect_arms(plan, states: list[RunState], output: Path, batches: int = 8, report: Path | None = None) -> Path | None:
    """Inspect each arm's run of the lowest finished seed at its tuned grid point (into
    `<report>/inspect/<arm>/`) and write `<report>/inspect/compare.md` and `compare.png` across them.
    `output`: the sweep's, where the runs are; `report`: the folder of the report that links them (the
    sweep's output, or a size's folder under --scale). Returns compare.md's path, or None when no run has
    finished."""
    from lit_attention.analysis import compare_runs, inspect_run

    chosen = inspected_runs(plan, states)
    if not chosen:
        return None
    into = Path(report or output) / INSPECT
    folders = []
    for arm, run in chosen.items():
        folder = into / slug(arm)
        size = f"size {run.size}, " if run.size else ""
        print(f"compare: inspecting {arm} ({size}seed {run.seed}, {run.point_label})", flush=True)
        inspect_run(run.directory(output), output=folder, batches=batches, progress=False)
        folders.append(folder)
    path = compare_runs(folders, into, batches=batches, labels=list(chosen))
    (into / WHICH).write_text(json.dumps(which(chosen), indent=1) + "\n")
    return path


def inspected_runs(plan, states: list[RunState]) -> dict:
    """{arm: the run --inspect looks at}: the lowest finished seed at the arm's tuned point."""
    finished = [s for s in states if s.record is not None]
    if not finished:
        return {}
    cells = cells_of(plan, states)
    chosen = {}
    for arm, point in tuned_points(plan, cells, finished[0].record["mode"]).items():
        done = sorted((s for s in cells[(arm, point)].states if s.record is not None), key=lambda s: s.run.seed)
        chosen[arm] = done[0].run
    return chosen


def which(chosen: dict) -> dict:
    return {arm: {"point": run.point_label, "seed": run.seed} for arm, run in chosen.items()}


def inspection_section(plan, states: list[RunState], output: Path) -> str:
    """The report's link to what `--inspect` wrote, when it is on disk and still about the runs this
    report would inspect (a later seed or grid point can change an arm's tuned run)."""
    folder = Path(output) / INSPECT
    if not (folder / "compare.md").is_file():
        return ""
    kept = json.loads((folder / WHICH).read_text()) if (folder / WHICH).is_file() else None
    if kept != which(inspected_runs(plan, states)):
        return (
            "## What each arm learned\n\nThe reports in `inspect/` are of other runs than the tuned runs of this "
            "report (its tuned points or seeds have changed since): run the command again with --inspect.\n"
        )
    return (
        "## What each arm learned\n\n`lit-attention inspect` on each arm's tuned run of its first finished seed, "
        "on held-out batches (--inspect): per layer, the attention's entropy, mean distance and weight on the "
        "diagonal and first token, and W_A's distance from the identity where an arm has one. The table and each "
        f"arm's own report: [inspect/compare.md]({INSPECT}/compare.md).\n\n![what each arm learned]({INSPECT}/compare.png)\n"
    )
