"""Where `compare` runs its `lit-attention fit` commands: here, N at a time, or as SLURM jobs.

Both launchers run exactly the command `Run.command` builds (lit_attention/sweep/runs.py) and report
each finished run (its exit status and the last line it printed) through a callback, as it finishes.

* `LocalLauncher`: `parallel` runs at a time. On CPU the cores are split between them (OMP_NUM_THREADS
  and torch's threads: usable cores / parallel each, which also keeps every run's arithmetic the same from one
  sweep to the next), and on Linux each run is forked from a multiprocessing forkserver that imported
  torch and Lightning once (lit_attention/sweep/preload.py) instead of being a new interpreter that
  spends seconds importing them; `run_forked` is what such a child runs. With GPUs each run is a new
  process (CUDA cannot be used in a forked child once initialised, and GPU runs are long enough for
  imports not to matter) with its own `devices_per_run` of the visible GPUs (CUDA_VISIBLE_DEVICES) and
  `--trainer.devices` to match, so a run may itself be DDP; `fresh=True` (--fresh-processes) starts CPU
  runs that way too. Every process of a local sweep dies with its parent (`die_with_parent`), so a
  killed sweep leaves no run behind holding its directory. Inside a SLURM allocation a local run is
  not one of SLURM's tasks, so its environment loses the SLURM variables (`local_environment`).
  SIGTERM (a preempted sweep) is passed on to the runs in progress, which save their step and exit
  143; the sweep reports them and exits 143 too.
* `SlurmLauncher`: one SLURM job per run through submitit; a multi-node run is one job of
  `nodes x gpus_per_node` tasks, each running the command, which Lightning's SLURM environment joins
  into one DDP run. `cluster="local"` runs the same jobs with submitit's local executor (tests, CI).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import runpy
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lit_attention.errors import ConfigError

Done = Callable[["Job", int, str], None]  # (job, exit status, last line of its output)
PARENT = "LIT_ATTENTION_PARENT"  # in the processes of a local sweep: the pid of the process each dies with
# The one SLURM variable a local run keeps: it names the allocation the sweep ran in, and Lightning reads
# it only once it has taken the process for a SLURM task, which it no longer does without the others.
SLURM_KEPT = ("SLURM_JOB_ID",)


@dataclass
class Job:
    key: object  # the sweep's handle for the run
    command: list[str]
    log: Path  # where the run's output goes (appended)


def last_line(log: Path) -> str:
    """The last line a run printed that says something (its one-sentence error, say)."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    errors = [line for line in lines if line.startswith("error:")]
    return (errors or lines or [""])[-1][:500]


def die_with_parent() -> None:
    """Called first by every `lit-attention` process (lit_attention/main.py) and by the forkserver
    (preload.py). In a process of a local sweep (PARENT set), Linux is asked to SIGKILL it when its
    parent ends (PR_SET_PDEATHSIG), since a sweep killed with SIGKILL cleans up nothing itself; it exits
    at once if the parent has already ended, and passes the request on to its own children (the runs
    the forkserver forks; a DDP run's other ranks, which Lightning starts)."""
    parent = os.environ.get(PARENT)
    if not parent or not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != int(parent):  # it ended before the line above: nothing would end this process
        print("error: the sweep this process belongs to has ended.", file=sys.stderr, flush=True)
        os._exit(1)
    os.environ[PARENT] = str(os.getpid())


def local_environment(environment: dict[str, str]) -> dict[str, str]:
    """The environment of a run this machine starts itself: without SLURM's variables (but its job
    id), since Lightning takes a process that has SLURM_NTASKS for one of SLURM's tasks and then takes
    its rank, node and device count from SLURM (a 2-device run in a 1-task step is refused), and
    reads a rank from SLURM_PROCID."""
    return {name: value for name, value in environment.items() if not name.startswith("SLURM_") or name in SLURM_KEPT}


def run_forked(command: list[str], log: str, threads: int, environment: dict[str, str]) -> None:
    """In a child of the forkserver: become `command` (`python -m <module> <words>`) writing to `log`.
    runpy runs the module with the run's sys.argv and __main__, from which Lightning's DDP launcher
    starts a run's other ranks; the exit status is an interpreter's (multiprocessing's: SystemExit's
    code, 1 after an uncaught error's traceback)."""
    import torch  # imported by the forkserver already

    output = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.close(output)
    # The sweep's environment as it is now (the forkserver keeps the one it started with), plus the
    # thread count a fresh process gets; PARENT stays the forkserver's, which this run dies with.
    parent = {PARENT: os.environ[PARENT]} if PARENT in os.environ else {}
    os.environ.clear()
    os.environ.update(environment, OMP_NUM_THREADS=str(threads), **parent)
    torch.set_num_threads(threads)
    sys.argv = [command[0], *command[3:]]
    runpy.run_module(command[2], run_name="__main__", alter_sys=True)


def usable_cores() -> int:
    """The cores this sweep's runs share: the process's CPU affinity (a container's or SLURM's share, where
    os.cpu_count() counts the whole machine), at most OMP_NUM_THREADS when that is already set (a budget
    given from outside, such as a test runner's worker): more threads than cores only spin."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    budget = os.environ.get("OMP_NUM_THREADS", "")
    return min(cores, int(budget)) if budget.isdigit() and int(budget) > 0 else cores


class LocalLauncher:
    def __init__(self, parallel: int = 1, devices_per_run: int = 1, fresh: bool = False) -> None:
        self.parallel, self.devices_per_run = parallel, devices_per_run
        import torch

        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        count = torch.cuda.device_count()
        self.gpus = [g for g in visible.split(",") if g.strip()][:count] if visible else [str(i) for i in range(count)]
        if self.gpus and parallel * devices_per_run > len(self.gpus):
            raise ConfigError(
                f"--parallel {parallel} x --devices-per-run {devices_per_run} needs "
                f"{parallel * devices_per_run} GPUs but {len(self.gpus)} are visible; run fewer at a time."
            )
        # Forking needs fork() that is safe with the libraries loaded (Linux's).
        self.fork = sys.platform.startswith("linux") and not self.gpus and not fresh

    def describe(self) -> str:
        if self.gpus:
            return f"{self.parallel} at a time, {self.devices_per_run} GPU(s) each"
        started = "forked from a process that imported Lightning once" if self.fork else "a fresh process each"
        processes = f", {self.devices_per_run} DDP processes each" if self.devices_per_run > 1 else ""
        return f"{self.parallel} at a time{processes}, {self.threads()} CPU thread(s) a process, {started}"

    def threads(self) -> int:
        """Each CPU process's threads: the cores shared out over every process of the runs at once."""
        return max(1, usable_cores() // (self.parallel * self.devices_per_run))

    def run(self, jobs: list[Job], done: Done) -> None:
        if self.fork:
            start_forkserver()
        pending, running = list(jobs), {}  # slot -> (job, its process: a multiprocessing.Process or a Popen)
        installed, previous = _raise_on_sigterm()
        try:
            while pending or running:
                for slot in range(self.parallel):
                    if slot not in running and pending:
                        job = pending.pop(0)
                        job.log.parent.mkdir(parents=True, exist_ok=True)
                        with open(job.log, "a") as log:
                            log.write(f"$ {' '.join(job.command)}\n")
                        running[slot] = (job, self.start(job, slot))
                time.sleep(0.2)
                for slot, (job, process) in list(running.items()):
                    status = _status(process)
                    if status is not None:
                        del running[slot]
                        done(job, status, last_line(job.log))
        except Terminated:
            # A preempted sweep: each run gets the signal too, saves its step and exits 143 (not done).
            for _, process in running.values():
                process.terminate()
            deadline = time.monotonic() + SIGTERM_GRACE_SECONDS
            while running and time.monotonic() < deadline:
                time.sleep(0.1)
                for slot, (job, process) in list(running.items()):
                    if (status := _status(process)) is not None:
                        del running[slot]
                        done(job, status, last_line(job.log))
            for _, process in running.values():
                process.kill()
            print(
                "compare: stopped by SIGTERM; the runs it stopped kept their last checkpoint, and the same command resumes them.",
                file=sys.stderr,
                flush=True,
            )
            raise
        except BaseException:  # Ctrl-C, say: no run outlives the sweep
            for _, process in running.values():
                process.kill()
            raise
        finally:
            if installed:
                signal.signal(signal.SIGTERM, previous)

    def start(self, job: Job, slot: int):
        if self.fork and job.command[:2] == [sys.executable, "-m"]:
            process = multiprocessing.get_context("forkserver").Process(
                target=run_forked, args=(job.command, str(job.log), self.threads(), local_environment(dict(os.environ)))
            )
            process.start()
            return process
        env = {**local_environment(dict(os.environ)), PARENT: str(os.getpid())}
        if self.gpus:
            first = slot * self.devices_per_run
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus[first : first + self.devices_per_run])
        else:
            env["OMP_NUM_THREADS"] = str(self.threads())
        with open(job.log, "a") as log:  # the child keeps its own copy
            return subprocess.Popen(job.command, stdout=log, stderr=subprocess.STDOUT, env=env)


SIGTERM_GRACE_SECONDS = 120  # for the runs to finish their step and write last.ckpt, then they are killed


class Terminated(SystemExit):
    """SIGTERM reached a local sweep; it exits with the status a run stopped by SIGTERM has (143)."""

    def __init__(self) -> None:
        super().__init__(128 + signal.SIGTERM)


def _raise_on_sigterm() -> tuple[bool, object]:
    """Make SIGTERM raise Terminated in this (main) thread: (whether it was done, the handler to put back)."""

    def handler(signum, frame):
        raise Terminated

    try:
        return True, signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread, where no signal handler can be set
        return False, None


def _status(process) -> int | None:
    return process.poll() if isinstance(process, subprocess.Popen) else process.exitcode


def start_forkserver() -> None:
    """Start this process's multiprocessing forkserver, if it is not running yet: it imports
    preload.py, and dies with this process (PARENT, in its environment only)."""
    import multiprocessing.forkserver  # Unix only

    multiprocessing.get_context("forkserver").set_forkserver_preload(["lit_attention.sweep.preload"])
    os.environ[PARENT] = str(os.getpid())
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        del os.environ[PARENT]


class SlurmLauncher:
    """Submits every run as a SLURM job (or a local job with cluster="local") and waits for them."""

    def __init__(
        self,
        folder: Path,
        partition: str | None = None,
        time_min: int = 60,
        gpus_per_node: int = 0,
        nodes: int = 1,
        cpus_per_task: int | None = None,
        cluster: str = "slurm",
    ) -> None:
        import shutil

        import submitit

        if cluster == "slurm" and shutil.which("sbatch") is None:
            raise ConfigError(
                "--launcher slurm needs SLURM (sbatch is not on PATH here); run compare on a login "
                "node, or use --slurm-cluster local to run the same jobs on this machine."
            )
        self.executor = submitit.AutoExecutor(folder=folder, cluster=cluster)
        tasks = max(1, gpus_per_node)  # one process per GPU: Lightning's SLURM environment expects that
        parameters = {
            "timeout_min": time_min,
            "nodes": nodes,
            "tasks_per_node": tasks,
            "gpus_per_node": gpus_per_node,
            "name": "lit-attention",
        }
        if cpus_per_task:
            parameters["cpus_per_task"] = cpus_per_task
        if partition and self.executor.cluster == "slurm":
            parameters["slurm_partition"] = partition
        self.executor.update_parameters(**parameters)
        self.nodes, self.tasks = nodes, tasks

    def describe(self) -> str:
        return f"{self.executor.cluster} jobs of {self.nodes} node(s) x {self.tasks} task(s)"

    def run(self, jobs: list[Job], done: Done) -> None:
        import submitit

        submitted = []
        for job in jobs:
            job.log.parent.mkdir(parents=True, exist_ok=True)
            function = submitit.helpers.CommandFunction(job.command, verbose=False)
            submitted.append((job, self.executor.submit(function)))
        while submitted:
            time.sleep(1.0)
            for entry in list(submitted):
                job, handle = entry
                if not handle.done():
                    continue
                submitted.remove(entry)
                status, output = 0, ""
                try:
                    output = handle.result() or ""
                except Exception as error:  # noqa: BLE001  (a failed job: its error text is the report)
                    status, output = 1, str(error)
                with open(job.log, "a") as log:
                    log.write(f"$ {' '.join(job.command)}\n{output}\n")
                done(job, status, last_line(job.log))
