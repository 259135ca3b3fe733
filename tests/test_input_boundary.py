"""The error boundary of `lit-attention`: every input a library would fail on (Lightning's Trainer,
numpy's seeding, the allocator, the file system) is one sentence and exit status 2 with nothing
written; a failure that is not the input's doing exits 1 with its traceback in a log file it names.

Commands run in this process through `main(argv)` with tiny models; each refusal takes well under a second.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from in_process import copy_runs, run_main
from test_command_line_edge_cases import TINY, VIT, checksums, lit_attention, refused

ROOT = Path(__file__).resolve().parents[1]
GPT = str(ROOT / "recipes/quickstart/gpt_stdlib.yaml")
# No progress bar in these in-process runs: its redraws would fill the output the test reads; the bar's own
# path (every rank, every mode) is tests/test_multiprocess_matrix.py's.
TINY_GPT = [
    "--model.net.dim=16",
    "--model.net.depth=1",
    "--model.net.num_heads=2",
    "--trainer.max_steps=2",
    "--trainer.enable_progress_bar=false",
]


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


@pytest.mark.parametrize(
    "given, words",
    [
        (["--seed_everything", "4294967296"], ["--seed_everything 4294967296", "from 0 to 4294967295"]),
        (["--seed_everything", "99999999999999999999"], ["--seed_everything 99999999999999999999", "4294967295"]),
        (["--data.split_seed", "-1"], ["split_seed=-1", "from 0 to 4294967295"]),
        (["--data.data_seed", "-1"], ["data_seed=-1", "from 0 to 4294967295"]),  # the same rule as split_seed
        (["--model.net.mlp_ratio", "1e400"], ["mlp_ratio=inf", "finite"]),
        (["--model.net.mlp_ratio", "1e-9"], ["mlp_ratio=1e-09", "hidden width", "= 0", "mlp_ratio >= 1/16"]),
        (["--trainer.precision", "64-true"], ["--trainer.precision 64-true", "32-true", "bf16-mixed"]),
        (["--trainer.gradient_clip_algorithm", "foo"], ["--trainer.gradient_clip_algorithm 'foo'", "norm, value"]),
        (["--trainer.gradient_clip_val", "-1"], ["--trainer.gradient_clip_val -1", "> 0", "no clipping"]),
        (["--trainer.devices", "-1"], ["--trainer.devices -1", "CPU", "from 1"]),
        (["--trainer.num_nodes", "0"], ["--trainer.num_nodes 0", "from 1"]),
        (["--run.name", "a" * 300], ["--run.name", "300 bytes", "255"]),
    ],
)
@pytest.mark.slow
def test_a_value_a_library_would_fail_on_is_one_sentence_before_anything_is_written(given, words, in_tmp, capsys):
    sentence = refused(["fit", "--config", VIT, *TINY, "--run.root", str(in_tmp / "runs"), *given], capsys)
    assert all(word in sentence for word in words), sentence
    assert not files_under(in_tmp / "runs")


@pytest.mark.slow
def test_a_seed_out_of_range_in_a_recipe_is_refused(in_tmp, capsys):
    recipe = in_tmp / "seed.yaml"
    recipe.write_text("seed_everything: 4294967296\n")
    sentence = refused(["fit", "--config", VIT, "--config", str(recipe), *TINY, "--run.root", str(in_tmp / "runs")], capsys)
    assert "--seed_everything 4294967296" in sentence and "4294967295" in sentence


@pytest.mark.slow
def test_a_validation_interval_longer_than_the_epoch_is_lightnings_sentence(in_tmp, capsys):
    sentence = refused(
        [
            "fit",
            "--config",
            VIT,
            "--model.net.dim=16",
            "--model.net.depth=1",
            "--model.net.num_heads=2",
            "--trainer.enable_progress_bar=false",
            "--trainer.val_check_interval=100000",
            "--run.root",
            str(in_tmp / "runs"),
        ],
        capsys,
    )
    assert "`val_check_interval` (100000) must be less than or equal to the number of the training batches" in sentence
    assert not files_under(in_tmp / "runs")  # the run directory made for it is gone again


@pytest.mark.slow
def test_a_language_model_data_dir_that_is_a_file_is_refused(in_tmp, capsys):
    (in_tmp / "afile").write_text("not a folder")
    sentence = refused(
        ["fit", "--config", GPT, *TINY_GPT, f"--data.data_dir={in_tmp / 'afile'}", "--run.root", str(in_tmp / "runs")], capsys
    )
    assert f"data_dir={str(in_tmp / 'afile')!r} is a file, not a folder" in sentence
    assert not files_under(in_tmp / "runs")


@pytest.mark.slow
def test_a_language_model_on_a_corpus_too_small_to_split_names_it_and_the_smallest(in_tmp, capsys):
    corpus = in_tmp / "one.txt"
    corpus.write_text("only one line here\n")
    sentence = refused(
        [
            "fit",
            "--config",
            GPT,
            *TINY_GPT,
            "--data.dataset=text",
            f"--data.data_files={corpus}",
            f"--data.data_dir={in_tmp / 'data'}",
            "--run.root",
            str(in_tmp / "runs"),
        ],
        capsys,
    )
    assert str(corpus) in sentence and "holds 1 line," in sentence and "smallest corpus that splits has 3 lines" in sentence
    assert not files_under(in_tmp / "runs")


def test_the_smallest_splittable_corpus_is_what_datasets_splits():
    from datasets import Dataset

    from datamodules.language_modeling import smallest_splittable

    for fraction in (0.05, 0.3, 0.5):
        smallest = smallest_splittable(fraction, 2)
        for rows, splits in ((smallest, True), (smallest - 1, False)):
            train = Dataset.from_dict({"text": [str(i) for i in range(rows)]})
            try:
                for _ in range(2):
                    train = train.train_test_split(test_size=fraction, shuffle=False)["train"]
                split = len(train) >= 1
            except ValueError:
                split = False
            assert split == splits, (fraction, rows)


@pytest.mark.slow
def test_an_imagefolder_of_one_class_names_the_folder(in_tmp, capsys):
    from PIL import Image

    for split in ("train", "val", "test"):
        (in_tmp / "images" / split / "cats").mkdir(parents=True)
        Image.new("RGB", (8, 8)).save(in_tmp / "images" / split / "cats" / "0.png")
    sentence = refused(
        [
            "fit",
            "--config",
            VIT,
            *TINY,
            "--data.dataset=imagefolder",
            f"--data.data_dir={in_tmp / 'images'}",
            "--run.root",
            str(in_tmp / "runs"),
        ],
        capsys,
    )
    assert str(in_tmp / "images" / "train") in sentence and "one class folder ('cats')" in sentence
    assert "at least two" in sentence


@pytest.mark.slow
def test_a_model_too_large_for_the_machine_is_refused_with_the_estimate(in_tmp, capsys):
    sentence = refused(
        [
            "fit",
            "--config",
            GPT,
            "--data.max_len",
            "100000000",
            "--data.batch_size",
            "1",
            "--trainer.max_steps=2",
            "--run.root",
            str(in_tmp / "runs"),
        ],
        capsys,
    )
    # GPT(dim 128, depth 4) with 10^8 positions: the position table alone is 1.28e10 parameters.
    assert "12,800,820,352 parameters" in sentence and "204.8 GB" in sentence and "--data.max_len" in sentence
    assert not files_under(in_tmp / "runs")


@pytest.mark.slow
def test_a_failing_command_on_a_finished_run_changes_none_of_its_files(finished_run, in_tmp, capsys):
    from test_commands import TINY_VIT

    runs = copy_runs(finished_run(TINY_VIT), in_tmp)
    before = checksums(runs)
    for bad in (["--trainer.gradient_clip_val=-1"], ["--trainer.precision=64-true"], ["--trainer.num_nodes=0"]):
        refused(["fit", *TINY_VIT, "--trainer.max_epochs=2", "--ckpt_path=last", *bad], capsys)
    assert checksums(runs) == before


# ------------------------------------------------------------------ the boundary, with injected exceptions


@pytest.mark.slow
def test_lightnings_misconfiguration_from_inside_the_trainer_is_one_sentence(in_tmp, capsys, monkeypatch):
    """Injected: Lightning's own accelerator connector (which the Trainer's constructor calls) raises its
    MisconfigurationException, as it does for a strategy this machine cannot run."""
    from lightning.fabric.utilities.exceptions import MisconfigurationException
    from lightning.pytorch.trainer.connectors import accelerator_connector

    def refuse(self, *args, **kwargs):
        raise MisconfigurationException("`strategy='deepspeed'` is not available here.\nInstall deepspeed.")

    monkeypatch.setattr(accelerator_connector._AcceleratorConnector, "__init__", refuse)
    sentence = refused(["fit", "--config", VIT, *TINY, "--run.root", str(in_tmp / "runs")], capsys)
    assert "Lightning's Trainer refused the trainer settings: `strategy='deepspeed'` is not available here" in sentence
    assert "Install deepspeed" in sentence and "--trainer" in sentence
    assert not files_under(in_tmp / "runs")


@pytest.mark.slow
def test_a_misconfiguration_raised_while_training_is_one_sentence(in_tmp, capsys, monkeypatch):
    """Injected: the task's training step raises Lightning's MisconfigurationException mid-fit."""
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    from lit_attention.training.tasks.image_classification import ImageClassifier

    def refuse(self, batch, batch_idx):
        raise MisconfigurationException("`training_step` returned nothing to optimise.")

    monkeypatch.setattr(ImageClassifier, "training_step", refuse)
    sentence = refused(["fit", "--config", VIT, *TINY, "--run.root", str(in_tmp / "runs")], capsys)
    assert sentence == (
        "error: Lightning refused a setting: `training_step` returned nothing to optimise; change the "
        "option it names (`lit-attention fit --help` lists the trainer options)."
    )


@pytest.mark.slow
def test_running_out_of_memory_is_said_as_the_sizes_to_lower(in_tmp, capsys, monkeypatch):
    """Injected: the training step raises torch's OutOfMemoryError, as the allocator does."""
    import torch

    from lit_attention.training.tasks.image_classification import ImageClassifier

    def allocate(self, batch, batch_idx):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 51.20 GiB.")

    monkeypatch.setattr(ImageClassifier, "training_step", allocate)
    sentence = refused(["fit", "--config", VIT, *TINY, "--run.root", str(in_tmp / "runs")], capsys)
    assert "ran out of memory (OutOfMemoryError: CUDA out of memory. Tried to allocate 51.20 GiB)" in sentence
    assert "--data.batch_size" in sentence


def internal_failure(monkeypatch, where: Path) -> None:
    """Injected: torch's attention kernel fails inside a real training forward pass (the validation
    sanity check, without gradients, passes), as a broken install would. Fallback logs go to `where`."""
    import tempfile

    import torch
    import torch.nn.functional as F

    working = F.scaled_dot_product_attention

    def broken(*args, **kwargs):
        if torch.is_grad_enabled() and args[0].device.type != "meta":  # not the FLOP count on the meta device
            raise RuntimeError("injected kernel failure")
        return working(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", broken)
    monkeypatch.setattr(tempfile, "tempdir", str(where))


@pytest.mark.slow
def test_a_failure_that_is_not_the_inputs_exits_1_with_its_traceback_in_the_run_directory(in_tmp, capsys, monkeypatch):
    internal_failure(monkeypatch, in_tmp)
    status, _, err = lit_attention(["fit", "--config", VIT, *TINY, "--run.root", str(in_tmp / "runs")], capsys)
    assert status == 1 and "Traceback" not in err, err[-2000:]
    [line] = [line for line in err.splitlines() if line.startswith("error: ")]
    assert "not in your input (RuntimeError: injected kernel failure)" in line
    log = Path(line.split("its traceback is in ", 1)[1].split(";", 1)[0])
    assert log.is_file() and "Traceback (most recent call last)" in log.read_text()
    assert "scaled_dot_product_attention" not in line and "injected kernel failure" in log.read_text()
    run_dir = in_tmp / "runs" / "quickstart/vit_digits/standard/seed_0/version_0"
    assert log == run_dir / "traceback.log", log  # the first batch started, so the run directory is kept


@pytest.mark.slow
def test_a_failure_before_any_run_directory_writes_its_traceback_to_a_named_file(in_tmp, capsys, monkeypatch):
    """Injected: the digits loader (scikit-learn) fails when the DataModule reads its sizes' data."""
    import tempfile

    import datamodules.images

    def broken(self):
        raise KeyError("injected")

    monkeypatch.setattr(datamodules.images.ImageDataModule, "model_sizes", broken)
    monkeypatch.setattr(tempfile, "tempdir", str(in_tmp))
    status, _, err = lit_attention(["fit", "--config", VIT, *TINY, "--run.root", str(in_tmp / "runs")], capsys)
    assert status == 1, err[-2000:]
    [log] = in_tmp.glob("lit-attention-traceback-*.log")
    assert f"its traceback is in {log}" in err and "KeyError" in log.read_text()
    assert not (in_tmp / "runs").exists()


@pytest.mark.slow
def test_the_traceback_setting_adds_the_traceback_and_changes_nothing_else(in_tmp, capsys, monkeypatch):
    """LIT_ATTENTION_TRACEBACK=1 prints the traceback before the sentence; the sentence and the exit status
    (1 for a defect, 2 for bad input) stay as they are. 0, false and empty mean off."""
    internal_failure(monkeypatch, in_tmp)
    monkeypatch.setenv("LIT_ATTENTION_TRACEBACK", "1")
    assert run_main(["fit", "--config", VIT, *TINY, "--run.root", str(in_tmp / "runs")]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "injected kernel failure" in err
    assert err.strip().splitlines()[-1].startswith("error: lit-attention failed for a reason that is not in your input")
    bad = ["fit", "--config", VIT, *TINY, "--model.net.position=alibi", "--run.root", str(in_tmp / "runs")]  # a ViT
    assert run_main(bad) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.strip().splitlines()[-1].startswith("error: ")
    for off in ("0", "false", ""):
        monkeypatch.setenv("LIT_ATTENTION_TRACEBACK", off)
        assert run_main(bad) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and "error: " in err and "set LIT_ATTENTION_TRACEBACK=1" in err


# ------------------------------------------------------------------ an unknown field of the model's config


@pytest.mark.parametrize(
    "given, field, guess",
    [
        (["--model.net.bogus", "3"], "bogus", None),
        (["--model.net.heads", "4"], "heads", "num_heads"),
        (["--model.net.hidden_dim=128"], "hidden_dim", "mlp_hidden"),  # the MLP's width is a field now
        (["--model.net.heads", "4", "--print_config"], "heads", "num_heads"),
    ],
)
@pytest.mark.slow
def test_an_unknown_model_config_field_names_the_option_the_fields_and_the_closest(given, field, guess, in_tmp, capsys):
    sentence = refused(["fit", "--config", VIT, *given], capsys)
    # The data's sizes, the block's fields every family shares (ModelConfig's), then the ViT's own.
    assert sentence.startswith(
        f"error: Unknown option `--model.net.{field}`; the valid fields of ViTConfig are "
        "num_classes, image_size, in_channels, dim, num_heads, mlp_ratio,"
    )
    assert sentence.endswith(f"; did you mean `{guess}`?" if guess else "patch_size, depth, pool.")
    assert "NestedArg" not in sentence


def test_an_unknown_model_config_field_in_a_recipe_names_the_tasks_config(in_tmp, capsys):
    recipe = in_tmp / "bogus.yaml"
    recipe.write_text("model:\n  init_args:\n    net:\n      num_head: 3\n")
    sentence = refused(["fit", "--config", GPT, "--config", str(recipe)], capsys)
    assert sentence.startswith("error: Unknown option `--model.net.num_head`; the valid fields of GPTConfig are ")
    assert "; did you mean `num_heads`?" in sentence
