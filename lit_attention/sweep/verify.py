"""`compare --verify K`: reproducibility measured rather than promised. K finished runs, chosen at random
but the same K for the same sweep, are trained again in `<output>/verify/` with exactly the command the
sweep gave them, through the sweep's own launcher; the report then sets each re-run beside its record
(best validation value, test value, the whole validation curve), gives the largest difference beside
the smallest effect the comparison table reports, and says whether the re-runs ran where the records did.

A re-run that already finished in the scratch folder is not trained again (the sweep's resume rules,
`find_state`); the report's section on the re-runs is lit_attention/reports/verification.py.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterable
from pathlib import Path

from lit_attention.errors import ConfigError
from lit_attention.sweep.launchers import Job
from lit_attention.sweep.runs import Plan, Run, RunState, clear_failure, find_state, point_label, write_failure
from lit_attention.stats.selection import best_value

VERIFY = "verify"  # the scratch folder under the sweep's output
# What says where a run ran, as records.provenance names it; a field an older record lacks is "not recorded".
PROVENANCE_FIELDS = ("commit", "dirty", "diff_sha256", "python", "torch", "torch_build", "cpu", "threads", "devices")


def scratch(output: Path) -> Path:
    return Path(output) / VERIFY


def run_order(run: Run) -> tuple:
    return run.arm, point_label(run.point), run.seed


def choose_runs(states: Iterable[RunState], k: int) -> list[Run]:
    """K finished runs, drawn with a fixed seed from the finished runs in (arm, grid point, seed) order:
    the same sweep re-checks the same runs every time it is asked, so its report rebuilds identically."""
    finished = sorted((state.run for state in states if state.finished), key=run_order)
    if k < 0 or k > len(finished):
        raise ConfigError(
            f"--verify {k} is invalid: {len(finished)} run(s) of this sweep are finished; give a number "
            f"from 0 to {len(finished)}."
        )
    return sorted(random.Random(0).sample(finished, k), key=run_order)


def rerun(
    runs: list[Run], plan: Plan, states: dict[Run, RunState], configs: list[str], extra: list[str], output: Path, launcher
) -> int:
    """Train `runs` again under `<output>/verify` with the command the sweep gave each (`Run.command`, with
    --test when its record has test scores), skipping the re-runs finished there already; prints a line
    per re-run as it ends. Returns how many failed."""
    folder = scratch(output)
    tested = {run: states[run].record.get("test") is not None for run in runs}
    todo = [
        run
        for run in runs
        if not find_state(run, folder, needs_test=tested[run], wanted=plan.configs.get((run.arm, run.point))).finished
    ]
    print(
        f"compare --verify: {len(runs)} finished run(s) to re-train in {folder}; {len(runs) - len(todo)} re-trained "
        f"earlier, {len(todo)} to run, {launcher.describe()}",
        flush=True,
    )
    failed = []

    def report(job: Job, status: int, last_line: str) -> None:
        run = job.key
        where = f"{run.arm} seed {run.seed} {run.point_label}"
        if status == 0:
            again, recorded = find_state(run, folder).record or {}, states[run].record
            print(
                f"verify {where}: best {value_text(best_value(again))} (recorded {value_text(best_value(recorded))})", flush=True
            )
        else:
            failed.append(run)
            write_failure(run, folder, status, last_line.removeprefix("error: "))
            print(f"verify {where}: FAILED (exit {status}): {last_line}", flush=True)

    for run in todo:
        clear_failure(run, folder)
    try:
        launcher.run(
            [Job(run, run.command(configs, extra, folder, tested[run]), run.directory(folder) / "compare.log") for run in todo],
            report,
        )
    except KeyboardInterrupt:
        print("\ncompare --verify: interrupted. The same command resumes the re-runs.", file=sys.stderr, flush=True)
        sys.exit(130)
    if failed:
        print(f"{len(failed)} re-run(s) failed; their errors are in {folder}/runs/**/compare.log.", file=sys.stderr)
    return len(failed)


def value_text(value) -> str:
    return "n/a" if value is None else f"{value:.6g}"
