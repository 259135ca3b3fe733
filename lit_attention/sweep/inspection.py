"""`compare --inspect`: `lit-attention inspect` on one tuned run of every arm, and the side-by-side
figure beside the tables (lit_attention/analysis). The reports go to `<output>/inspect/`, never into
the runs' own folders."""

from __future__ import annotations

from pathlib import Path

from lit_attention.sweep.runs import RunState, slug
from lit_attention.sweep.selection import cells_of, tuned_points

INSPECT = "inspect"


def inspect_arms(plan, states: list[RunState], output: Path, batches: int = 8) -> Path | None:
    """Inspect each arm's run of the lowest finished seed at its tuned grid point (into
    `<output>/inspect/<arm>/`) and write `<output>/inspect/compare.md` and `compare.png` across them.
    Returns compare.md's path, or None when no run has finished."""
    from lit_attention.analysis import compare_runs, inspect_run

    finished = [s for s in states if s.record is not None]
    if not finished:
        return None
    cells = cells_of(plan, states)
    folders, labels = [], []
    for arm, point in tuned_points(plan, cells, finished[0].record["mode"]).items():
        done = sorted((s for s in cells[(arm, point)].states if s.record is not None), key=lambda s: s.run.seed)
        folder = Path(output) / INSPECT / slug(arm)
        print(f"compare: inspecting {arm} (seed {done[0].run.seed}, {done[0].run.point_label})", flush=True)
        inspect_run(done[0].run.directory(output), output=folder, batches=batches, progress=False)
        folders.append(folder)
        labels.append(arm)
    return compare_runs(folders, Path(output) / INSPECT, batches=batches, labels=labels)


def inspection_section(output: Path) -> str:
    """The report's link to what `--inspect` wrote, when it is on disk."""
    folder = Path(output) / INSPECT
    if not (folder / "compare.md").is_file():
        return ""
    return ("## What each arm learned\n\n`lit-attention inspect` on each arm's tuned run of its first finished seed, "
            "on held-out batches (--inspect): per layer, the attention's entropy, mean distance and weight on the "
            "diagonal and first token, and W_A's distance from the identity where an arm has one. The table and each "
            f"arm's own report: [inspect/compare.md]({INSPECT}/compare.md).\n\n![what each arm learned]({INSPECT}/compare.png)\n")
