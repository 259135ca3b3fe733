"""compare's local launcher: a run forked from the forkserver is the run a fresh process makes, with
the same record, exit status and output, and (for DDP) the same second rank."""

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lit_attention.sweep.launchers import Job, LocalLauncher, usable_cores
from lit_attention.sweep.runs import LIT_ATTENTION
from lit_attention.training.records import RECORD

ROOT = Path(__file__).resolve().parents[1]
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
TINY = [
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=4",
    "--trainer.limit_val_batches=2",
    "--model.net.dim=32",
    "--model.net.depth=1",
    "--seed_everything=3",
    "--trainer.accelerator=cpu",
]
WHERE_AND_HOW_LONG = ("run_dir", "train_seconds", "train_samples_per_second", "wall_seconds")
FORKED = multiprocessing.get_context("forkserver").Process
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="runs are forked on Linux only")


def fit(root: Path, *extra: str) -> list[str]:
    return [*LIT_ATTENTION, "fit", "--config", VIT, *TINY, f"--run.root={root}", "--run.name=run", *extra]


def launch(launcher: LocalLauncher, commands: list[list[str]], logs: Path, monkeypatch) -> list[tuple[int, str, type]]:
    """Each command's (exit status, last line, the type of process that ran it), in the order given."""
    finished, kinds = {}, {}
    start = launcher.start

    def start_and_note(job, slot):
        kinds[job.key] = type(process := start(job, slot))
        return process

    monkeypatch.setattr(launcher, "start", start_and_note)
    jobs = [Job(i, command, logs / f"{i}.log") for i, command in enumerate(commands)]
    launcher.run(jobs, lambda job, status, line: finished.__setitem__(job.key, (status, line)))
    return [(*finished[i], kinds[i]) for i in range(len(jobs))]


def record(root: Path) -> dict:
    [path] = root.glob(f"**/{RECORD}")
    found = json.loads(path.read_text())
    return {key: value for key, value in found.items() if key not in WHERE_AND_HOW_LONG}


@pytest.mark.slow
def test_a_forked_run_equals_a_fresh_process(tmp_path, monkeypatch):
    refused = fit(tmp_path / "refused", "--model.init_args.attention=nope")
    forked = launch(LocalLauncher(parallel=1), [fit(tmp_path / "forked"), refused], tmp_path / "forked_logs", monkeypatch)
    [fresh] = launch(LocalLauncher(parallel=1, fresh=True), [fit(tmp_path / "fresh")], tmp_path / "fresh_logs", monkeypatch)
    assert [(status, kind) for status, _, kind in forked] == [(0, FORKED), (2, FORKED)], forked
    assert fresh[0] == 0 and fresh[2] is subprocess.Popen, fresh
    assert forked[1][1].startswith("error: ") and "'nope'" in forked[1][1]  # the one sentence, in that run's log
    assert record(tmp_path / "forked") == record(tmp_path / "fresh")
    log = (tmp_path / "forked_logs" / "0.log").read_text()
    assert log.startswith(f"$ {' '.join(fit(tmp_path / 'forked'))}\n") and "Run directory:" in log


@pytest.mark.slow
def test_a_forked_ddp_run_starts_its_second_rank(tmp_path, monkeypatch):
    [(status, line, kind)] = launch(
        LocalLauncher(parallel=1),
        [fit(tmp_path, "--trainer.devices=2", "--trainer.strategy=ddp")],
        tmp_path / "logs",
        monkeypatch,
    )
    assert status == 0 and kind is FORKED, line
    found = record(tmp_path)
    assert found["optimizer_steps"] == 4 and found["samples_seen"] == 4 * 64 * 2  # both ranks' batches


# What sbatch and srun set in a job step of one task on one node: Lightning's SLURM environment takes
# a process with these for one of SLURM's tasks, and refuses a 2-device run in it.
ONE_SLURM_TASK = {
    "SLURM_NTASKS": "1",
    "SLURM_NTASKS_PER_NODE": "1",
    "SLURM_NNODES": "1",
    "SLURM_JOB_NAME": "sweep",
    "SLURM_JOB_ID": "4242",
    "SLURM_PROCID": "0",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "0",
    "SLURM_NODELIST": "node1",
}
SHOW_SLURM = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('SLURM_')}))"


@pytest.mark.slow
def test_a_local_ddp_run_inside_a_slurm_allocation_is_not_taken_for_a_slurm_task(tmp_path, monkeypatch):
    for name, value in ONE_SLURM_TASK.items():
        monkeypatch.setenv(name, value)
    commands = [fit(tmp_path, "--trainer.devices=2", "--trainer.strategy=ddp"), [sys.executable, "-c", SHOW_SLURM]]
    [(status, line, kind), (shown, seen, started)] = launch(LocalLauncher(parallel=1), commands, tmp_path / "logs", monkeypatch)
    assert status == 0 and kind is FORKED, line
    assert record(tmp_path)["optimizer_steps"] == 4
    # A fresh process gets the same environment: only the job's id, nothing that makes it a task.
    assert shown == 0 and started is subprocess.Popen and json.loads(seen) == {"SLURM_JOB_ID": "4242"}, seen


def test_a_run_ended_by_sigterm_is_reported_with_its_non_zero_status(tmp_path, monkeypatch):
    """compare counts a run as done only by its record; the launcher hands on the status of a run that
    SIGTERM stopped (lit-attention's 143, or -15 for a process the signal killed) so the run is FAILED."""
    commands = [["sh", "-c", "kill -TERM $$"], ["sh", "-c", "echo 'fit stopped on SIGTERM at step 6'; exit 143"]]
    results = launch(LocalLauncher(parallel=2, fresh=True), commands, tmp_path, monkeypatch)
    assert [(status, line) for status, line, _ in results] == [
        (-15, "$ sh -c kill -TERM $$"),
        (143, "fit stopped on SIGTERM at step 6"),
    ]


def test_sigterm_to_the_sweep_reaches_its_runs_which_are_reported_as_they_end(tmp_path):
    """A preempted local sweep passes SIGTERM on to the runs in progress and waits for them (a run
    finishes its step and writes last.ckpt, then exits 143), reports each, and exits 143 itself."""
    import os
    import signal
    import threading
    import time

    # A run that saves and exits 143 on SIGTERM, and ends by itself (exit 0) after about 10 s without one.
    run = "trap 'echo saved at step 6; exit 143' TERM; touch {0}; i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done"
    commands = [["sh", "-c", run.format(tmp_path / f"started_{i}")] for i in range(2)]

    def terminate_when_started() -> None:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"started_{i}").exists() for i in range(2)) and time.monotonic() < deadline:
            time.sleep(0.05)
        handler = getattr(signal.getsignal(signal.SIGTERM), "__qualname__", "")
        if handler.startswith("_raise_on_sigterm"):  # never into pytest itself, if the launcher set no handler
            os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    threading.Thread(target=terminate_when_started, daemon=True).start()
    reported = {}
    jobs = [Job(i, command, tmp_path / f"{i}.log") for i, command in enumerate(commands)]
    with pytest.raises(SystemExit) as exit_:
        LocalLauncher(parallel=2, fresh=True).run(jobs, lambda job, status, line: reported.__setitem__(job.key, (status, line)))
    assert exit_.value.code == 143
    assert reported == {0: (143, "saved at step 6"), 1: (143, "saved at step 6")}  # FAILED in compare's table
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize(
    "budget, parallel, expected", [("1", 1, 1), ("1", 2, 1), ("", 1, None), ("0", 1, None), ("many", 1, None)]
)
def test_runs_share_the_usable_cores_and_an_omp_num_threads_already_set(monkeypatch, budget, parallel, expected):
    """A run gets usable cores / parallel threads: the process's affinity, at most a positive integer
    OMP_NUM_THREADS given from outside (a test runner's worker, a cluster's default). Anything else in
    OMP_NUM_THREADS is no budget."""
    monkeypatch.setenv("OMP_NUM_THREADS", budget)
    cores = len(os.sched_getaffinity(0))
    assert usable_cores() == (expected or cores)
    assert LocalLauncher(parallel).threads() == max(1, (expected or cores) // parallel)


@pytest.mark.slow  # plans the sweep through LightningCLI (about a second)
@pytest.mark.parametrize(
    "layout", [["--devices-per-run", "2"], ["--launcher", "slurm", "--slurm-gpus-per-node", "2", "--slurm-cluster", "local"]]
)
def test_a_sweep_of_multi_process_runs_on_unprepared_token_files_is_refused_before_any_run(layout, in_tmp, capsys):
    """Each run would refuse the token files when it starts (on SLURM once its job has queued): the sweep is
    refused on the node that plans it, before anything is started or submitted."""
    from in_process import run_main

    gpt = str(Path(__file__).resolve().parents[1] / "recipes/quickstart/gpt_stdlib.yaml")
    status = run_main(["compare", "--config", gpt, "--variants", "standard", "--seeds", "1", *layout, "--output", "out"])
    err = capsys.readouterr().err
    assert status == 2, err[-2000:]
    assert "are not prepared yet" in err and "lit-attention prepare --config" in err
    assert not (in_tmp / "out").exists() and not (in_tmp / "data").exists()  # nothing started, submitted or prepared
