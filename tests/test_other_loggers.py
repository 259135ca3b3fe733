"""A user's own Lightning logger keeps the run's identity (training/other_loggers.py): CSVLogger through `fit`
and `compare`, named after each run, given the run's labels, told in one line that it takes no attention
maps, and a logger missing a required argument refused in one sentence. (MLflow and W&B, offline:
tests/test_mlflow_wandb_loggers.py.)"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from in_process import run_main  # tests/ is on sys.path under pytest (in_tmp: conftest.py)
from lit_attention.training.other_loggers import name_loggers

ROOT = Path(__file__).resolve().parents[1]
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
TINY = ["--model.net.dim=16", "--model.net.num_heads=2", "--model.net.depth=1"]
CSV = ["--trainer.logger", "CSVLogger", "--trainer.logger.save_dir", "logs"]


@pytest.mark.slow  # trains a run
def test_a_csv_logger_is_named_after_the_run_and_given_its_labels(in_tmp, capsys, monkeypatch):
    from lit_attention.training import other_loggers

    monkeypatch.setattr(other_loggers, "NOTED", set())  # the note is once a process: this test's own
    # As the recipe ships (progress bar, clipping, checkpoints), with two validations that draw attention maps.
    assert (
        run_main(
            [
                "fit",
                "--config",
                VIT,
                *CSV,
                *TINY,
                "--trainer.max_steps=4",
                "--trainer.val_check_interval=2",
                "--run.attention_maps=true",
                "--model.attention=super",
            ]
        )
        == 0
    )
    logs = in_tmp / "logs" / "quickstart" / "vit_digits" / "super" / "seed_0" / "version_0"
    labels = yaml.safe_load((logs / "hparams.yaml").read_text())
    assert {k: labels[k] for k in ("variant", "seed", "recipe", "settings")} == {
        "variant": "super",
        "seed": 0,
        "recipe": "quickstart/vit_digits",
        "settings": "default",
    }
    assert labels["params/non_embedding"] > 0 and labels["data/dataset"] == "digits" and labels["attention"] == "super"
    rows = list(csv.DictReader((logs / "metrics.csv").open()))
    assert [r["step"] for r in rows if r.get("val/acc")] == ["1", "3"]  # validations at steps 2 and 4
    err = capsys.readouterr().err
    assert err.count("note: attention maps are not logged to CSVLogger, which takes no images") == 1
    assert (in_tmp / "runs" / "quickstart" / "vit_digits" / "super" / "seed_0" / "version_0" / "record.json").is_file()


@pytest.mark.slow  # a sweep of four runs
def test_compare_names_each_runs_csv_logs_by_grid_point_arm_variant_and_seed(in_tmp):
    assert (
        run_main(
            [
                "compare",
                "--config",
                VIT,
                "--variants",
                "standard",
                "--add-control",
                "efficient",
                "--seeds",
                "2",
                "--output",
                "out",
                "--parallel",
                "1",
                *CSV,
                *TINY,
                "--trainer.max_steps=2",
                "--trainer.val_check_interval=2",
            ]
        )
        == 0
    )
    found = sorted(str(p.parent.relative_to(in_tmp / "logs")) for p in (in_tmp / "logs").rglob("metrics.csv"))
    assert len(found) == 4 and len(set(found)) == 4, found
    assert all(name.endswith(("seed_0/version_0", "seed_1/version_0")) for name in found), found
    for path in (in_tmp / "logs").rglob("hparams.yaml"):
        labels = yaml.safe_load(path.read_text())
        assert f"{labels['variant']}/seed_{labels['seed']}/version_0" in str(path), path


@pytest.mark.slow  # parses a command line with Lightning
def test_a_logger_missing_a_required_argument_is_one_sentence(in_tmp, capsys):
    assert run_main(["fit", "--config", VIT, "--trainer.logger", "CSVLogger"]) == 2
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert line.startswith(
        "error: --trainer.logger CSVLogger needs save_dir, which it has no default for; add --trainer.logger.save_dir <value>"
    )
    assert not (in_tmp / "runs").exists()


def test_a_logger_the_user_named_keeps_its_name():
    from jsonargparse import Namespace

    mine = Namespace(
        class_path="lightning.pytorch.loggers.CSVLogger", init_args=Namespace(save_dir="l", name="mine", version=None)
    )
    unnamed = Namespace(class_path="lightning.pytorch.loggers.MLFlowLogger", init_args=Namespace(run_name=None))
    trainer = Namespace(logger=[mine, unnamed])
    name_loggers(trainer, "default/efficient/seed_1", "version_2")
    assert (mine.init_args.name, mine.init_args.version) == ("mine", None)  # its own versions: a resume gets the next
    assert unnamed.init_args.run_name == "default/efficient/seed_1/version_2"
