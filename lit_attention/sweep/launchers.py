"""Where `compare` runs its `lit-attention fit` commands: here, N at a time, or as SLURM jobs.

Both launchers run exactly the command `sweep.Run.command` builds and report each finished run
(its exit status and the last line it printed) through a callback, as it finishes.

* `LocalLauncher`: `parallel` subprocesses at a time. With GPUs, each gets its own `devices_per_run`
  of the GPUs this process sees (CUDA_VISIBLE_DEVICES) and `--trainer.devices` to match, so a run may
  itself be DDP; on CPU the cores are split between them (OMP_NUM_THREADS), which also keeps every
  run's arithmetic identical from one sweep to the next. On Linux each slot's runs are forked from a
  warm worker that imported Lightning once (lit_attention/sweep/warm_worker.py), not started afresh. Every
  process of a run (a DDP run's other ranks too) dies with its parent (Linux), so a killed sweep
  leaves no run behind holding its directory.
* `SlurmLauncher`: one SLURM job per run through submitit; a multi-node run is one job of
  `nodes x gpus_per_node` tasks, each running the command, which Lightning's SLURM environment joins
  into one DDP run. `cluster="local"` runs the same jobs with submitit's local executor (tests, CI).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lit_attention.errors import ConfigError

Done = Callable[["Job", int, str], None]  # (job, exit status, last line of its output)


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


LIT_ATTENTION = [sys.executable, "-m", "lit_attention"]  # how every run's command starts
WARM_WORKER = "--warm-worker"  # `python -m lit_attention --warm-worker`: lit_attention/sweep/warm_worker.py
DIE_WITH_PARENT = "LIT_ATTENTION_DIE_WITH_PARENT"  # read by lit_attention.main in every process of a run


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies (Linux prctl PR_SET_PDEATHSIG); a no-op elsewhere."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


class LocalLauncher:
    def __init__(self, parallel: int = 1, devices_per_run: int = 1, warm: bool | None = None,
                 worker_log: Path | None = None) -> None:
        self.parallel, self.devices_per_run = parallel, devices_per_run
        self.worker_log = worker_log  # the warm workers' own output (a run's goes to its log); None: stderr
        self.workers_started = 0
        import torch

        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        count = torch.cuda.device_count()
        self.gpus = [g for g in visible.split(",") if g.strip()][:count] if visible else [str(i) for i in range(count)]
        if self.gpus and parallel * devices_per_run > len(self.gpus):
            raise ConfigError(f"--parallel {parallel} x --devices-per-run {devices_per_run} needs "
                              f"{parallel * devices_per_run} GPUs but {len(self.gpus)} are visible; run fewer at a time.")
        # Forking from a warm worker needs fork() that is safe with the libraries loaded (Linux's) and
        # no GPU: CUDA initialised before a fork cannot be used after it, and GPU runs are long enough
        # for their imports not to matter.
        self.warm = sys.platform.startswith("linux") and not self.gpus if warm is None else warm

    def describe(self) -> str:
        if self.gpus:
            return f"{self.parallel} at a time, {self.devices_per_run} GPU(s) each"
        started = "forked from a warm worker" if self.warm else "a fresh process each"
        return f"{self.parallel} at a time, {self.threads()} CPU thread(s) each, {started}"

    def threads(self) -> int:
        return max(1, (os.cpu_count() or 1) // self.parallel)

    def environment(self, slot: int) -> dict[str, str]:
        env = {**os.environ, DIE_WITH_PARENT: "1"}
        if self.gpus:
            first = slot * self.devices_per_run
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus[first : first + self.devices_per_run])
        else:
            env["OMP_NUM_THREADS"] = str(self.threads())
        return env

    def run(self, jobs: list[Job], done: Done) -> None:
        pending, running = list(jobs), {}  # slot -> (job, a handle whose poll() is its exit status or None)
        workers: dict[int, subprocess.Popen] = {}  # slot -> its warm worker
        try:
            while pending or running:
                for slot in range(self.parallel):
                    if slot not in running and pending:
                        job = pending.pop(0)
                        job.log.parent.mkdir(parents=True, exist_ok=True)
                        with open(job.log, "a") as log:
                            log.write(f"$ {' '.join(job.command)}\n")
                        running[slot] = (job, self.start(job, slot, workers))
                time.sleep(0.2)
                for slot, (job, handle) in list(running.items()):
                    status = handle.poll()
                    if status is not None:
                        del running[slot]
                        done(job, status, last_line(job.log))
        except BaseException:  # Ctrl-C, say: as with fresh processes, the runs die with the sweep
            for worker in workers.values():
                worker.kill()
            raise
        finally:
            for worker in workers.values():
                with contextlib.suppress(OSError):
                    worker.stdin.close()  # end of requests: the worker exits
                worker.wait()

    def start(self, job: Job, slot: int, workers: dict[int, subprocess.Popen]):
        words = job.command[len(LIT_ATTENTION):] if job.command[: len(LIT_ATTENTION)] == LIT_ATTENTION else None
        if not self.warm or words is None:
            with open(job.log, "a") as log:  # the child keeps its own copy
                return subprocess.Popen(job.command, stdout=log, stderr=subprocess.STDOUT, env=self.environment(slot))
        if slot not in workers or workers[slot].poll() is not None:
            workers[slot] = self.start_worker(slot)
        return WarmRun(workers[slot], words, job.log, self.worker_log)

    def start_worker(self, slot: int) -> subprocess.Popen:
        self.workers_started += 1
        if self.worker_log is not None:
            self.worker_log.parent.mkdir(parents=True, exist_ok=True)
        # The worker keeps its own copy of the log file; without one it writes to this process's stderr.
        with open(self.worker_log, "a") if self.worker_log else contextlib.nullcontext() as errors:
            return subprocess.Popen([*LIT_ATTENTION, WARM_WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=errors, text=True, env=self.environment(slot))


class WarmRun:
    """A run forked by a warm worker (lit_attention/sweep/warm_worker.py); poll() as `subprocess.Popen`'s."""

    def __init__(self, worker: subprocess.Popen, words: list[str], log: Path, worker_log: Path | None) -> None:
        self.worker, self.log, self.worker_log, self.sent = worker, log, worker_log, True
        try:
            worker.stdin.write(json.dumps({"words": words, "log": str(log)}) + "\n")
            worker.stdin.flush()
        except OSError:  # the worker died since it was last asked
            self.sent = False

    def poll(self) -> int | None:
        if self.sent and not select.select([self.worker.stdout], [], [], 0)[0]:
            return None
        answer = self.worker.stdout.readline() if self.sent else ""
        if not answer:  # the worker itself died: say so where the run's output goes
            where = f"; its output is in {self.worker_log}" if self.worker_log else ""
            with open(self.log, "a") as log:
                log.write(f"error: the warm worker running this run died (exit {self.worker.wait()}){where}.\n")
            return 1
        return json.loads(answer)["status"]


class SlurmLauncher:
    """Submits every run as a SLURM job (or a local job with cluster="local") and waits for them."""

    def __init__(self, folder: Path, partition: str | None = None, time_min: int = 60, gpus_per_node: int = 0,
                 nodes: int = 1, cpus_per_task: int | None = None, cluster: str = "slurm") -> None:
        import shutil

        import submitit

        if cluster == "slurm" and shutil.which("sbatch") is None:
            raise ConfigError("--launcher slurm needs SLURM (sbatch is not on PATH here); run compare on a login "
                              "node, or use --slurm-cluster local to run the same jobs on this machine.")
        self.executor = submitit.AutoExecutor(folder=folder, cluster=cluster)
        tasks = max(1, gpus_per_node)  # one process per GPU: Lightning's SLURM environment expects that
        parameters = {"timeout_min": time_min, "nodes": nodes, "tasks_per_node": tasks,
                      "gpus_per_node": gpus_per_node, "name": "lit-attention"}
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
