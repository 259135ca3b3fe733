"""Reliability as a user meets it: a killed run resumes exactly, a kill mid-write never corrupts a
checkpoint, bad input fails in one sentence, a NaN loss stops the run and keeps the last good
checkpoint, and runs are reproducible and never write into each other's directories."""

import contextlib
import inspect
import io
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import datasets
import huggingface_hub
import lightning as L
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.data import DataLoader

from datamodules import LanguageModelingDataModule
from datamodules.loaders import make_loader
from lit_attention.training.checkpointing import LastCheckpoint, atomic_save
from lit_attention.main import main
from lit_attention.errors import ConfigError
from lit_attention.training.records import TIMING_FIELDS, read_record
from lit_attention.training.run_dirs import claim_new_version
from lit_attention.training.tasks import CausalLanguageModel, ImageClassifier
from in_process import OFFLINE, RUN_VARIABLES, process_state_kept, run_main  # tests/ is on sys.path under pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "lit_attention"]
GPT = str(ROOT / "recipes/quickstart/gpt_stdlib.yaml")
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
SMALL = dict(dim=32, depth=1, num_heads=4)
QUIET = ["--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false", "--trainer.log_every_n_steps=1"]
# ThroughputMonitor's counters restart with each process and its rates are wall-clock: never compared.
TIMING_TAGS = tuple(
    f"{stage}/{name}" for stage in ("train", "validate") for name in ("device/", "time", "batches", "samples", "lengths", "flops")
)


def gpt_args(data_dir) -> list[str]:
    """A 32-wide, 1-layer GPT with dropout on 40 stdlib files: 5 batches per epoch, validation every
    4 steps, 12 steps in all (3 epochs, the last one cut short)."""
    return [
        "--config",
        GPT,
        "--trainer.max_steps=12",
        "--model.warmup_steps=2",
        "--data.max_files=40",
        "--data.val_windows=8",
        "--data.max_len=32",
        "--data.batch_size=8",
        "--data.train_windows_per_epoch=40",
        "--trainer.val_check_interval=4",
        "--model.net.dim=32",
        "--model.net.depth=1",
        "--model.net.dropout=0.1",
        "--trainer.deterministic=true",
        f"--data.data_dir={data_dir}",
        *QUIET,
    ]


@pytest.fixture(scope="module")
def lm_data_dir(tmp_path_factory):
    """One token cache for every GPT run of this file, tokenized here once (not by each run at once)."""
    data_dir = tmp_path_factory.mktemp("lm_data")
    LanguageModelingDataModule(max_files=40, max_len=32, data_dir=str(data_dir)).prepare_data()
    return data_dir


def run_here(args: list[str], cwd: Path) -> tuple[int, str]:
    """`lit-attention <args>` in this process, in `cwd`, on one thread like the runs `start` starts
    (bit-exact sums need the same thread count): (exit status, what it wrote to stderr). A run that
    is killed, or that must run beside another, is a process of its own (`start`)."""
    stderr = io.StringIO()
    with process_state_kept(), contextlib.redirect_stderr(stderr):
        os.chdir(cwd)
        os.environ.update(OFFLINE)
        for name in RUN_VARIABLES:
            os.environ.pop(name, None)
        torch.set_num_threads(1)
        status = run_main(args)
    return status, stderr.getvalue()


def run_dirs(root: Path) -> list[Path]:
    return sorted(root.glob("**/seed_*/version_*"))


def load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    events = EventAccumulator(str(run_dir))  # applies TensorBoard's purge of points a resumed run logs again
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)]
        for tag in events.Tags()["scalars"]
        if not tag.startswith(TIMING_TAGS)
    }


def assert_same_tensors(a, b, where="") -> None:
    """Exactly equal nested dicts/lists of tensors and plain values."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same_tensors(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_tensors(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


# ----------------------------------------------------------------------------- hooks the runs below load


class _KillWhenPickled:
    def __reduce__(self):
        os.kill(os.getpid(), signal.SIGKILL)


class _FailWhenPickled:
    def __reduce__(self):
        raise RuntimeError("disk full")


class KillAtStep(L.Callback):
    """SIGKILLs the process right after the optimizer step `step` (before any checkpoint of that step)."""

    def __init__(self, step: int = 7) -> None:
        self.step = step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


class KillWhileSaving(L.Callback):
    """SIGKILLs the process halfway through writing last.ckpt at global step `step` (not the best
    checkpoint, which ModelCheckpoint may write at the same step, just before)."""

    def __init__(self, step: int = 8) -> None:
        self.step = step

    def on_save_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        if trainer.global_step == self.step and any(
            isinstance(frame.frame.f_locals.get("self"), LastCheckpoint) for frame in inspect.stack(context=0)
        ):
            checkpoint["zz_kill"] = _KillWhenPickled()  # pickled last, after the weights


class PoisonWeightsAt(L.Callback):
    """Turns the token embedding into NaN before the batch of global step `step`."""

    def __init__(self, step: int = 5) -> None:
        self.step = step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            with torch.no_grad():
                pl_module.model.token_embed.weight.fill_(float("nan"))


# ----------------------------------------------------------------------------- crash and resume


ONE_THREAD = {"OMP_NUM_THREADS": "1"}  # one core per run; and bit-exact sums need the same thread count


def start(args: list[str], cwd: Path, name: str) -> subprocess.Popen:
    """The CLI in the background, its stderr going to `<cwd>/<name>.stderr`."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        **ONE_THREAD,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    with open(cwd / f"{name}.stderr", "w") as stderr:
        return subprocess.Popen([*CLI, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=stderr)


def finish(cwd: Path, processes: dict[str, subprocess.Popen]) -> dict[str, tuple[int, str]]:
    """{name: (exit status, stderr)} once every process has ended."""
    return {name: (p.wait(timeout=240), (cwd / f"{name}.stderr").read_text()) for name, p in processes.items()}


@pytest.fixture(scope="module")
def gpt_runs(tmp_path_factory, lm_data_dir):
    """Three step-based GPT runs at once (the test machine has few cores): an uninterrupted one and
    one killed while writing a checkpoint, each a process, and one whose loss turns NaN, run in this
    process meanwhile."""
    root = tmp_path_factory.mktemp("gpt")
    args = ["fit", *gpt_args(lm_data_dir)]
    processes = {
        "uninterrupted": start([*args, "--run.checkpoint_every_n_steps=3", "--run.root=a"], root, "uninterrupted"),
        # last.ckpt is written at steps 3 (periodic), 4 (validation), 5 (epoch end), 6 (periodic) and 8
        # (validation): the kill lands inside that last write, in the middle of the second epoch.
        "killed": start(
            [
                *args,
                "--run.checkpoint_every_n_steps=3",
                "--run.root=b",
                "--trainer.callbacks+=test_reliability.KillWhileSaving",
                "--trainer.callbacks.step=8",
            ],
            root,
            "killed",
        ),
    }
    # --ckpt_path last with no earlier run simply starts one (a job script can always pass it).
    nan = run_here(
        [
            *args,
            "--run.checkpoint_every_n_steps=2",
            "--run.root=nan",
            "--ckpt_path=last",
            "--trainer.callbacks+=test_reliability.PoisonWeightsAt",
            "--trainer.callbacks.step=7",
        ],
        root,
    )
    return root, {**finish(root, processes), "nan": nan}


@pytest.mark.slow
def test_killed_run_resumes_to_bit_identical_weights_and_metrics(gpt_runs, lm_data_dir):
    root, results = gpt_runs
    returncode, stderr = results["uninterrupted"]
    assert returncode == 0, stderr[-3000:]
    returncode, stderr = results["killed"]
    assert returncode == -signal.SIGKILL, stderr[-3000:]
    [run_b] = run_dirs(root / "b")
    survivor = load(run_b / "checkpoints/last.ckpt")  # intact and loadable despite the kill mid-write
    assert survivor["global_step"] == 6
    assert survivor["loops"]["fit_loop"]["state_dict"]["combined_loader"] == [{"epoch": 1, "batches": 1}]
    assert list((run_b / "checkpoints").glob(".last.ckpt.*.tmp"))  # what the killed write left behind

    status, stderr = run_here(
        ["fit", *gpt_args(lm_data_dir), "--run.checkpoint_every_n_steps=3", "--run.root=b", "--ckpt_path=last"], root
    )
    assert status == 0, stderr[-3000:]
    assert run_dirs(root / "b") == [run_b]  # continued in place, no new version
    assert not list((run_b / "checkpoints").glob(".*.tmp"))  # and cleaned up
    assert "changed settings: trainer.callbacks" in stderr  # never silently different
    assert (run_b / "config.before_resume_1.yaml").is_file()

    [run_a] = run_dirs(root / "a")
    final_a, final_b = load(run_a / "checkpoints/last.ckpt"), load(run_b / "checkpoints/last.ckpt")
    assert final_a["global_step"] == final_b["global_step"] == 12
    for part in ("state_dict", "optimizer_states", "lr_schedulers"):
        assert_same_tensors(final_a[part], final_b[part], part)
    curves_a, curves_b = scalars(run_a), scalars(run_b)
    for tag in ("val/loss", "val/ppl", "val/acc", "train/loss_step", "train/lr"):
        assert curves_a[tag] == curves_b[tag], tag
    assert [step for step, _ in curves_a["val/loss"]] == [3, 7, 11]
    # The run's record (what compare builds its tables from) is the same too: the curve, the samples
    # seen and the first batch travel with the checkpoints. Only wall-clock times and the path differ.
    records = [read_record(run / "record.json") for run in (run_a, run_b)]
    for record in records:
        for key in (*TIMING_FIELDS, "run_dir", "provenance"):
            record.pop(key)
    assert records[0] == records[1] and len(records[0]["curve"]) == 3 and records[0]["samples_seen"] == 12 * 8


def _save_then_die(path: str, kill: bool, naive: bool) -> None:
    """In a child process: replace the checkpoint at `path`, dying (or failing) halfway through."""
    bomb = _KillWhenPickled() if kill else _FailWhenPickled()
    new = {"weights": torch.full((1000,), 2.0), "zz": bomb}
    (torch.save if naive else atomic_save)(new, path)


@pytest.mark.parametrize("kill", [True, False], ids=["sigkill", "exception"])
def test_a_write_that_dies_halfway_leaves_the_previous_checkpoint_intact(tmp_path, kill):
    target, naive_target = tmp_path / "last.ckpt", tmp_path / "naive.ckpt"
    for path in (target, naive_target):
        atomic_save({"weights": torch.ones(1000)}, path)
    context = multiprocessing.get_context("fork")
    for path, naive in ((target, False), (naive_target, True)):
        child = context.Process(target=_save_then_die, args=(str(path), kill, naive))
        child.start()
        child.join(60)
        assert child.exitcode == (-signal.SIGKILL if kill else 1)
    assert torch.equal(load(target)["weights"], torch.ones(1000))
    if not kill:
        assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt", "naive.ckpt"]  # no temp file left
    with pytest.raises(Exception):  # the same death mid-write ruins a plain torch.save: the test can fail
        load(naive_target)


class CountingDataset(torch.utils.data.Dataset):
    def __init__(self, size: int) -> None:
        self.size, self.loaded = size, []

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> int:
        self.loaded.append(i)
        return i


@pytest.mark.parametrize("num_workers", [0, 2])
def test_training_loader_resumes_mid_epoch_without_loading_the_skipped_batches(num_workers, monkeypatch):
    monkeypatch.setenv("PL_GLOBAL_SEED", "3")
    original = make_loader(CountingDataset(40), batch_size=4, num_workers=num_workers, shuffle=True)
    original.sampler.set_epoch(2)
    batches = iter(original)
    served = [next(batches).tolist() for _ in range(3)]
    state = original.state_dict()
    assert state == {"epoch": 2, "batches": 3}
    rest = [b.tolist() for b in batches]

    resumed = make_loader(CountingDataset(40), batch_size=4, num_workers=0, shuffle=True)
    resumed.load_state_dict(state)
    resumed.sampler.set_epoch(2)  # what Lightning does before the epoch's first batch
    assert [b.tolist() for b in resumed] == rest
    assert sorted(resumed.dataset.loaded) == sorted(i for batch in rest for i in batch)  # skipped ones never read
    assert resumed.state_dict() == {"epoch": 2, "batches": 10}
    assert sorted(i for batch in served + rest for i in batch) == list(range(40))

    resumed.load_state_dict(state)
    resumed.sampler.set_epoch(3)  # a checkpoint from an epoch that is over: the next one starts whole
    assert len(list(resumed)) == 10


def _lm_items(count: int):
    starts = torch.arange(count) % 40
    return [((s + 3 * torch.arange(13)) % 40)[:-1] for s in starts], [((s + 3 * torch.arange(13)) % 40)[1:] for s in starts]


class RecordingLastCheckpoint(LastCheckpoint):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.saved_at: list[int] = []

    def save(self, trainer) -> None:
        if trainer.global_step != self._saved_at_step:
            self.saved_at.append(trainer.global_step)
        super().save(trainer)


@pytest.mark.parametrize(
    "schedule, expected",
    [
        # step-based: periodic 3, 6, 9; after validations 4, 8, 12; after each epoch's last batch 5, 10
        (dict(max_steps=12, val_check_interval=4, check_val_every_n_epoch=None), [3, 4, 5, 6, 8, 9, 10, 12]),
        # epoch-based: periodic 3, 6, 9 (but not on an epoch's last batch); epoch ends 5, 10
        (dict(max_epochs=2), [3, 5, 6, 9, 10]),
    ],
    ids=["step-based", "epoch-based"],
)
@pytest.mark.slow
def test_last_checkpoint_is_written_every_n_steps_after_validations_and_at_epoch_ends(schedule, expected, tmp_path):
    inputs, targets = _lm_items(20)
    data = list(zip(inputs, targets))
    last = RecordingLastCheckpoint(every_n_steps=3, dirpath=str(tmp_path))
    trainer = L.Trainer(
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[last],
        num_sanity_val_steps=0,
        limit_val_batches=1,
        **schedule,
    )
    model = CausalLanguageModel(net=dict(vocab_size=40, max_len=12, **SMALL), warmup_steps=1)
    trainer.fit(
        model, make_loader(data, batch_size=4, num_workers=0, shuffle=True), make_loader(data, batch_size=4, num_workers=0)
    )
    assert last.saved_at == expected
    assert load(tmp_path / "last.ckpt")["global_step"] == expected[-1]


@pytest.mark.slow
def test_last_checkpoint_knows_the_best_checkpoint_chosen_at_the_same_epoch_end(tmp_path):
    """ModelCheckpoint chooses its checkpoint at an epoch's end too; last.ckpt is written after that choice,
    so a resumed run (or `compare --test` on a finished one) finds the best checkpoint that is on disk."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    inputs, targets = _lm_items(20)
    data = list(zip(inputs, targets))
    newest = ModelCheckpoint(dirpath=tmp_path, monitor=None, save_top_k=1, filename="{epoch}-{step}")  # each epoch's
    trainer = L.Trainer(
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[newest, LastCheckpoint(every_n_steps=None)],
        num_sanity_val_steps=0,
        limit_val_batches=1,
        max_epochs=2,
    )
    model = CausalLanguageModel(net=dict(vocab_size=40, max_len=12, **SMALL), warmup_steps=1)
    trainer.fit(model, make_loader(data, batch_size=4, num_workers=0), make_loader(data, batch_size=4, num_workers=0))
    states = load(tmp_path / "last.ckpt")["callbacks"]
    [recorded] = [state["best_model_path"] for key, state in states.items() if key.startswith("ModelCheckpoint")]
    assert recorded == newest.best_model_path == str(tmp_path / "epoch=1-step=10.ckpt")
    assert Path(recorded).exists()


# ----------------------------------------------------------------------------- numerical faults


@pytest.mark.slow
def test_nan_loss_stops_the_run_naming_the_step_and_keeps_the_last_good_checkpoint(gpt_runs):
    root, results = gpt_runs
    returncode, stderr = results["nan"]
    assert returncode == 3, stderr[-3000:]
    assert "The training loss became nan at global step 7 (epoch 1, batch 2)" in stderr
    assert "last.ckpt' is intact" in stderr and "Traceback" not in stderr
    [run_dir] = run_dirs(root / "nan")
    last = load(run_dir / "checkpoints/last.ckpt")
    assert last["global_step"] == 6
    assert all(torch.isfinite(t).all() for t in last["state_dict"].values())
    assert all(torch.isfinite(t).all() for t in last["optimizer_states"][0]["state"][0].values())


# ----------------------------------------------------------------------------- reproducibility and concurrency


VIT_ARGS = [  # dropout, drop-path, augmentation and shuffling all draw random numbers: the seed must fix every one
    "fit",
    "--config",
    VIT,
    "--trainer.max_epochs=3",
    "--trainer.limit_train_batches=4",
    "--trainer.limit_val_batches=2",
    "--data.batch_size=32",
    "--data.random_affine=true",
    "--model.net.dim=32",
    "--model.net.depth=1",
    "--model.net.dropout=0.1",
    "--model.net.drop_path=0.1",
    "--trainer.deterministic=true",
    "--run.checkpoint_every_n_steps=2",
    *QUIET,
]


@pytest.fixture(scope="module")
def vit_runs(tmp_path_factory):
    """Three epoch-based runs started at the same moment: two identical ones into the same root, and
    one killed in the middle of its second epoch (after the periodic checkpoint of step 6)."""
    root = tmp_path_factory.mktemp("vit")
    kill = ["--run.root=killed", "--trainer.callbacks+=test_reliability.KillAtStep", "--trainer.callbacks.step=7"]
    return root, finish(
        root,
        {
            "first": start(VIT_ARGS, root, "first"),
            "second": start(VIT_ARGS, root, "second"),
            "killed": start([*VIT_ARGS, *kill], root, "killed"),
        },
    )


@pytest.mark.slow
def test_two_runs_started_together_get_own_directories_and_identical_metrics(vit_runs):
    root, results = vit_runs
    for returncode, stderr in (results["first"], results["second"]):
        assert returncode == 0, stderr[-3000:]
    first, second = run_dirs(root / "runs")
    assert (first.name, second.name) == ("version_0", "version_1")
    for run_dir in (first, second):
        assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1
        checkpoints = sorted(p.name for p in (run_dir / "checkpoints").glob("*.ckpt"))
        assert len(checkpoints) == 2 and checkpoints[1] == "last.ckpt", checkpoints  # best-*.ckpt and last.ckpt
    curves = scalars(first)
    assert {"val/acc", "val/loss", "train/loss_step"} <= curves.keys()
    assert curves == scalars(second)  # bit-identical floats, every step
    assert_same_tensors(load(first / "checkpoints/last.ckpt")["state_dict"], load(second / "checkpoints/last.ckpt")["state_dict"])


@pytest.mark.slow
def test_epoch_based_run_resumes_mid_epoch_exactly(vit_runs):
    root, results = vit_runs
    returncode, stderr = results["killed"]
    assert returncode == -signal.SIGKILL, stderr[-3000:]
    [killed] = run_dirs(root / "killed")
    survivor = load(killed / "checkpoints/last.ckpt")
    assert survivor["global_step"] == 6  # 4 batches per epoch: 2 batches into the second epoch
    assert survivor["loops"]["fit_loop"]["state_dict"]["combined_loader"] == [{"epoch": 1, "batches": 2}]
    status, stderr = run_here([*VIT_ARGS, "--run.root=killed", "--ckpt_path=last"], root)
    assert status == 0, stderr[-3000:]
    reference = run_dirs(root / "runs")[0]
    final, expected = load(killed / "checkpoints/last.ckpt"), load(reference / "checkpoints/last.ckpt")
    assert final["global_step"] == expected["global_step"] == 12
    for part in ("state_dict", "optimizer_states", "lr_schedulers"):
        assert_same_tensors(final[part], expected[part], part)
    curves, expected_curves = scalars(killed), scalars(reference)
    for tag in ("val/acc", "val/loss", "val/f1_macro", "train/loss_step", "train/lr"):
        assert curves[tag] == expected_curves[tag], tag
    # Epoch averages of training metrics are the one documented exception: the epoch the run died in
    # is averaged over the batches after the resume only (Lightning does not checkpoint those sums).
    assert curves["train/loss_epoch"][0] == expected_curves["train/loss_epoch"][0]


def _claim(base: str) -> int:
    return claim_new_version(base)


@pytest.mark.slow
def test_simultaneous_version_claims_never_collide(tmp_path):
    with multiprocessing.get_context("fork").Pool(8) as pool:
        claimed = pool.map(_claim, [str(tmp_path / "runs")] * 24)
    assert sorted(claimed) == list(range(24))


# ----------------------------------------------------------------------------- bad input: one sentence, early


def _lm_checkpoint(path: Path, **overrides) -> str:
    """A checkpoint (weights and hyper-parameters, as Lightning saves them) of a GPT like gpt_args'."""
    net = dict(vocab_size=256, max_len=32, dim=32, depth=1, num_heads=4) | overrides
    model = CausalLanguageModel(net=net, attention="standard")
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams)}, path)
    return str(path)


def _truncated_checkpoint(path: Path) -> str:
    _lm_checkpoint(path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # what a kill mid-write would leave
    return str(path)


def _garbage(path: Path) -> str:
    path.write_bytes(b"not a checkpoint at all" * 100)
    return str(path)


def _empty_file(path: Path) -> str:
    path.write_text("")
    return str(path)


LOCAL_TEXT = ["--data.dataset=null", "--data.max_files=null"]
# case: (extra arguments given the test's directory, expected words)
BAD_INPUTS = {
    "unknown recipe key": (
        lambda d: ["--config", _write(d / "typo.yaml", "trainer:\n  max_stepz: 3\n")],
        "Option 'trainer.max_stepz' is not accepted",
    ),
    "unknown model key in a recipe": (
        lambda d: ["--config", _write(d / "typo.yaml", "model:\n  init_args:\n    dimm: 3\n")],
        "Option 'dimm' is not accepted by lit_attention.training.tasks.CausalLanguageModel",
    ),
    "missing local file": (
        lambda d: [*LOCAL_TEXT, f"--data.data_files={d}/missing.txt"],
        "missing.txt' (split 'train') does not exist",
    ),
    "empty local file": (
        lambda d: [*LOCAL_TEXT, f"--data.data_files={_empty_file(d / 'empty.txt')}"],
        "empty.txt' (split 'train') is empty",
    ),
    "missing checkpoint": (lambda d: [f"--ckpt_path={d}/nowhere.ckpt"], "nowhere.ckpt' does not exist"),
    "corrupted checkpoint": (lambda d: [f"--ckpt_path={_garbage(d / 'junk.ckpt')}"], "junk.ckpt' cannot be read"),
    "truncated checkpoint": (lambda d: [f"--ckpt_path={_truncated_checkpoint(d / 'half.ckpt')}"], "half.ckpt' cannot be read"),
    "checkpoint of another variant": (
        lambda d: [f"--ckpt_path={_lm_checkpoint(d / 'std.ckpt')}", "--model.attention=residual_query"],
        "attention is 'standard' in the checkpoint but 'residual_query' here",  # same shapes: caught by name
    ),
    "checkpoint of other sizes": (
        lambda d: [f"--ckpt_path={_lm_checkpoint(d / 'wide.ckpt', dim=64)}"],
        "net.dim is 64 in the checkpoint but 32 here",
    ),
    "optimizer override": (lambda d: ["--optimizer=SGD"], "--optimizer is not available: every task builds AdamW"),
    "non-positive learning rate": (lambda d: ["--model.lr=0"], "lr=0.0 is invalid; it must be > 0."),
    # Only found when the data is first loaded (prepare_data), the first expensive step of a run.
    "hub dataset not cached offline": (
        lambda d: ["--data.dataset=roneneldan/TinyStories", "--data.max_files=null", f"--data.hf_cache_dir={d}/hf"],
        "'roneneldan/TinyStories' is not cached and the hub cannot be reached (offline)",
    ),
}
FOUND_WHEN_LOADING = {"hub dataset not cached offline"}


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.mark.filterwarnings("ignore:LightningCLI's args parameter")
@pytest.mark.parametrize("case", list(BAD_INPUTS))
@pytest.mark.slow
def test_bad_input_fails_before_training_with_one_sentence(case, tmp_path, monkeypatch, capsys, lm_data_dir):
    """Through `main`, the console script's entry point, in-process: these fail within a second."""
    make_args, message = BAD_INPUTS[case]
    monkeypatch.chdir(tmp_path)
    # What HF_HUB_OFFLINE=1 makes of the libraries: they read it when imported, possibly before this test.
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    for name in ("LIT_ATTENTION_TRACEBACK", "PL_GLOBAL_SEED", "PL_SEED_WORKERS"):
        monkeypatch.delenv(name, raising=False)  # and restored after: main() seeds the process
    with pytest.raises(SystemExit) as exit_:
        main(["fit", *gpt_args(lm_data_dir), *make_args(tmp_path)])
    assert exit_.value.code == 2
    stderr = capsys.readouterr().err
    assert message in stderr
    error_line = next(line for line in stderr.splitlines() if line.startswith("error: "))
    assert error_line.endswith(".") and "Traceback" not in stderr
    if case in FOUND_WHEN_LOADING:
        assert not list(tmp_path.glob("runs/**/*.ckpt"))  # no training step ran
    else:
        assert not (tmp_path / "runs").exists()  # failed before even the run directory, so before any data work


def _first_batch_error(module: L.LightningModule, inputs: torch.Tensor, targets: torch.Tensor) -> ConfigError:
    """The ConfigError a one-batch fit raises, after checking that no optimizer step ran."""
    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    loader = DataLoader(list(zip(inputs, targets)), batch_size=len(inputs))
    with pytest.raises(ConfigError) as caught:
        trainer.fit(module, loader)
    assert trainer.global_step == 0
    return caught.value


def _tokens(batch: int, length: int, bad_id: int | None = None) -> torch.Tensor:
    tokens = (torch.arange(batch * length) % 40).reshape(batch, length)
    if bad_id is not None:
        tokens[0, 0] = bad_id
    return tokens


@pytest.mark.parametrize(
    "make_module, inputs, targets, message",
    [
        (
            lambda: CausalLanguageModel(net=dict(vocab_size=40, max_len=12, **SMALL)),
            _tokens(4, 12, bad_id=59),
            _tokens(4, 12),
            "The inputs hold token id 59, out of range for the model's vocab_size=40 (valid ids are 0 to 39)",
        ),
        (
            lambda: CausalLanguageModel(net=dict(vocab_size=40, max_len=16, **SMALL), attention="super"),
            _tokens(4, 20),
            _tokens(4, 20),
            "The input sequences have 20 positions, more than max_len=16, the size of W_A of 'super'",
        ),
        (
            lambda: ImageClassifier(
                net=dict(num_classes=10, image_size=8, in_channels=1, patch_size=2, **SMALL), attention="super"
            ),
            torch.zeros(4, 1, 16, 16),
            torch.zeros(4, dtype=torch.long),
            "The images are 1x16x16 (channels x height x width, 64 patches) but the model was built for 1x8x8 (17 tokens",
        ),
    ],
    ids=["vocabulary", "super-max-len", "image-size"],
)
def test_batches_that_do_not_fit_the_model_fail_on_the_first_batch(make_module, inputs, targets, message):
    error = _first_batch_error(make_module(), inputs, targets)
    assert message in str(error)
    assert str(error).endswith(".") and "\n" not in str(error)
