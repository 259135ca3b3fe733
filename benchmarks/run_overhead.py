"""The fixed cost of one run of a scorecard, by phase: the wall time of a run as compare starts it (forked
from the forkserver that imported torch and Lightning once) minus the time of its optimizer steps.

    .venv/bin/python benchmarks/run_overhead.py                 # every task of protocol v1, standard, seed 0
    .venv/bin/python benchmarks/run_overhead.py --task mqar_4 --repeats 3

Each run is the `lit-attention fit` command compare builds for the task's `standard` arm at its reference
budget (sweep.runs.Run.command), forked from a forkserver that preloads what compare's preloads, into a
temporary folder. Inside the run, the benchmark times these phases (wall clock, each phase's own time,
nested phases taken out of the one around them):

  start-up      from the fork to `Trainer.fit`: the command line, the recipe, the model, the run folder
  data          the data module's prepare_data and setup, and the first build of each data loader
  sanity        Lightning's sanity check (two validation batches before training)
  steps         the optimizer steps: the record's train_seconds without the FLOP counting inside it
  flops         counting a step's FLOPs (torch's FlopCounterMode on a meta copy, once per batch shape)
  loop          the rest of the training loop: fetching batches between steps, logging, the schedule
  validation    the validations during training
  checkpoints   writing last.ckpt and the best checkpoints
  test          scoring the best checkpoint on the test split (loading it included)
  record        the record, the per-example outcomes and what else follows fit
  exit          from the end of `main` to the process's end (closing loggers, the interpreter's exit)

The fixed cost is the run's wall time minus `steps`, as the issue that asked for it defines it: validation
and the test are in it, though their arithmetic is the protocol's (how often it validates, what it tests). Times vary with the machine's load; run it on an idle
machine and say which.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("start-up", "data", "sanity", "steps", "flops", "loop", "validation", "checkpoints", "test", "record", "exit")


def fit_command(task_name: str, output: Path) -> list[str]:
    """compare's command for the task's `standard` run, seed 0, at the reference budget."""
    from lit_attention.scorecard.plan import config_path, fit_arguments
    from lit_attention.scorecard.protocol import load_protocol
    from lit_attention.sweep.runs import Run

    task = next(t for t in load_protocol("v1").tasks if t.name == task_name)
    settings = dict(task.settings)
    if task.ladder is not None:
        settings.update(task.ladder.settings_at(task.ladder.reference))
    run = Run(arm="standard", variant="standard", point=(), seed=0)
    return run.command([config_path(task.recipe)], fit_arguments(settings), output, test=True)


class Clock:
    """Each phase's own wall time: time spent in a nested phase is counted there, not in the phase around it."""

    def __init__(self) -> None:
        self.spent = dict.fromkeys(PHASES, 0.0)
        self.stack: list[tuple[str, float]] = []

    def wrap(self, owner, name: str, phase, then: str | None = None) -> None:
        original = getattr(owner, name)
        clock = self

        @functools.wraps(original)  # LightningCLI reads fit's and test's signatures for their options
        def timed(*args, **kwargs):
            label = phase(args[0]) if callable(phase) else phase
            clock.enter(label)
            try:
                return original(*args, **kwargs)
            finally:
                clock.leave(then)

        setattr(owner, name, timed)

    def enter(self, label: str) -> None:
        now = time.perf_counter()
        if self.stack:
            outer, since = self.stack[-1]
            self.spent[outer] += now - since
        self.stack.append((label, now))

    def leave(self, then: str | None = None) -> None:
        """End the innermost phase; `then` renames the phase around it from here on."""
        now = time.perf_counter()
        label, since = self.stack.pop()
        self.spent[label] += now - since
        if self.stack:
            self.stack[-1] = (then or self.stack[-1][0], now)


def evaluation_phase(loop) -> str:
    trainer = loop.trainer
    return "sanity" if trainer.sanity_checking else "test" if trainer.testing else "validation"


def timed_run(command: list[str], log: str, threads: int, forked_at: float, report: str) -> None:
    """In the forked child: time the run's phases, run it as compare's launcher does, write the times."""
    import lightning.pytorch as L
    from lightning.pytorch.loops import _EvaluationLoop, _FitLoop
    from lightning.pytorch.trainer import call
    from lightning.pytorch.trainer.connectors.data_connector import _DataConnector

    import lit_attention.training.cli as cli
    from lit_attention.sweep.launchers import run_forked
    from lit_attention.training.tasks.base import TaskModule

    clock = Clock()
    clock.enter("start-up")
    clock.spent["start-up"] += time.perf_counter() - forked_at  # the fork itself
    clock.wrap(L.Trainer, "fit", "loop", then="record")  # what follows fit is the record's bookkeeping
    clock.wrap(_DataConnector, "prepare_data", "data")
    clock.wrap(call, "_call_setup_hook", "data")
    clock.wrap(_FitLoop, "setup_data", "data")
    clock.wrap(_EvaluationLoop, "setup_data", "data")
    clock.wrap(_EvaluationLoop, "run", evaluation_phase)
    clock.wrap(L.Trainer, "save_checkpoint", "checkpoints")
    clock.wrap(L.Trainer, "test", "test")
    clock.wrap(cli, "finish_fit", "record")
    clock.wrap(TaskModule, "flops_of", "flops")
    status = 0
    try:
        run_forked(command, log, threads, dict(os.environ))
    except SystemExit as stop:
        status = stop.code or 0
    clock.leave()
    clock.enter("exit")
    Path(report).write_text(json.dumps({"spent": clock.spent, "status": status}))
    # The exit phase is the interval from here to the parent seeing the process end.


def warm_forkserver(context) -> None:
    """Start compare's forkserver and wait for its imports: compare pays them once per sweep, not per run."""
    from lit_attention.sweep.launchers import start_forkserver

    start_forkserver()
    first = context.Process(target=os.getpid)
    first.start()
    first.join()


def measure(task: str, threads: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        output = Path(folder)
        command = fit_command(task, output)
        log, report = str(output / "fit.log"), str(output / "phases.json")
        context = multiprocessing.get_context("forkserver")
        warm_forkserver(context)
        started = time.perf_counter()
        # perf_counter is the system's monotonic clock on Linux: the child's readings compare with these.
        process = context.Process(target=timed_run, args=(command, log, threads, time.perf_counter(), report))
        process.start()
        process.join()
        wall = time.perf_counter() - started
        if process.exitcode != 0 or not Path(report).exists():
            sys.exit(f"the {task} run failed (exit {process.exitcode}); its output: {log}")
        result = json.loads(Path(report).read_text())
        if result["status"] != 0:
            sys.exit(f"the {task} run exited {result['status']}:\n{Path(log).read_text()[-2000:]}")
        spent = result["spent"]
        record = json.loads(next(output.glob("runs/**/record.json")).read_text())
    # The loop's time holds the steps (train_seconds holds the FLOP counting): take them out. The exit is the
    # wall the child did not see itself.
    spent["steps"] = record["train_seconds"] - spent["flops"]
    spent["loop"] -= spent["steps"]
    spent["exit"] = wall - sum(v for k, v in spent.items() if k != "exit")
    return {"wall": wall, "fixed": wall - spent["steps"], "optimizer_steps": record["optimizer_steps"], **spent}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", action="append", help="a task of protocol v1 (repeat; default: every task)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per task; the table gives the median")
    parser.add_argument("--threads", type=int, default=None, help="threads per run (default: the usable cores)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)  # the recipes as a clone names them
    from lit_attention.scorecard.protocol import load_protocol
    from lit_attention.sweep.launchers import usable_cores

    tasks = args.task or [t.name for t in load_protocol("v1").tasks]
    threads = args.threads or usable_cores()
    print(f"threads per run: {threads}; {args.repeats} run(s) per task, median shown; seconds")
    print("| task | steps | run wall | fixed | " + " | ".join(PHASES) + " |")
    print("|---|" + "---|" * (len(PHASES) + 3))
    for task in tasks:
        results = [measure(task, threads) for _ in range(args.repeats)]
        cell = {key: statistics.median(r[key] for r in results) for key in results[0]}
        print(
            f"| {task} | {cell['optimizer_steps']:.0f} | {cell['wall']:.1f} | {cell['fixed']:.1f} | "
            + " | ".join(f"{cell[p]:.2f}" for p in PHASES)
            + " |",
            flush=True,
        )


if __name__ == "__main__":
    main()
