"""Running a sweep's plan: each unfinished run through the launcher the options name (a line per
finished run), the rounds of `--extend-edges`, and the launcher itself (for --verify's re-runs too)."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

from lit_attention.errors import ConfigError
from lit_attention.sweep.launchers import Job, LocalLauncher, SlurmLauncher
from lit_attention.sweep.runs import Plan, Run, clear_failure, find_state, point_label, write_failure


def launch(args, plan: Plan, states: dict, output: Path, extra: list[str]) -> int:
    """Run every unfinished run; print a line per finished one. Returns how many failed."""
    todo = [r for r in plan.runs if not states[r].finished]
    launcher = make_launcher(args, output)
    total, done_before = len(plan.runs), len(plan.runs) - len(todo)
    print(
        f"compare: {total} runs ({len(plan.arms)} arm(s) x {len(plan.points)} grid point(s) x {len(plan.seeds)} seed(s)); "
        f"{done_before} finished earlier, {len(todo)} to run, {launcher.describe()}; output {output}",
        flush=True,
    )
    started, finished, failed = time.perf_counter(), [0], [0]

    def report(job: Job, status: int, last_line: str) -> None:
        run = job.key
        finished[0] += 1
        elapsed = time.perf_counter() - started
        left = elapsed / finished[0] * (len(todo) - finished[0])
        where = f"{run.arm} seed {run.seed} {point_label(run.point)}"
        count = f"[{done_before + finished[0]:>{len(str(total))}}/{total}]"
        if status == 0:
            state = find_state(run, output)
            best = state.record.get("best") if state.record else None
            result = f"best {state.record['monitor']} {best['value']:.4f} at step {best['step']}" if best else "no validation"
            print(f"{count} {where}: {result}; about {_duration(left)} left", flush=True)
        else:
            failed[0] += 1
            write_failure(run, output, status, last_line.removeprefix("error: "))
            print(f"{count} {where}: FAILED (exit {status}): {last_line}; about {_duration(left)} left", flush=True)

    for run in todo:
        clear_failure(run, output)
    jobs = [Job(run, run.command(args.config, extra, output, args.test), run.directory(output) / "compare.log") for run in todo]
    try:
        if jobs:  # nothing to run: no forkserver or SLURM job files either
            launcher.run(jobs, report)
    except KeyboardInterrupt:
        if args.launcher == "slurm":
            print(
                "\ncompare: interrupted. The jobs it submitted keep running (scancel ends them); once they "
                "end, the same command resumes what did not finish.",
                file=sys.stderr,
                flush=True,
            )
        else:
            print(
                "\ncompare: interrupted. Finished runs keep their records; the same command resumes the others "
                "from their last checkpoint.",
                file=sys.stderr,
                flush=True,
            )
        sys.exit(130)
    return failed[0]


def extend_edges(args, plan: Plan, states: dict, output: Path, extra: list[str]) -> int:
    """--extend-edges: while an arm's tuned point sits at an end of a numeric grid axis, add the point one
    step past it for every seed of that arm (selection.extension) and run it, for at most
    --max-extensions rounds. With --report nothing trains: the rounds whose runs are on disk are counted
    again, so the report of a finished sweep rebuilds. Returns how many runs failed."""
    from lit_attention.sweep.planning import check_run
    from lit_attention.stats.selection import cells_of, edge_flags, extension, tuned_points

    failed = 0
    for _ in range(args.max_extensions):
        records = [s.record for s in states.values() if s.record is not None]
        if not records:
            break
        tuned = tuned_points(plan, cells_of(plan, states.values()), records[0]["mode"])
        added: list[Run] = []
        for arm, point in tuned.items():
            points = plan.points_of(arm)
            template = next(r for r in plan.runs if r.arm == arm and r.point == point)
            for edge in edge_flags(point, points):
                beyond = extension(point, edge, points)
                if beyond is None or beyond in points:
                    continue
                try:
                    overrides = extension_overrides(args, template, beyond, extra)
                    runs = [replace(template, point=beyond, seed=seed, overrides=overrides) for seed in plan.seeds]
                    plan.configs[(arm, beyond)] = check_run(args.config, runs[0], extra).resolved
                except ConfigError as error:  # the next value is not one a run can take (batch size 0...)
                    print(f"compare: {arm} stays at the grid's edge: {str(error).rstrip('.')}.", flush=True)
                    continue
                plan.extensions.setdefault(arm, []).append(beyond)
                points = plan.points_of(arm)
                added += runs
        if not added:
            break
        found = {
            r: find_state(r, output, needs_test=args.test and not args.report, wanted=plan.configs[(r.arm, r.point)])
            for r in added
        }
        if args.report and not any(state.finished for state in found.values()):
            for run in added:  # never run: not part of this report
                plan.extensions[run.arm] = [p for p in plan.extensions[run.arm] if p != run.point]
            plan.extensions = {arm: points for arm, points in plan.extensions.items() if points}
            break
        plan.runs += added
        states.update(found)
        if not args.report:
            print(
                f"compare: the tuned choice of {', '.join(sorted({r.arm for r in added}))} sits at the grid's edge; "
                f"running the next point past it.",
                flush=True,
            )
            extension_plan = Plan(
                runs=added,
                arms=list(dict.fromkeys(r.arm for r in added)),
                points=list(dict.fromkeys(r.point for r in added)),
                seeds=plan.seeds,
            )
            failed += launch(args, extension_plan, states, output, extra)
            states.update({r: find_state(r, output) for r in added})
    return failed


def extension_overrides(args, template: Run, point, extra: list[str]) -> tuple[str, ...]:
    """The arm's own arguments at a point past the grid: a parameter-matched arm (`variant~reference`)
    gets the MLP width that matches at that point (a grid of widths or depths changes it), any other arm
    keeps its own."""
    if "~" not in template.arm or not (args.match_parameters or args.add_control):
        return template.overrides
    from lit_attention.sweep.planning import matched_mlp_ratios

    key = (template.variant, template.arm.split("~", 1)[1])
    ratios = matched_mlp_ratios(args, [template.variant], point, extra)
    return (f"--model.init_args.net.mlp_ratio={ratios[key]}",) if key in ratios else template.overrides


def end_sweep(failed: int, skipped: list[str], tables: str) -> None:
    """After the report: each skipped run's sentence and the count of failed runs (whose errors are in
    `tables` of the report) on stderr, and exit status 1 if there were any."""
    for sentence in skipped:
        print(f"compare: {sentence}", file=sys.stderr)
    if failed:
        print(f"{failed} run(s) failed; their errors are in {tables} and in each run's compare.log.", file=sys.stderr)
    if failed or skipped:
        sys.exit(1)


def make_launcher(args, output: Path):
    """The launcher the options name, for the sweep and for its --verify re-runs (SLURM's job files under
    `output`): a re-run goes where its run went, with the same threads or GPUs."""
    if args.launcher == "slurm":
        return SlurmLauncher(
            output / "slurm",
            args.slurm_partition,
            args.slurm_time,
            args.slurm_gpus_per_node,
            args.slurm_nodes,
            args.slurm_cpus_per_task,
            args.slurm_cluster,
        )
    return LocalLauncher(args.parallel, args.devices_per_run, fresh=args.fresh_processes)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
