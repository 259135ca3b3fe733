"""The command line at its edges: inputs that could pass silently wrong, rewrite a finished run, or
end in a traceback. Each is one sentence and exit status 2 with nothing written (or works,
where it is valid); a test that touches an existing run compares checksums of its files before and after.

Commands run in this process through `lit_attention.main.main(argv)` with tiny models; the shared
finished run is trained once per module and copied by every test that resumes it, and continued for a
second epoch once for the tests that read the continued run.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import lit_attention.training.cli  # noqa: F401  (Lightning's log handlers bind to the real streams, not a test's capsys)
from lit_attention.errors import ConfigError
from lit_attention.main import main
from lit_attention.training.outcome_files import read_outcomes
from in_process import OFFLINE, RUN_VARIABLES, process_state_kept, run_main  # tests/ is on sys.path under pytest

ROOT = Path(__file__).resolve().parents[1]
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
# No progress bar in these in-process runs: its redraws would fill the output the test reads; the bar's own
# path (every rank, every mode) is tests/test_multiprocess_matrix.py's.
TINY = [
    "--model.net.dim=16",
    "--model.net.depth=1",
    "--model.net.num_heads=2",
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=2",
    "--trainer.limit_val_batches=1",
    "--trainer.enable_progress_bar=false",
]
RUN = "quickstart/vit_digits/standard/seed_0/version_0"


def lit_attention(argv: list[str], capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `lit-attention <argv>` run in this process."""
    capsys.readouterr()
    try:
        main(argv)
        status = 0
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capsys.readouterr()
    return status, out, err


def refused(argv: list[str], capsys) -> str:
    """The one sentence `argv` is refused with (exit status 2, no traceback)."""
    status, _, err = lit_attention(argv, capsys)
    assert status == 2, err[-2000:]
    assert "Traceback" not in err
    lines = [line for line in err.strip().splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err[-2000:]
    return lines[0]


def checksums(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A run root holding one finished tiny run (1 epoch of 2 steps, validated)."""
    root = tmp_path_factory.mktemp("trained") / "runs"
    try:
        main(["fit", "--config", VIT, *TINY, "--run.root", str(root)])
    except SystemExit as exit_:
        assert exit_.code == 0
    assert (root / RUN / "record.json").is_file()
    return root


@pytest.fixture(scope="module")
def continued(trained, tmp_path_factory) -> tuple[Path, Path]:
    """A copy of the finished run's root continued for a second epoch (`--ckpt_path last`), and the
    run's checkpoint of step 2, kept outside it: (the root, that checkpoint)."""
    where = tmp_path_factory.mktemp("continued")
    root = Path(shutil.copytree(trained, where / "runs"))
    earlier = Path(shutil.copy(root / RUN / "checkpoints" / "last.ckpt", where / "step-2.ckpt"))
    with process_state_kept():
        os.chdir(where)
        os.environ.update(OFFLINE)
        for name in RUN_VARIABLES:
            os.environ.pop(name, None)
        status = run_main(
            ["fit", "--config", VIT, *TINY, "--trainer.max_epochs=2", "--run.root", str(root), "--ckpt_path", "last"]
        )
    assert status == 0
    return root, earlier


def copied(root: Path, tmp_path: Path, monkeypatch) -> Path:
    """A copy of the run root `root`, in a fresh working directory, offline."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    return Path(shutil.copytree(root, tmp_path / "runs"))


@pytest.fixture
def runs(trained, tmp_path, monkeypatch) -> Path:
    """A copy of the finished run's root, in a fresh working directory, offline."""
    return copied(trained, tmp_path, monkeypatch)


# ------------------------------------------------------------------ silently wrong, or data rewritten


@pytest.mark.parametrize(
    "abbreviated, full",
    [
        (["--seed", "3"], "--seed_everything"),
        (["--trainer.max_st", "2"], "--trainer.max_steps"),
        (["--model.net.di", "16"], "--model.net.dim"),  # a nested class's parser too
        (["--model.l=0.1"], "--model.lr"),
    ],
)
def test_an_abbreviated_option_is_refused_with_its_full_name(abbreviated, full, tmp_path, capsys):
    sentence = refused(["fit", "--config", VIT, *TINY, "--run.root", str(tmp_path / "runs"), *abbreviated], capsys)
    assert abbreviated[0].split("=")[0] in sentence and full in sentence and "abbreviated" in sentence
    assert not (tmp_path / "runs").exists()


def test_a_full_option_that_begins_another_is_not_called_an_abbreviation(tmp_path, capsys):
    # `--model.net` (the whole config) begins `--model.net.dim`; the error is about another option.
    sentence = refused(
        ["fit", "--config", VIT, '--model.net={"dim": 16}', "--trainer.max_epochs=abc", "--run.root", str(tmp_path / "runs")],
        capsys,
    )
    assert "--trainer.max_epochs 'abc' is invalid" in sentence and "abbreviated" not in sentence


def test_compare_does_not_pass_an_abbreviation_to_the_runs(tmp_path, capsys):
    sentence = refused(["compare", "--config", VIT, "--seed", "7", "--output", str(tmp_path / "out")], capsys)
    assert "--seed is not an option of compare" in sentence and "write it in full: --seeds." in sentence
    assert not (tmp_path / "out").exists()  # refused before anything is planned or written
    sentence = refused(
        ["compare", "--config", VIT, "--trainer.max_step", "7", "--output", str(tmp_path / "out")], capsys
    )  # an abbreviation of a fit option reaches the fit parser, which names it in full
    assert "--trainer.max_steps" in sentence


@pytest.mark.slow
def test_resuming_a_finished_run_says_so_and_changes_nothing(runs, capsys):
    before = checksums(runs)
    status, out, err = lit_attention(["fit", "--config", VIT, *TINY, "--run.root", str(runs), "--ckpt_path", "last"], capsys)
    assert status == 0, err[-2000:]
    assert "is finished" in out and "--trainer.max_steps" in out
    assert checksums(runs) == before  # record.json, config.yaml, checkpoints, events: byte for byte


@pytest.mark.slow
def test_fit_from_an_earlier_checkpoint_of_a_run_is_refused_and_changes_nothing(continued, tmp_path, monkeypatch, capsys):
    runs = copied(continued[0], tmp_path, monkeypatch)  # continued to step 4
    earlier = shutil.copy(continued[1], runs / RUN / "checkpoints" / "step-2.ckpt")  # kept from step 2 of 4
    before = checksums(runs)
    sentence = refused(
        ["fit", "--config", VIT, *TINY, "--trainer.max_epochs=2", "--run.root", str(runs), "--ckpt_path", str(earlier)], capsys
    )
    assert "would restart" in sentence and "--ckpt_path last" in sentence
    assert checksums(runs) == before  # the run's record, checkpoints and logs, byte for byte


def test_a_lock_taken_on_a_file_its_holder_removed_is_taken_again(tmp_path, monkeypatch):
    """Between opening .lock and locking it, its holder may end and remove it (and a third process create a
    new one): a lock on the removed file guards nothing, so acquire locks the file that is there now."""
    import fcntl

    from lit_attention.training import file_locks, run_dirs

    (tmp_path / run_dirs.LOCK).write_text("process 1 on elsewhere")
    flock, calls = fcntl.flock, []

    def holder_ends_first(file, operation):
        if not calls:  # the first attempt: the holder removes the file, another process makes a new one
            (tmp_path / run_dirs.LOCK).unlink()
            (tmp_path / run_dirs.LOCK).write_text("")
        calls.append(os.fstat(file.fileno()).st_ino)
        return flock(file, operation)

    monkeypatch.setattr(file_locks.fcntl, "flock", holder_ends_first)
    lock = run_dirs.RunLock(tmp_path).acquire()
    assert len(calls) == 2 and calls[1] == os.stat(tmp_path / run_dirs.LOCK).st_ino != calls[0]
    lock.release()


def without_flock(monkeypatch) -> None:
    """A file system that refuses flock, as Lustre mounted `noflock` does (ENOSYS); none is mounted here."""
    import errno

    from lit_attention.training import file_locks

    def refuse(file, operation):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(file_locks.fcntl, "flock", refuse)


def test_without_flock_a_run_is_locked_by_its_lock_file(tmp_path, monkeypatch, capsys):
    """A file beside the lock file, created exclusively, is the lock: a second holder is refused in one sentence
    naming the first, a file left by an ended process of this host is taken over, and release removes it."""
    import socket

    from lit_attention.training import run_dirs

    without_flock(monkeypatch)
    lock = run_dirs.RunLock(tmp_path).acquire()
    assert "without flock" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=f"in use by process {os.getpid()} on {socket.gethostname()}"):
        run_dirs.RunLock(tmp_path).acquire()
    lock.release()
    assert not list(tmp_path.iterdir())
    held = tmp_path / f"{run_dirs.LOCK}.held"
    ended = 2**22 + 7  # a process id no process has (Linux's pid_max is at most 2^22)
    held.write_text(f"process {ended} on {socket.gethostname()}")
    run_dirs.RunLock(tmp_path).acquire().release()  # stale: taken over
    held.write_text("process 12 on another-node")
    with pytest.raises(ConfigError, match="in use by process 12 on another-node"):
        run_dirs.RunLock(tmp_path).acquire()


def test_without_flock_two_takeovers_of_one_stale_lock_cannot_both_succeed(tmp_path, monkeypatch):
    """Two processes that read the same stale holder: the first takes over; the second, finding the file
    changed under its takeover guard, is refused instead of removing the first's new lock."""
    import socket

    from lit_attention.training import file_locks

    held = tmp_path / ".lock.held"
    stale = f"process {2**22 + 7} on {socket.gethostname()}"
    held.write_text(stale)
    assert file_locks.create_exclusively(tmp_path / ".lock", "process 1 on here") is None  # the first takes over
    assert held.read_text().strip() == "process 1 on here"
    assert not file_locks._took_away(held, stale)  # the second read the stale line before: refused
    assert held.read_text().strip() == "process 1 on here"


def test_without_flock_a_compare_output_is_locked_and_keeps_its_lock_file(tmp_path, monkeypatch):
    from lit_attention.sweep.output_dir import LOCK, OutputLock

    without_flock(monkeypatch)
    lock = OutputLock(tmp_path, "compare --config x").acquire()
    with pytest.raises(ConfigError, match="in use by process"):
        OutputLock(tmp_path, "compare --config y").acquire()
    assert "compare --config x" in (tmp_path / LOCK).read_text()  # it names its holder, as with flock
    lock.release()
    assert (tmp_path / LOCK).exists() and not (tmp_path / f"{LOCK}.held").exists()  # the file marks the output
    OutputLock(tmp_path, "compare --config y").acquire().release()


@pytest.mark.slow
def test_a_fit_on_a_file_system_without_flock_trains(in_tmp, monkeypatch, capsys):
    without_flock(monkeypatch)
    assert run_main(["fit", "--config", VIT, *TINY, "--run.root", str(in_tmp / "runs")]) == 0, capsys.readouterr().err[-2000:]
    assert list(in_tmp.glob("runs/**/record.json"))


@pytest.mark.slow
def test_resuming_a_finished_run_for_more_epochs_keeps_its_totals(trained, continued):
    first = json.loads((trained / RUN / "record.json").read_text())
    record = json.loads((continued[0] / RUN / "record.json").read_text())
    assert record["optimizer_steps"] == 2 * first["optimizer_steps"]
    assert record["samples_seen"] == 2 * first["samples_seen"]
    assert record["curve"][0] == first["curve"][0] and len(record["curve"]) == 2
    # Times add up over the two processes: never the second process's alone.
    assert record["train_seconds"] > first["train_seconds"]
    assert record["wall_seconds"] > first["wall_seconds"]


@pytest.mark.slow
def test_refitting_a_finished_run_for_its_test_scores_adds_only_them(runs, capsys):
    first = json.loads((runs / RUN / "record.json").read_text())
    assert first["test"] is None
    status, _, err = lit_attention(
        ["fit", "--config", VIT, *TINY, "--run.root", str(runs), "--ckpt_path", "last", "--run.test=true"], capsys
    )
    assert status == 0, err[-2000:]
    record = json.loads((runs / RUN / "record.json").read_text())
    assert set(record["test"]) >= {"test/acc", "test/loss"} and record["test_checkpoint"] == "best"
    tested = ("test", "test_checkpoint", "per_example")  # the scores, which weights they are of, the items' outcomes
    assert {k: v for k, v in record.items() if k not in tested} == {k: v for k, v in first.items() if k not in tested}
    # The per-example file gains the test items; the best validation's, kept in the checkpoint, stay the same.
    before, after = (read_outcomes(runs / RUN, r["per_example"]) for r in (first, record))
    assert set(after) == set(before) | {"test_index", "test_correct", "test_loss"} and "test_index" not in before
    assert all(np.array_equal(before[name], after[name]) for name in before)


@pytest.mark.parametrize("name", ["../../escaped_run", "/tmp/absolute_run", "a//b", "a/./b", ""])
@pytest.mark.slow
def test_a_run_name_stays_inside_the_run_root(name, tmp_path, capsys):
    root = tmp_path / "deep" / "runs"
    sentence = refused(["fit", "--config", VIT, *TINY, "--run.root", str(root), f"--run.name={name}"], capsys)
    assert "--run.name" in sentence and repr(name) in sentence
    assert not list(tmp_path.rglob("*.ckpt")) and not (tmp_path / "escaped_run").exists()


def test_a_recipe_key_given_twice_is_named_with_both_lines(tmp_path, capsys):
    recipe = tmp_path / "twice.yaml"
    recipe.write_text("trainer:\n  max_epochs: 1\nmodel:\n  init_args:\n    lr: 0.001\ntrainer:\n  max_steps: 2\n")
    sentence = refused(["fit", "--config", VIT, "--config", str(recipe), "--run.root", str(tmp_path / "runs")], capsys)
    assert "'trainer' twice" in sentence and "lines 1 and 6" in sentence
    nested = tmp_path / "nested.yaml"
    nested.write_text("model:\n  init_args:\n    lr: 0.001\n    lr: 0.002\n")
    assert "'lr' twice" in refused(["fit", "--config", VIT, "--config", str(nested)], capsys)
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_seed_everything_false_is_refused(tmp_path, capsys):
    sentence = refused(["fit", "--config", VIT, *TINY, "--run.root", str(tmp_path / "runs"), "--seed_everything=false"], capsys)
    assert "--seed_everything" in sentence and "whole number" in sentence
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("given", [["--seed_everything", "true"], ["--seed_everything=True"]])
@pytest.mark.slow
def test_seed_everything_true_on_the_command_line_draws_a_seed_the_run_is_named_by(given, tmp_path, capsys, monkeypatch):
    """Lightning's random seed, accepted: drawn before the run starts, said in one line, and the run's folder and
    record carry it, so `--seed_everything <n>` repeats or resumes it."""
    from lit_attention.main import DRAWN_SEED

    monkeypatch.delenv(DRAWN_SEED, raising=False)
    status, out, err = lit_attention(
        [
            "fit",
            "--config",
            VIT,
            *TINY,
            "--trainer.max_steps=1",
            "--trainer.limit_val_batches=0",
            "--run.root",
            str(tmp_path / "runs"),
            *given,
        ],
        capsys,
    )
    assert status == 0, err[-2000:]
    [seed] = re.findall(r"--seed_everything true: seed (\d+), drawn at random; the run is seed_\1,", err)
    [run] = (tmp_path / "runs").glob("*/*/standard/seed_*/version_0")
    assert run.parent.name == f"seed_{seed}"
    assert json.loads((run / "record.json").read_text())["seed"] == int(seed)
    monkeypatch.delenv(DRAWN_SEED)  # the next command draws its own


@pytest.mark.slow
def test_seed_everything_true_in_a_recipe_is_refused(tmp_path, capsys):
    recipe = tmp_path / "seed.yaml"
    recipe.write_text("seed_everything: true\n")
    sentence = refused(["fit", "--config", VIT, "--config", str(recipe), "--run.root", str(tmp_path / "runs")], capsys)
    assert "--seed_everything" in sentence and "whole number" in sentence


@pytest.mark.parametrize("limit", ["0", "0.0"])
@pytest.mark.slow
def test_limit_train_batches_zero_is_refused(limit, tmp_path, capsys):
    sentence = refused(
        ["fit", "--config", VIT, *TINY, "--run.root", str(tmp_path / "runs"), f"--trainer.limit_train_batches={limit}"], capsys
    )
    assert f"--trainer.limit_train_batches {limit}" in sentence and "train nothing" in sentence
    assert not (tmp_path / "runs").exists()


def test_a_sweep_whose_runs_all_failed_shows_each_error(tmp_path):
    from lit_attention.reports.report import CSV_FIELDS, write_report
    from lit_attention.sweep.runs import Plan, Run, RunState

    plan = Plan(arms=["standard", "super"], points=[()], seeds=[0])
    states = []
    for arm, message in (
        ("standard", "The training loss became nan at global step 3."),
        ("super", "Checkpoint 'x' cannot be read | truncated."),
    ):
        run = Run(arm, arm, (), 0)
        plan.runs.append(run)
        states.append(RunState(run, failure={"exit_status": 2, "message": message}))
    text = write_report(plan, states, tmp_path, "compare ...", "standard", success_threshold=None)
    assert "No run has finished yet." in text and "## Failed runs" in text
    assert "| standard | default | 0 | The training loss became nan at global step 3. |" in text
    assert "cannot be read / truncated" in text  # a | would split the markdown cell
    assert (tmp_path / "results.md").read_text() == text
    rows = list(csv.DictReader(open(tmp_path / "results.csv")))
    assert "error" in CSV_FIELDS
    assert [(row["status"], row["error"]) for row in rows] == [
        ("failed", "The training loss became nan at global step 3."),
        ("failed", "Checkpoint 'x' cannot be read | truncated."),
    ]


# ------------------------------------------------------------------ tracebacks and cryptic one-liners


@pytest.mark.parametrize(
    "content, words",
    [
        (b"trainer:\n  max_epochs: 1\nmodel:\n  init_args:\n    lr: 0.001 # caf\xe9\n", ["not UTF-8", "0xe9", "line 5"]),
        (b"", ["is empty"]),
        (b"- a\n- b\n", ["YAML list, not a mapping"]),
    ],
)
def test_a_recipe_that_is_not_a_mapping_of_utf8_settings_is_one_sentence(content, words, tmp_path, capsys):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_bytes(content)
    sentence = refused(["fit", "--config", str(recipe), "--run.root", str(tmp_path / "runs")], capsys)
    assert all(word in sentence for word in words), sentence
    assert "Unexpected config" not in sentence and not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_truncated_checkpoint_of_any_name_is_refused(runs, tmp_path, capsys):
    whole = (runs / RUN / "checkpoints" / "last.ckpt").read_bytes()
    truncated = tmp_path / "model.pt"
    truncated.write_bytes(whole[: len(whole) // 2])
    before = checksums(runs)
    sentence = refused(["fit", "--config", VIT, *TINY, "--run.root", str(runs), "--ckpt_path", str(truncated)], capsys)
    assert "model.pt" in sentence and "cannot be read" in sentence
    assert checksums(runs) == before


@pytest.mark.parametrize("value", ["hpc", "registry", ""])
@pytest.mark.slow
def test_ckpt_path_hpc_or_empty_is_refused(value, runs, capsys):
    before = checksums(runs)
    sentence = refused(["test", "--config", VIT, *TINY, "--run.root", str(runs), f"--ckpt_path={value}"], capsys)
    assert f"--ckpt_path {value!r}" in sentence and "last" in sentence
    assert checksums(runs) == before


@pytest.mark.slow
def test_devices_zero_is_refused(tmp_path, capsys):
    sentence = refused(["fit", "--config", VIT, *TINY, "--run.root", str(tmp_path / "runs"), "--trainer.devices=0"], capsys)
    assert "--trainer.devices '0'" in sentence and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "recipe, options, words",
    [
        (
            "gpt_stdlib",
            ["--model.attention=standard,kv_heads=3"],
            "kv_heads=3 does not divide num_heads=2; choose kv_heads among 1, 2.",
        ),
        ("gpt_stdlib", ["--model.attention=efficient,kv_heads=1"], "kv_heads=1 needs linear keys and values"),
        ("text_stdlib", ["--model.net.position=none"], "position='none' is invalid for the text encoder"),
        ("gpt_stdlib", ["--model.net.num_heads=16", "--model.net.position=rope"], "position=rope needs an even head width"),
    ],
)
@pytest.mark.slow  # parses a command line with Lightning (0.6 s on CI)
def test_an_attention_option_the_model_cannot_take_is_refused_before_the_data(recipe, options, words, tmp_path, capsys):
    recipe = str(ROOT / f"recipes/quickstart/{recipe}.yaml")
    sentence = refused(["fit", "--config", recipe, *TINY, "--run.root", str(tmp_path / "runs"), *options], capsys)
    assert words in sentence and not (tmp_path / "runs").exists()


def image_tree(root: Path, mode: str, broken_first: bool = False) -> Path:
    from PIL import Image

    for split in ("train", "val", "test"):
        for label in ("a", "b"):
            folder = root / split / label
            folder.mkdir(parents=True)
            for i in range(4):
                Image.new(mode, (8, 8), (40 * i, 100, 200, 128)[: len(mode)]).save(folder / f"{i}.png")
    if broken_first:
        (root / "train" / "a" / "0.png").write_text("not an image")
    return root


@pytest.mark.slow
def test_an_imagefolder_whose_first_file_is_not_an_image_is_named(tmp_path, capsys):
    data = image_tree(tmp_path / "images", "RGB", broken_first=True)
    sentence = refused(
        [
            "fit",
            "--config",
            VIT,
            *TINY,
            "--run.root",
            str(tmp_path / "runs"),
            "--data.dataset=imagefolder",
            f"--data.data_dir={data}",
        ],
        capsys,
    )
    assert str(data / "train" / "a" / "0.png") in sentence and "cannot be read" in sentence
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_rgba_images_are_converted_to_the_declared_channels(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    data = image_tree(tmp_path / "images", "RGBA")
    status, _, err = lit_attention(
        [
            "fit",
            "--config",
            VIT,
            *TINY,
            "--run.root",
            str(tmp_path / "runs"),
            "--data.dataset=imagefolder",
            f"--data.data_dir={data}",
            "--data.batch_size=4",
            "--data.num_workers=0",
        ],
        capsys,
    )
    assert status == 0, err[-2000:]
    record = json.loads(next((tmp_path / "runs").rglob("record.json")).read_text())
    assert record["optimizer_steps"] == 2 and record["best"] is not None


@pytest.mark.slow
def test_a_negative_value_after_a_space_is_taken(tmp_path, capsys):
    status, out, err = lit_attention(["fit", "--config", VIT, "--model.weight_decay", "-1e-3", "--print_config"], capsys)
    assert status == 0, err[-2000:]
    assert "weight_decay: -0.001" in out


def test_a_recipe_value_of_the_wrong_type_names_the_value_only(tmp_path, capsys):
    recipe = tmp_path / "dim.yaml"
    recipe.write_text('model:\n  init_args:\n    net:\n      dim: "sixty-four"\n')
    sentence = refused(["fit", "--config", VIT, "--config", str(recipe)], capsys)
    assert "--model.net.dim 'sixty-four' is invalid; it must be an integer" in sentence
    assert "init_args" not in sentence


def test_compare_without_a_recipe_is_one_sentence_without_the_usage(capsys):
    status, out, err = lit_attention(["compare", "--seeds", "2"], capsys)
    assert status == 2 and "compare needs a recipe" in err
    assert "usage:" not in out + err and len(err.strip().splitlines()) == 2  # the sentence and the traceback hint


# ------------------------------------------------------------------ TensorBoard as a user sees it


def hparams_plugin(run_dir: Path):
    """TensorBoard's reading of a run: the HParams experiment, the session's hyper-parameters, the scalars."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    events = EventAccumulator(str(run_dir), size_guidance={"tensors": 0, "scalars": 0})
    events.Reload()
    content = events.PluginTagToContent("hparams")
    experiment = HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    session = HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    scalars = {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    return experiment, session, scalars


# A finished run with test scores, which the HParams tests read (finished_run: trained once per session).
TESTED = ["--config", VIT, *TINY, "--trainer.max_epochs=2", "--run.test=true", "--model.lr=0.002"]


@pytest.mark.slow
def test_the_hparams_table_is_the_deliberate_set_with_best_and_test_values(finished_run):
    run_dir = finished_run(TESTED) / "runs" / RUN
    record = json.loads((run_dir / "record.json").read_text())
    experiment, session, scalars = hparams_plugin(run_dir)
    assert [info.name for info in experiment.hparam_infos] == ["variant", "seed", "recipe", "settings", "params/non_embedding"]
    assert session.hparams["variant"].string_value == "standard" and session.hparams["seed"].number_value == 0
    assert session.hparams["recipe"].string_value == "quickstart/vit_digits"
    assert session.hparams["settings"].string_value == "default"  # no compare settings: the grid's word for none
    assert session.hparams["params/non_embedding"].number_value == record["params"]["non_embedding"]
    assert [(m.name.tag, m.display_name) for m in experiment.metric_infos] == [
        ("best/val/acc", "val/acc, best of the run (higher is better)"),
        ("test/acc", "test/acc of the best checkpoint (higher is better)"),
    ]
    # The metrics hold the values the record (and compare's tables) hold: the best, not the last, validation.
    assert scalars["best/val/acc"] == [pytest.approx(record["best"]["value"])]
    assert record["best"]["value"] == max(point[2] for point in record["curve"])
    assert scalars["test/acc"][-1] == pytest.approx(record["test"]["test/acc"])
    assert "hp_metric" not in scalars
    # The rest of the settings stay in the run's files: hparams.yaml keeps the module's and the data's.
    import yaml

    hparams = yaml.safe_load((run_dir / "hparams.yaml").read_text())
    assert hparams["data/dataset"] == "digits" and hparams["weight_decay"] == 0.05 and hparams["lr"] == 0.002
    assert record["params"]["total"] > 0 and record["config"]["model.init_args.lr"] == 0.002
    assert not (run_dir / ".lock").exists()  # a finished run keeps no lock file


# ------------------------------------------------------------------ other loggers


@pytest.mark.slow
def test_a_csv_logger_keeps_checkpoints_record_and_resume_in_the_run_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    csv_logger = ["--trainer.logger=CSVLogger", "--trainer.logger.save_dir=csvlogs"]
    status, out, err = lit_attention(["fit", "--config", VIT, *TINY, *csv_logger], capsys)
    assert status == 0, err[-2000:]
    run_dir = tmp_path / "runs" / RUN
    assert f"Run directory: {Path('runs') / RUN}" in out
    assert {p.name for p in (run_dir / "checkpoints").iterdir()} >= {"last.ckpt"}
    assert len(list((run_dir / "checkpoints").glob("best-*.ckpt"))) == 1
    assert (run_dir / "config.yaml").is_file() and (run_dir / "record.json").is_file()
    assert not list(run_dir.glob("events.out.tfevents.*"))  # the user's logger replaces TensorBoard
    # The logger writes under its own save_dir, named after the run (training/other_loggers.py)...
    metrics = tmp_path / "csvlogs" / RUN / "metrics.csv"
    assert "val/acc" in metrics.read_text().splitlines()[0]
    first_metrics = metrics.read_text()
    assert not list((tmp_path / "csvlogs").rglob("*.ckpt")) and not (tmp_path / "csvlogs" / "config.yaml").exists()
    # ... and `--ckpt_path last` continues the run in its directory.
    status, _, err = lit_attention(
        ["fit", "--config", VIT, *TINY, *csv_logger, "--trainer.max_epochs=2", "--ckpt_path=last"], capsys
    )
    assert status == 0, err[-2000:]
    assert [p.name for p in run_dir.parent.iterdir()] == ["version_0"]
    # The logger's first version is kept whole; the resumed fit logs into its next one.
    assert metrics.read_text() == first_metrics and (metrics.parent.parent / "version_1" / "metrics.csv").is_file()
    record = json.loads((run_dir / "record.json").read_text())
    assert record["optimizer_steps"] == 4 and len(record["curve"]) == 2


@pytest.mark.slow
def test_two_loggers_at_once_keep_the_run_layout(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    recipe = tmp_path / "loggers.yaml"
    recipe.write_text(
        "trainer:\n  logger:\n"
        "    - class_path: CSVLogger\n      init_args:\n        save_dir: csvlogs\n"
        "    - class_path: TensorBoardLogger\n      init_args:\n        save_dir: tblogs\n"
    )
    status, _, err = lit_attention(["fit", "--config", VIT, "--config", str(recipe), *TINY, "--run.name=two"], capsys)
    assert status == 0, err[-2000:]
    run_dir = tmp_path / "runs" / "two" / "standard" / "seed_0" / "version_0"
    assert (run_dir / "checkpoints" / "last.ckpt").is_file() and (run_dir / "record.json").is_file()
    assert (run_dir / "config.yaml").is_file()
    assert list((tmp_path / "csvlogs").rglob("metrics.csv")) and list((tmp_path / "tblogs").rglob("events.out.tfevents.*"))
    assert not list((tmp_path / "csvlogs").rglob("*.ckpt")) and not list((tmp_path / "tblogs").rglob("*.ckpt"))


# ------------------------------------------------------------------ smaller


@pytest.mark.slow  # a process of its own
def test_validate_prints_no_lightning_noise(runs, tmp_path):
    """What a user sees in the terminal (a real process: Lightning's log handlers write to it)."""
    import os
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "lit_attention", "validate", "--config", VIT, *TINY, "--run.root", str(runs), "--ckpt_path=best"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    shown = result.stdout + result.stderr
    assert "val/acc" in shown and "Results: " in shown
    for noise in ("Tip:", "litlogger", "litmodels", "Be aware that when using `ckpt_path`", "_pytree", "LeafSpec"):
        assert noise not in shown, noise


def test_more_cpu_processes_than_cores_is_warned_about(capsys):
    import os

    from lit_attention.training.cli_input import check_trainer_settings

    cores = os.cpu_count()
    check_trainer_settings({"accelerator": "cpu", "devices": cores + 1, "strategy": "ddp"})
    assert f"--trainer.devices {cores + 1} starts {cores + 1} training processes on {cores} CPU cores" in capsys.readouterr().err
    check_trainer_settings({"accelerator": "cpu", "devices": cores})
    assert capsys.readouterr().err == ""


def test_the_tensorboard_hint_is_quoted_for_a_path_with_spaces(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    output = tmp_path / "my sweeps"
    (output / "runs").mkdir(parents=True)  # a sweep none of whose runs has finished: --report has runs to look at
    status, out, err = lit_attention(
        ["compare", "--config", VIT, "--variants", "standard", "--seeds", "1", "--report", "--output", str(output), *TINY], capsys
    )
    assert status == 0, err[-2000:]
    assert f"tensorboard --logdir '{output}/runs'" in out


@pytest.mark.slow  # a fresh interpreter
def test_help_and_compare_help_do_not_load_lightning(tmp_path):
    """A fresh interpreter (what is imported is what is tested): the overview (also for no arguments at
    all, which exits 2: a command is needed) and compare's options come without Lightning; `fit --help`
    needs it (the options are the Trainer's)."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom lit_attention.main import main\n"
        "for words, status in (([], 2), (['--help'], None), (['compare', '--help'], 0)):\n"
        "    try:\n        main(words)\n        assert status is None, words\n"
        "    except SystemExit as exit_:\n        assert exit_.code == status, (words, exit_.code)\n"
        "print('lightning loaded:', 'lightning' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("commands:") == 2 and "--variants" in result.stdout
    for command in ("fit", "validate", "test", "predict", "compare", "inspect"):
        assert f"\n  {command} " in result.stdout
    assert "lightning loaded: False" in result.stdout


@pytest.mark.slow  # a fresh interpreter
def test_fit_help_is_kept_and_the_next_one_needs_neither_lightning_nor_torch(tmp_path, monkeypatch, capsys):
    import subprocess
    import sys

    from lit_attention.main import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr(sys, "argv", ["lit-attention"])
    main(["fit", "--help"])  # made here, where Lightning is loaded already, and kept
    first = capsys.readouterr().out
    assert "--trainer.max_steps" in first
    assert len(list((tmp_path / "cache" / "lit-attention" / "help").glob("fit-*.txt"))) == 1
    code = (
        "import sys\nsys.argv = ['lit-attention']\nfrom lit_attention.main import main\nmain(['fit', '--help'])\n"
        "print('loaded:', sorted(m for m in ('lightning', 'torch') if m in sys.modules))\n"
    )
    second = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr[-2000:]
    assert second.stdout == first + "loaded: []\n"


def test_a_kept_help_text_is_made_afresh_when_a_source_file_changes(tmp_path):
    from lit_attention import help_cache

    package = tmp_path / "package"
    package.mkdir()
    (package / "module.py").write_text("x = 1\n")
    before = help_cache.key("fit", (package,))
    assert help_cache.key("fit", (package,)) == before and help_cache.key("test", (package,)) != before
    (package / "module.py").write_text("x = 12\n")
    assert help_cache.key("fit", (package,)) != before


@pytest.mark.slow
def test_a_tensorboard_server_shows_the_hparams_table_with_best_and_test(finished_run):
    """What the HParams tab shows, through a real TensorBoard server's HTTP API (as the dashboard asks)."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    root = finished_run(TESTED) / "runs"
    record = json.loads((root / RUN / "record.json").read_text())
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tensorboard.main",
            "--logdir",
            str(root),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--load_fast=false",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def ask(route: str, request: dict):  # as the dashboard asks: a POST of the request as JSON
        post = urllib.request.Request(
            f"http://127.0.0.1:{port}/data/plugin/hparams/{route}",
            data=json.dumps(request).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(post, timeout=10) as reply:
            return json.load(reply)

    try:
        experiment, deadline = None, time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                experiment = ask("experiment", {"experimentName": ""})
                if experiment.get("metricInfos"):
                    break
            except OSError:
                pass
            time.sleep(1)
        assert experiment and experiment.get("metricInfos"), experiment
        # The server sorts the columns by name (those that differ between runs first), and the dashboard
        # ticks only the first five of them: there are five, so variant and seed are shown without a click.
        shown = [h["name"] for h in experiment["hparamInfos"]][:5]
        assert len(experiment["hparamInfos"]) == 5 and {"variant", "seed"} <= set(shown)
        assert shown == ["params/non_embedding", "recipe", "seed", "settings", "variant"]
        assert [m["name"]["tag"] for m in experiment["metricInfos"]] == ["best/val/acc", "test/acc"]
        groups = ask(
            "session_groups",
            {
                "experimentName": "",
                "startIndex": 0,
                "sliceSize": 10,
                "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
                "colParams": [{"hparam": h["name"]} for h in experiment["hparamInfos"]]
                + [{"metric": m["name"]} for m in experiment["metricInfos"]],
            },
        )
        [group] = groups["sessionGroups"]
        values = {m["name"]["tag"]: m["value"] for m in group["metricValues"]}
        assert values["best/val/acc"] == pytest.approx(record["best"]["value"])
        assert values["test/acc"] == pytest.approx(record["test"]["test/acc"])
        assert group["hparams"]["variant"] == "standard" and group["hparams"]["recipe"] == "quickstart/vit_digits"
        assert group["hparams"]["seed"] == 0
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.slow  # parses the recipe through LightningCLI
@pytest.mark.parametrize(
    "strategy",
    [["--trainer.strategy=deepspeed"], ["--trainer.strategy.class_path=lightning.pytorch.strategies.ModelParallelStrategy"]],
)
def test_a_strategy_whose_checkpoints_are_directories_is_refused_before_anything_is_built(strategy, in_tmp, capsys):
    sentence = refused(["fit", "--config", VIT, *TINY, *strategy, "--run.root", str(in_tmp / "runs")], capsys)
    assert "is not supported" in sentence and "FSDPStrategy (recipes/trainer/fsdp.yaml)" in sentence
    assert not (in_tmp / "runs").exists() or not list((in_tmp / "runs").rglob("*"))
    # compare refuses it where it plans, before a run starts or a SLURM job is queued
    sentence = refused(
        [
            "compare",
            "--config",
            VIT,
            *TINY,
            *strategy,
            "--variants",
            "standard",
            "--launcher",
            "slurm",
            "--output",
            str(in_tmp / "out"),
        ],
        capsys,
    )
    assert "is not supported" in sentence and not (in_tmp / "out").exists()


@pytest.mark.slow  # parses the recipe through LightningCLI
def test_fsdp_testing_after_fit_without_checkpoints_is_refused(in_tmp, capsys):
    sentence = refused(
        [
            "fit",
            "--config",
            VIT,
            *TINY,
            "--trainer.strategy=fsdp",
            "--run.test=true",
            "--trainer.enable_checkpointing=false",
            "--run.root",
            str(in_tmp / "runs"),
        ],
        capsys,
    )
    assert "--run.test under FSDP tests a checkpoint" in sentence


@pytest.mark.slow  # parses the recipe through LightningCLI
@pytest.mark.parametrize(
    "command",
    [
        ["fit", "--config", VIT, "--model.net.kv_heads=2"],
        ["compare", "--config", VIT, "--grid", "model.init_args.net.kv_heads=1,2"],
    ],
    ids=["fit", "compare grid"],
)
def test_a_variant_setting_given_as_a_model_field_points_to_the_variant(command, in_tmp, capsys):
    sentence = refused([*command, *(["--output", "out"] if command[0] == "compare" else [])], capsys)
    assert "`kv_heads` is a setting of the attention variant" in sentence
    assert "--model.attention standard,kv_heads=2" in sentence and "--variants standard,kv_heads=2,standard" in sentence
    assert not list(in_tmp.iterdir())


def test_every_variant_setting_has_an_example_the_registry_accepts():
    from lit_attention.modeling.variants import SETTINGS, resolve_spec
    from lit_attention.training.parser_errors import SETTING_EXAMPLES

    assert set(SETTING_EXAMPLES) == set(SETTINGS)
    for field, example in SETTING_EXAMPLES.items():
        assert f",{field}=" in example and resolve_spec(example) and resolve_spec(example.split(",")[0])
