"""How a fit ends: the final weights are validated when Lightning's schedule would skip them (a step
budget shorter than an epoch, an epoch the validation interval skips), so the run has a best
checkpoint and a record that compare can report; and the record says which weights `--run.test`
scored (the best checkpoint's, or the final ones where nothing was validated)."""

from pathlib import Path

import pytest
import torch

from in_process import run_main  # tests/ is on sys.path under pytest (in_tmp: conftest.py)
from lit_attention.training.records import read_record

ROOT = Path(__file__).resolve().parents[1]
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
TINY_VIT = [
    "--config",
    VIT,
    "--trainer.limit_train_batches=2",
    "--trainer.limit_val_batches=1",
    "--model.net.dim=16",
    "--model.net.num_heads=2",
    "--model.net.depth=1",
    "--trainer.enable_progress_bar=false",
    "--trainer.log_every_n_steps=1",
]


def fit(*args: str) -> tuple[dict, Path]:
    assert run_main(["fit", *TINY_VIT, *args]) == 0
    [record] = Path.cwd().glob("runs/**/record.json")
    return read_record(record), record.parent


@pytest.mark.slow
def test_a_step_budget_shorter_than_an_epoch_validates_the_final_weights(in_tmp):
    record, run = fit(
        "--trainer.max_epochs=1",
        "--trainer.max_steps=1",
        "--run.test=true",
        "--data.batch_size=16",
        "--trainer.limit_test_batches=1",
    )
    assert [point[:2] for point in record["curve"]] == [[0, 1]]
    assert record["best"]["step"] == 1 and record["final"] == record["best"]["value"]
    assert [p.name for p in (run / "checkpoints").glob("best-*.ckpt")] == ["best-0-1.ckpt"]
    last = torch.load(run / "checkpoints/last.ckpt", map_location="cpu", weights_only=True)
    assert last["global_step"] == 1
    [best_path] = [s["best_model_path"] for k, s in last["callbacks"].items() if k.startswith("ModelCheckpoint")]
    assert best_path.endswith("best-0-1.ckpt")  # last.ckpt was written after the final validation
    assert record["test_checkpoint"] == "best" and record["test"]["test/acc"] is not None


@pytest.mark.slow
def test_an_epoch_the_validation_interval_skips_is_validated_when_it_is_the_last(in_tmp):
    record, _ = fit("--trainer.max_epochs=3", "--trainer.check_val_every_n_epoch=2")
    assert [point[:2] for point in record["curve"]] == [[1, 4], [2, 6]]  # epoch 2 by the interval, 3 at the end


@pytest.mark.slow
def test_a_run_with_validation_switched_off_tests_its_final_weights_and_says_so(in_tmp, capsys):
    record, run = fit(
        "--trainer.max_epochs=1", "--trainer.limit_val_batches=0", "--run.test=true", "--trainer.limit_test_batches=1"
    )
    assert record["curve"] == [] and record["best"] is None  # no validation is added where none is asked for
    assert not list((run / "checkpoints").glob("best-*.ckpt"))
    assert record["test_checkpoint"] == "last" and "test/acc" in record["test"]
    assert 'so --run.test scores the final weights (record.json: test_checkpoint "last")' in capsys.readouterr().err


@pytest.mark.slow
def test_a_fast_dev_run_keeps_no_record_and_no_checkpoint_for_a_later_fit_to_continue(in_tmp, capsys):
    """Lightning's fast_dev_run is a debugging run of a batch: compare would count its record as a finished
    run, and `--ckpt_path last` would continue it as if it were real."""
    assert run_main(["fit", *TINY_VIT, "--trainer.fast_dev_run=true"]) == 0
    assert "nothing was recorded and no checkpoint was kept" in capsys.readouterr().out
    assert not list(Path.cwd().glob("runs/**/record.json")) and not list(Path.cwd().glob("runs/**/*.ckpt"))
    record, _ = fit("--trainer.max_epochs=1", "--ckpt_path=last")
    assert record["optimizer_steps"] == 2  # a whole run of its own: 1 epoch of 2 batches, from step 0
