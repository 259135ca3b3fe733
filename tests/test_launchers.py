"""compare's local launcher: a run forked from a warm worker is the run a fresh process makes, with
the same exit status, output and (for DDP) the same second rank."""

import json
import sys
from pathlib import Path

import pytest

from lit_attention.sweep.launchers import LIT_ATTENTION, Job, LocalLauncher
from lit_attention.training.records import RECORD

ROOT = Path(__file__).resolve().parents[1]
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
TINY = ["--trainer.max_epochs=2", "--trainer.limit_train_batches=4", "--trainer.limit_val_batches=2",
        "--model.dim=32", "--model.depth=1", "--trainer.enable_progress_bar=false", "--seed_everything=3",
        "--trainer.accelerator=cpu"]
WHERE_AND_HOW_LONG = ("run_dir", "train_seconds", "train_samples_per_second", "wall_seconds")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm workers fork: Linux only")


def fit(root: Path, *extra: str) -> list[str]:
    return [*LIT_ATTENTION, "fit", "--config", VIT, *TINY, f"--run.root={root}", "--run.name=run", *extra]


def launch(launcher: LocalLauncher, commands: list[list[str]], logs: Path) -> list[tuple[int, str]]:
    """Each command's (exit status, last line), in the order given."""
    finished = {}
    jobs = [Job(i, command, logs / f"{i}.log") for i, command in enumerate(commands)]
    launcher.run(jobs, lambda job, status, line: finished.__setitem__(job.key, (status, line)))
    return [finished[i] for i in range(len(jobs))]


def record(root: Path) -> dict:
    [path] = root.glob(f"**/{RECORD}")
    found = json.loads(path.read_text())
    return {key: value for key, value in found.items() if key not in WHERE_AND_HOW_LONG}


@pytest.mark.slow
def test_runs_forked_from_a_warm_worker_equal_fresh_processes(tmp_path):
    warm_launcher, fresh_launcher = LocalLauncher(parallel=1, warm=True), LocalLauncher(parallel=1, warm=False)
    warm = launch(warm_launcher,
                  [fit(tmp_path / "warm"), fit(tmp_path / "refused", "--model.init_args.attention=nope"),
                   fit(tmp_path / "warm_again", "--model.init_args.lr=2e-3")], tmp_path / "warm_logs")
    fresh = launch(fresh_launcher, [fit(tmp_path / "fresh"), fit(tmp_path / "fresh_again", "--model.init_args.lr=2e-3")],
                   tmp_path / "fresh_logs")
    assert (warm_launcher.workers_started, fresh_launcher.workers_started) == (1, 0)
    assert [status for status, _ in warm] == [0, 2, 0] and [status for status, _ in fresh] == [0, 0]
    assert warm[1][1].startswith("error: ") and "'nope'" in warm[1][1]  # the one sentence, in that run's log
    # One worker ran all three: a run leaves nothing behind for the next (seeds, settings, state).
    assert record(tmp_path / "warm") == record(tmp_path / "fresh")
    assert record(tmp_path / "warm_again") == record(tmp_path / "fresh_again") != record(tmp_path / "warm")
    log = (tmp_path / "warm_logs" / "0.log").read_text()
    assert log.startswith(f"$ {' '.join(fit(tmp_path / 'warm'))}\n") and "Run directory:" in log


@pytest.mark.slow
def test_a_ddp_run_from_a_warm_worker_starts_its_second_rank(tmp_path):
    launcher = LocalLauncher(parallel=1, warm=True)
    [(status, line)] = launch(launcher, [fit(tmp_path, "--trainer.devices=2", "--trainer.strategy=ddp")],
                              tmp_path / "logs")
    assert status == 0 and launcher.workers_started == 1, line
    found = record(tmp_path)
    assert found["optimizer_steps"] == 2 * 4 and found["samples_seen"] == 2 * 4 * 64 * 2  # both ranks' batches
