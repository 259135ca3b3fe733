"""What a two-process DDP run (gloo on CPU, through the real `lit-attention` command) reports is what one
process reports on the same weights and data: only rank 0 writes the run, and its record counts both
ranks' steps and samples; the epoch metrics that reach the record, the best
checkpoint's choice and TensorBoard are synced over the ranks, and `predict` writes every input once,
in input order; a DDP run resumed from its checkpoint ends where it would have, each rank drawing its
own dropout masks; translation's `bleu_batches` counts batches over all ranks. Rank 1 is a new process
Lightning starts, so the tests that run DDP are slow; they share two DDP fits and a DDP predict, run
one after the other by one pair of processes (`ddp_runs`)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from in_process import OFFLINE, copy_runs, run_main  # tests/ is on sys.path under pytest (in_tmp: conftest.py)
from lit_attention.training.tasks import Seq2SeqTranslator
from test_tasks import ListDataset, translation_setup

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
# A tiny ViT with dropout (dropout draws random numbers: the resume must restore each rank's), 4 steps in
# one epoch. The digits' validation (144) and test (360) splits divide evenly over 2 ranks, so
# DistributedSampler adds no padding duplicates, and every batch of both splits is scored (no limit_*_batches).
TINY_VIT = [
    "--config",
    VIT,
    "--trainer.max_steps=4",
    "--trainer.limit_train_batches=4",
    "--model.warmup_steps=1",
    "--model.net.dim=16",
    "--model.net.num_heads=2",
    "--model.net.depth=1",
    "--model.net.dropout=0.5",
    "--data.batch_size=16",
    "--trainer.deterministic=true",
    "--trainer.log_every_n_steps=1",
]
DDP = ["--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp"]
# Lightning's own ModelCheckpoint keeps the checkpoints of steps 2 and 4 (it replaces the run's best and last).
EVERY_TWO_STEPS = [
    "--trainer.callbacks+=lightning.pytorch.callbacks.ModelCheckpoint",
    "--trainer.callbacks.every_n_train_steps=2",
    "--trainer.callbacks.save_top_k=-1",
]


def lit_attention(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        **OFFLINE,
        "OMP_NUM_THREADS": "1",  # bit-exact sums need the same thread count
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=400, env=environment)


# `lit-attention <command>` for each command given, one after the other in this process: Lightning starts
# DDP's rank 1 once, running this script again, and the next command's ranks are the same two processes.
ONE_AFTER_THE_OTHER = """
import json, sys
from in_process import run_main
for command in json.loads(sys.argv[1]):
    if run_main(command) != 0:
        sys.exit(f"lit-attention {' '.join(command)} failed")
"""


def seven_images(folder: Path) -> Path:
    folder.mkdir()
    for i in range(7):  # odd: the ranks get 4 and 3 inputs
        Image.new("L", (8, 8), i * 35).save(folder / f"{i}.png")
    return folder


# One input per batch: the ranks run different numbers of batches (4 and 3).
def predict(images: Path) -> list[str]:
    return ["predict", *TINY_VIT, "--ckpt_path=last", f"--data.predict_files={images}", "--data.batch_size=1"]


@pytest.fixture(scope="module")
def ddp_runs(tmp_path_factory) -> Path:
    """The DDP runs of this file, which every DDP test reads (a test that writes into a run works on a
    copy): `straight/`, 4 steps, its checkpoints of steps 2 and 4 kept in `steps/`; and `runs/`, the same
    run resumed from step 2 with `--run.test=true`, a run as the project keeps it (best and last
    checkpoints, record, per-example outcomes), whose last checkpoint then predicts `images/` (predict_0).
    All three commands run one after the other in the same two processes: each process start imports
    torch and Lightning again (seconds of CPU), and the straight fit ends before the resumed one reads
    its checkpoint."""
    where = tmp_path_factory.mktemp("ddp_runs")
    straight = ["fit", *TINY_VIT, *DDP, "--run.root=straight", *EVERY_TWO_STEPS, f"--trainer.callbacks.dirpath={where / 'steps'}"]
    resumed = ["fit", *TINY_VIT, *DDP, "--run.test=true", f"--ckpt_path={where / 'steps/epoch=0-step=2.ckpt'}"]
    (where / "one_after_the_other.py").write_text(ONE_AFTER_THE_OTHER)
    commands = [straight, resumed, [*predict(seven_images(where / "images")), *DDP]]
    done = lit_attention([str(where / "one_after_the_other.py"), json.dumps(commands)], where)
    assert done.returncode == 0, done.stderr[-3000:]
    return where


def last_scalars(directory: Path) -> dict[str, float]:
    events = EventAccumulator(str(directory))
    events.Reload()
    return {tag: events.Scalars(tag)[-1].value for tag in events.Tags()["scalars"]}


def scalars(directory: Path) -> dict[str, list[float]]:
    events = EventAccumulator(str(directory))
    events.Reload()
    return {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


@pytest.mark.slow
def test_a_ddp_fit_writes_one_run_directory_and_counts_both_ranks(ddp_runs):
    """Only rank 0 writes the run: one directory, one event file, one best and one last checkpoint."""
    [straight] = ddp_runs.glob("straight/quickstart/vit_digits/standard/seed_0/version_*")
    assert len(list(straight.glob("events.out.tfevents.*"))) == 1
    logged = scalars(straight)
    assert "val/acc" in logged and "train/loss_step" in logged
    # Both ranks stepped the same optimizer: 4 batches each of a split dataset = 4 optimizer steps,
    # each logged once (by rank 0), and the record counts both ranks' samples.
    assert len(logged["train/lr"]) == 4
    record = json.loads((straight / "record.json").read_text())
    assert record["optimizer_steps"] == 4 and record["samples_seen"] == 4 * 16 * 2
    # The straight run's own ModelCheckpoint replaces the best one; the resumed run keeps the project's.
    [run] = ddp_runs.glob("runs/quickstart/vit_digits/standard/seed_0/version_*")
    checkpoints = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert "last.ckpt" in checkpoints and len(checkpoints) == 2, checkpoints


@pytest.mark.slow
def test_ddp_validation_and_test_metrics_are_those_of_one_process(in_tmp, ddp_runs):
    copy_runs(ddp_runs, in_tmp)
    [run] = in_tmp.glob("runs/quickstart/vit_digits/standard/seed_0/version_*")
    record = json.loads((run / "record.json").read_text())
    ddp_val = last_scalars(run)
    # The same checkpoints scored by one process over the whole splits.
    assert run_main(["validate", *TINY_VIT, "--ckpt_path=last"]) == 0
    assert run_main(["test", *TINY_VIT, "--ckpt_path=best"]) == 0
    one_val = last_scalars(run / "evaluations/validate_0")
    one_test = last_scalars(run / "evaluations/test_0")
    for name in ("val/loss", "val/acc", "val/f1_macro"):
        assert ddp_val[name] == pytest.approx(one_val[name], rel=1e-5, abs=1e-6), name
    assert record["curve"][-1][2] == pytest.approx(one_val["val/acc"], rel=1e-5, abs=1e-6)
    for name in ("test/loss", "test/acc", "test/f1_macro"):
        assert record["test"][name] == pytest.approx(one_test[name], rel=1e-5, abs=1e-6), name
    assert_per_example_outcomes_are_in_dataset_order(run, record)


def assert_per_example_outcomes_are_in_dataset_order(run: Path, record: dict) -> None:
    """The two ranks' shares of the per-example file, gathered: every test item once, in dataset order,
    each with the loss one process computes for that item from the best checkpoint; and every
    validation item of the best validation, whose accuracy is the record's best value."""
    import torch.nn.functional as F

    from datamodules.images import ImageDataModule
    from lit_attention.training.outcome_files import read_outcomes
    from lit_attention.training.tasks import ImageClassifier

    outcomes = read_outcomes(run, record["per_example"])
    assert outcomes["test_index"].tolist() == list(range(360)) and outcomes["val_index"].tolist() == list(range(144))
    assert outcomes["val_correct"].mean() == pytest.approx(record["best"]["value"], abs=1e-6)
    [best] = run.glob("checkpoints/best-*.ckpt")
    model = ImageClassifier.load_from_checkpoint(best, map_location="cpu").eval()
    data = ImageDataModule(dataset="digits")
    data.setup("test")
    images, labels = (torch.stack([torch.as_tensor(data.test_set[i][k]) for i in range(360)]) for k in (0, 1))
    with torch.no_grad():
        logits = model(images)
    assert outcomes["test_loss"] == pytest.approx(F.cross_entropy(logits, labels, reduction="none").numpy(), abs=1e-5)
    assert outcomes["test_correct"].tolist() == (logits.argmax(-1) == labels).tolist()


@pytest.mark.slow
def test_ddp_predict_writes_every_input_once_in_input_order(in_tmp, ddp_runs):
    copy_runs(ddp_runs, in_tmp)
    [run] = in_tmp.glob("runs/quickstart/vit_digits/standard/seed_0/version_*")
    assert run_main(predict(ddp_runs / "images")) == 0  # the same inputs, predicted by one process: predict_1
    two, one = (
        [json.loads(line) for line in (run / f"evaluations/predict_{k}/predictions.jsonl").read_text().splitlines()]
        for k in (0, 1)
    )
    assert [Path(row["input"]).name for row in two] == [f"{i}.png" for i in range(7)]
    assert [row["prediction"] for row in two] == [row["prediction"] for row in one]
    for ours, theirs in zip(two, one):
        assert ours["probabilities"] == pytest.approx(theirs["probabilities"], abs=1e-5)


@pytest.mark.slow
def test_ddp_resume_is_exact_on_every_rank_and_the_ranks_draw_their_own_dropout_masks(ddp_runs):
    steps = ddp_runs / "steps"
    middle = steps / "epoch=0-step=2.ckpt"
    [resumed] = ddp_runs.glob("runs/**/checkpoints/last.ckpt")
    straight, resumed = (torch.load(p, map_location="cpu", weights_only=True) for p in (steps / "epoch=0-step=4.ckpt", resumed))
    assert straight["global_step"] == resumed["global_step"] == 4
    for name, weight in straight["state_dict"].items():
        assert torch.equal(weight, resumed["state_dict"][name]), name

    ranks = torch.load(middle, map_location="cpu", weights_only=True)["callbacks"]["ExactResume"]["ranks"]
    assert len(ranks) == 2
    masks = []
    for rank in ranks:  # the mask each rank's next dropout draws
        torch.set_rng_state(rank["torch"])
        masks.append(torch.nn.functional.dropout(torch.ones(256), 0.5) > 0)
    assert not torch.equal(*masks)


@pytest.mark.parametrize("ranks, bleu_batches, each", [(1, 3, 3), (2, 3, 2), (2, 4, 2), (3, 7, 3), (4, 2, 1)])
def test_bleu_batches_are_shared_out_over_the_ranks(tmp_path, ranks, bleu_batches, each):
    module = Seq2SeqTranslator(
        net=dict(
            vocab_size=30,
            max_src_len=10,
            max_tgt_len=11,
            pad_id=0,
            bos_id=1,
            eos_id=2,
            encoder_depth=1,
            decoder_depth=1,
            dim=16,
            num_heads=2,
        ),
        bleu_batches=bleu_batches,
    )
    # A DDP trainer knows its world size before it starts any process.
    module.trainer = L.Trainer(
        default_root_dir=tmp_path, accelerator="cpu", devices=ranks, logger=False, strategy="ddp" if ranks > 1 else "auto"
    )
    assert module.bleu_batches_per_rank() == each
    assert each * ranks >= bleu_batches > (each - 1) * ranks


@pytest.mark.slow  # greedy decoding: seconds
def test_validation_scores_bleu_on_its_share_of_batches(tmp_path):
    module, items = translation_setup("standard")
    module.hparams.bleu_batches = 2
    counts = []

    class CountScored(L.Callback):
        def on_validation_batch_end(self, trainer, pl_module, *args, **kwargs):
            counts.append(pl_module.val_bleu.update_count)

    trainer = L.Trainer(
        default_root_dir=tmp_path,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[CountScored()],
    )
    trainer.validate(module, torch.utils.data.DataLoader(ListDataset(items), batch_size=4))
    assert counts == [1, 2, 2, 2]  # 4 batches, the first 2 scored
