"""Every command tells the truth: metrics that cannot share state by accident, evaluations that never
change what `fit --ckpt_path last` resumes, `predict` for every task, one sentence for bad input (with
nothing already written changed), sizes printed as they are used, a lock on a running run, and the
monitoring a user looks at."""

import hashlib
import json
import logging
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import lightning as L
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from sklearn.metrics import accuracy_score, f1_score, top_k_accuracy_score
from torch.utils.data import DataLoader

from lit_attention.training.callbacks import attention_figure, nonfinite_message
from lit_attention.sweep.planning import SEED_LOGGER, plan_run
from lit_attention.main import main
from lit_attention.training.tasks import CausalLanguageModel, ImageClassifier, TextClassifier
from in_process import copy_runs, run_main  # tests/ is on sys.path under pytest (in_tmp, finished_run: conftest.py)
from test_datamodules_text import write_pairs_json, write_reviews

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
GPT = str(ROOT / "recipes/quickstart/gpt_stdlib.yaml")
# No progress bar in these in-process runs: its redraws would fill the output the test reads; the bar's own
# path (every rank, every mode) is tests/test_multiprocess_matrix.py's.
QUIET = ["--trainer.enable_progress_bar=false", "--trainer.log_every_n_steps=1"]
TINY_VIT = [
    "--config",
    VIT,
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=4",
    "--trainer.limit_val_batches=2",
    "--model.net.dim=16",
    "--model.net.num_heads=2",
    "--model.net.depth=1",
    *QUIET,
]
TINY_GPT = [
    "--config",
    GPT,
    "--trainer.max_steps=4",
    "--trainer.val_check_interval=2",
    "--data.max_files=60",
    "--data.val_fraction=0.2",
    "--data.val_windows=4",
    "--data.max_len=16",
    "--model.net.dim=16",
    "--model.net.num_heads=2",
    "--model.net.depth=1",
    *QUIET,
]


def checksums(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


# ---------------------------------------------------------------------------------------------- 1. metrics


def batches_with_a_perfect_first(num_classes: int, count: int = 4, size: int = 16):
    """(logits, labels) batches; the first one perfectly classified (the case that merged metric states)."""
    generator = torch.Generator().manual_seed(0)
    labels = [torch.randint(0, num_classes, (size,), generator=generator) for _ in range(count)]
    logits = [torch.randn(size, num_classes, generator=generator) for _ in range(count)]
    logits[0] = F.one_hot(labels[0], num_classes).float() * 10
    return logits, labels


@pytest.mark.parametrize("task, num_classes", [("image", 10), ("text", 3), ("image", 12)])
def test_classification_metrics_equal_an_independent_computation(task, num_classes, tmp_path):
    """Through the task's own validation loop; its model is replaced by one that returns chosen logits."""
    logits, labels = batches_with_a_perfect_first(num_classes)
    if task == "image":
        module = ImageClassifier(
            net=dict(num_classes=num_classes, image_size=8, in_channels=1, patch_size=2, dim=16, num_heads=2, depth=1)
        )
        batches = [(torch.zeros(len(y), 1, 8, 8), y) for y in labels]
    else:
        module = TextClassifier(
            net=dict(vocab_size=10, max_len=4, num_classes=num_classes, pad_id=0, dim=16, num_heads=2, depth=1)
        )
        batches = [
            {
                "tokens": torch.ones(len(y), 4, dtype=torch.long),
                "padding_mask": torch.zeros(len(y), 4, dtype=torch.bool),
                "labels": y,
            }
            for y in labels
        ]
    served = iter(logits)
    module.forward_batch = lambda model, batch: next(served)
    module.check_batch = lambda batch: None
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False)
    [metrics] = trainer.validate(module, DataLoader(batches, batch_size=None), verbose=False)
    scores, truth = torch.cat(logits).softmax(-1).numpy(), torch.cat(labels).numpy()
    predictions = scores.argmax(-1)
    assert metrics["val/acc"] == pytest.approx(accuracy_score(truth, predictions), abs=1e-6)
    assert metrics["val/f1_macro"] == pytest.approx(
        f1_score(truth, predictions, average="macro", labels=list(range(num_classes)), zero_division=0), abs=1e-6
    )
    if num_classes >= 10:
        assert metrics["val/acc_top5"] == pytest.approx(
            top_k_accuracy_score(truth, scores, k=5, labels=list(range(num_classes))), abs=1e-6
        )


def test_language_model_metrics_equal_a_direct_computation():
    """Loss (token-weighted) and next-token accuracy over scored targets, first batch perfect."""
    vocab, generator = 7, torch.Generator().manual_seed(0)
    module = CausalLanguageModel(net=dict(vocab_size=vocab, max_len=5, dim=16, num_heads=2, depth=1))
    batches = []
    for i in range(3):
        inputs = torch.randint(0, vocab, (4, 5), generator=generator)
        targets = inputs.clone() if i == 0 else torch.randint(0, vocab, (4, 5), generator=generator)
        targets[:, 0] = -100 if i == 2 else targets[:, 0]  # some unscored positions, as in MQAR
        batches.append((inputs, targets))
    # The model "predicts" its input token with certainty 0.9-ish: logits 3 on it, 0 elsewhere.
    module.forward_batch = lambda model, batch: F.one_hot(batch[0], vocab).float() * 3
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False)
    [metrics] = trainer.validate(module, DataLoader(batches, batch_size=None), verbose=False)
    inputs, targets = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
    scored = targets != -100
    assert metrics["val/acc"] == pytest.approx(float((inputs[scored] == targets[scored]).float().mean()), abs=1e-6)
    loss = F.cross_entropy(F.one_hot(inputs, vocab).float().flatten(0, 1) * 3, targets.flatten(), ignore_index=-100)
    assert metrics["val/loss"] == pytest.approx(float(loss), abs=1e-6)
    assert metrics["val/ppl"] == pytest.approx(math.exp(float(loss)), rel=1e-5)


# ---------------------------------------------------------------------------------------------- 2, 3. evaluations and predict


@pytest.mark.slow
def test_evaluations_never_change_what_fit_resumes(in_tmp, finished_run, capsys):
    copy_runs(finished_run(TINY_VIT), in_tmp)  # `fit *TINY_VIT`, trained once for the session
    [run] = list(in_tmp.glob("runs/quickstart/vit_digits/standard/seed_0/version_*"))
    images = in_tmp / "images"
    images.mkdir()
    for i in range(3):
        Image.new("L", (8, 8), i * 80).save(images / f"{i}.png")
    assert run_main(["validate", *TINY_VIT, "--ckpt_path=last"]) == 0
    assert run_main(["test", *TINY_VIT, "--ckpt_path=best"]) == 0
    assert run_main(["predict", *TINY_VIT, "--ckpt_path=last", f"--data.predict_files={images}"]) == 0
    assert sorted(p.name for p in (run / "evaluations").iterdir()) == ["predict_0", "test_0", "validate_0"]
    rows = [json.loads(line) for line in (run / "evaluations/predict_0/predictions.jsonl").read_text().splitlines()]
    assert [Path(row["input"]).name for row in rows] == ["0.png", "1.png", "2.png"]
    assert all(sum(row["probabilities"].values()) == pytest.approx(1.0, abs=1e-4) for row in rows)
    assert all(row["prediction"] == max(row["probabilities"], key=row["probabilities"].get) for row in rows)
    capsys.readouterr()
    # fit --ckpt_path last continues the training run, not one of its evaluations.
    assert run_main(["fit", *TINY_VIT, "--trainer.max_epochs=2", "--ckpt_path=last"]) == 0
    assert "nothing to resume" not in capsys.readouterr().err
    assert list(in_tmp.glob("runs/quickstart/vit_digits/standard/seed_0/version_*")) == [run]
    assert json.loads((run / "record.json").read_text())["curve"][-1][0] == 1  # it trained epoch 1


def train_and_predict(args: list[str], inputs: Path, extra_predict: list[str] = ()) -> list[dict]:
    assert run_main(["fit", *args]) == 0
    assert run_main(["predict", *args, "--ckpt_path=last", f"--data.predict_files={inputs}", *extra_predict]) == 0
    [path] = Path.cwd().glob("runs/**/evaluations/predict_*/predictions.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_predict_continues_prompts_with_a_trained_gpt(in_tmp):
    prompts = in_tmp / "prompts.txt"
    prompts.write_text("def main():\n\nimport os\n    return x\n")  # the empty line is skipped
    rows = train_and_predict(
        [*TINY_GPT, f"--data.data_dir={in_tmp / 'data'}"], prompts, ["--model.max_new_tokens=5", "--model.temperature=0"]
    )
    assert [row["prompt"] for row in rows] == ["def main():", "import os", "    return x"]
    assert all(len(row["continuation"].encode("utf-8", errors="surrogateescape")) >= 1 for row in rows)


@pytest.mark.slow
def test_predict_classifies_texts(in_tmp, capsys):
    files = write_reviews(in_tmp / "reviews")
    texts = in_tmp / "texts.txt"
    texts.write_text("a fine film\nterrible\n" + "long " * 2000 + "\n")  # the last one is cut to max_len
    args = [
        "--model=TextClassifier",
        "--data=TextClassificationDataModule",
        "--data.dataset=null",
        f"--data.data_files={files}",
        "--data.max_len=24",
        "--data.batch_size=8",
        f"--data.data_dir={in_tmp / 'data'}",
        f"--data.hf_cache_dir={in_tmp / 'hf'}",
        "--model.net.dim=16",
        "--model.net.num_heads=2",
        "--model.net.depth=1",
        "--trainer.max_steps=2",
        "--trainer.limit_val_batches=1",
        *QUIET,
    ]
    rows = train_and_predict(args, texts)
    assert [row["input"] for row in rows][:2] == ["a fine film", "terrible"] and len(rows) == 3
    assert "note: 1 of 3 input(s) are longer than max_len=24 tokens" in capsys.readouterr().out
    assert all(set(row["probabilities"]) == {"neg", "neutral", "pos"} for row in rows)  # the data's label names


@pytest.mark.slow
def test_predict_translates_sentences(in_tmp):
    sources = in_tmp / "sources.txt"
    sources.write_text("the cat sleeps\na green house\n")
    args = [
        "--model=Seq2SeqTranslator",
        "--data=TranslationDataModule",
        "--data.dataset=null",
        f"--data.data_files={{train: {write_pairs_json(in_tmp / 'pairs.jsonl', 40)}}}",
        "--data.tokenizer=bytes",
        "--data.batch_size=4",
        "--data.max_src_len=24",
        "--data.max_tgt_len=24",
        f"--data.hf_cache_dir={in_tmp / 'hf'}",
        "--model.net.dim=16",
        "--model.net.num_heads=2",
        "--model.net.encoder_depth=1",
        "--model.net.decoder_depth=1",
        "--model.beam_size=2",
        "--model.bleu_batches=1",
        "--trainer.max_steps=2",
        "--trainer.limit_val_batches=1",
        *QUIET,
    ]
    rows = train_and_predict(args, sources)
    assert [row["source"] for row in rows] == ["the cat sleeps", "a green house"]
    assert all(isinstance(row["translation"], str) for row in rows)


# ---------------------------------------------------------------------------------------------- 4, 5. bad input


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def sharded_checkpoint(path: Path) -> str:
    """A directory where a checkpoint file is expected, as FSDP's sharded checkpoints are written."""
    path.mkdir()
    (path / ".metadata").write_bytes(b"")
    return str(path)


def image_tree(root: Path, empty_class: bool = False, corrupt: bool = False) -> str:
    for name in ("cat", "dog"):
        (root / "train" / name).mkdir(parents=True)
        if empty_class and name == "dog":
            continue
        for i in range(8):
            Image.new("RGB", (16, 16), (i * 30, 0, 0)).save(root / "train" / name / f"{i}.png")
    if corrupt:
        (root / "train" / "dog" / "broken.png").write_bytes(b"\x89PNG but not really")
    return str(root)


FOLDER = ["--data.dataset=imagefolder", "--model.net.patch_size=8", "--data.batch_size=4"]
# case: (arguments given the test directory, the words the one sentence must hold)
BAD_INPUTS = {
    "malformed axes spec": (
        lambda d: [*TINY_VIT, "--model.attention=query=residual_mlp,key"],
        "Malformed attention spec 'query=residual_mlp,key': 'key' is not an axis=option pair",
    ),
    "zero learning rate": (lambda d: [*TINY_VIT, "--model.lr=0"], "lr=0.0 is invalid; it must be > 0."),
    "negative max_steps": (lambda d: [*TINY_VIT, "--trainer.max_steps=-5"], "--trainer.max_steps -5 is invalid"),
    "zero max_steps": (lambda d: [*TINY_VIT, "--trainer.max_steps=0"], "--trainer.max_steps 0 is invalid"),
    "zero max_epochs": (lambda d: [*TINY_VIT, "--trainer.max_epochs=0"], "--trainer.max_epochs 0 is invalid"),
    "empty class folder": (
        lambda d: [*TINY_VIT, *FOLDER, f"--data.data_dir={image_tree(d / 'empty', empty_class=True)}"],
        "has class folders without images",
    ),
    "corrupt image mid-training": (
        lambda d: [
            *TINY_VIT,
            *FOLDER,
            f"--data.data_dir={image_tree(d / 'bad', corrupt=True)}",
            "--trainer.limit_train_batches=null",
        ],
        "broken.png' cannot be read",
    ),
    "run root that is a file": (lambda d: [*TINY_VIT, f"--run.root={write(d / 'afile', 'x')}"], "Cannot write runs into"),
    "gpu preset without a gpu": (
        lambda d: [*TINY_VIT, "--config", str(ROOT / "recipes/trainer/gpu_bf16.yaml")],
        "--trainer.accelerator gpu asks for a GPU but none is visible here",
    ),
    "ddp preset without a gpu": (
        lambda d: [*TINY_VIT, "--config", str(ROOT / "recipes/trainer/ddp.yaml")],
        "asks for a GPU but none is visible here",
    ),
    "yaml syntax error": (
        lambda d: ["--config", write(d / "broken.yaml", "model:\n  init_args:\n   dim: [\n")],
        "broken.yaml' is not valid YAML",
    ),
    "misspelt task": (
        lambda d: [*TINY_VIT, "--model=ImageClassifer"],
        "--model 'ImageClassifer' is not one of this suite's classes; valid choices are CausalLanguageModel",
    ),
    "bad precision": (
        lambda d: [*TINY_VIT, "--trainer.precision=17"],
        "--trainer.precision '17' is invalid; valid choices are 64, 32, 16",
    ),
    "misspelt hub dataset": (
        lambda d: ["--model=TextClassifier", "--data=TextClassificationDataModule", "--data.dataset=stanfordnlp/imbd"],
        "'stanfordnlp/imbd' is not one of the hub datasets this suite knows",
    ),
    "max_len below the data's": (
        lambda d: [*TINY_GPT, "--model.net.max_len=8"],
        "--model.net.max_len 8 conflicts with the data: LanguageModelingDataModule gives max_len=16",
    ),
    "model sizes the data sets": (
        lambda d: [*TINY_VIT, "--model.net.in_channels=3"],
        "--model.net.in_channels 3 conflicts with the data: ImageDataModule gives in_channels=1",
    ),
    "predict without a checkpoint": (lambda d: ["predict", *TINY_VIT], "predict needs a trained model"),
    "predict without files": (lambda d: ["predict", *TINY_VIT, "--ckpt_path=last"], "nothing to predict on"),
    "optimizer override": (lambda d: [*TINY_VIT, "--optimizer=SGD"], "--optimizer is not available"),
    "sharded FSDP checkpoints": (
        lambda d: [
            *TINY_VIT,
            "--trainer.strategy=lightning.pytorch.strategies.FSDPStrategy",
            "--trainer.strategy.state_dict_type=sharded",
        ],
        "--trainer.strategy.state_dict_type 'sharded' is not supported",
    ),
    "a checkpoint directory": (
        lambda d: [*TINY_VIT, f"--ckpt_path={sharded_checkpoint(d / 'model.ckpt')}"],
        "model.ckpt' is a directory",
    ),
    "attention setting given twice": (
        lambda d: [*TINY_VIT, "--model.attention=super,value_mix_init=xavier,value_mix_init=normal"],
        "sets value_mix_init twice (value_mix_init=xavier and value_mix_init=normal); give each axis or setting once.",
    ),
    "recipe that is a directory": (
        lambda d: ["--config", str(ROOT / "recipes")],
        "recipes' is a directory; pass one YAML file in it, such as recipes/quickstart",
    ),
    "checkpoint that is a directory": (
        lambda d: [*TINY_VIT, f"--ckpt_path={d / 'runs'}"],
        "runs' is a directory; pass a checkpoint file, such as",
    ),
    "validate over no batches": (
        lambda d: ["validate", *TINY_VIT, "--ckpt_path=last", "--trainer.limit_val_batches=0"],
        "--trainer.limit_val_batches 0 leaves validate nothing to do",
    ),
    "fit testing no batches": (
        lambda d: [*TINY_VIT, "--run.test=true", "--trainer.limit_test_batches=0"],
        "--trainer.limit_test_batches 0 leaves --run.test nothing to do",
    ),
}
FOUND_LATE = {"corrupt image mid-training"}  # a file is only read when its batch comes


@pytest.mark.parametrize("case", list(BAD_INPUTS))
@pytest.mark.slow
def test_bad_input_is_one_sentence_and_nothing_written_changes(case, in_tmp, finished_run, capsys):
    # A finished run of the same recipe is on disk (a copy of `fit *TINY_VIT`): no bad command may change a byte of it.
    copy_runs(finished_run(TINY_VIT), in_tmp)
    before = checksums(in_tmp / "runs")
    capsys.readouterr()
    make_args, message = BAD_INPUTS[case]
    args = make_args(in_tmp)
    command = args if args[0] in ("predict", "fit", "validate") else ["fit", *args]
    assert run_main(command) == 2
    stderr = capsys.readouterr().err
    assert message in stderr and "Traceback" not in stderr, stderr[-2000:]
    error_line = next(line for line in stderr.splitlines() if line.startswith("error: "))
    assert error_line.endswith(".")
    after = checksums(in_tmp / "runs")
    assert {k: v for k, v in after.items() if k in before} == before  # nothing already written changed
    if case not in FOUND_LATE:
        assert set(after) == set(before), "a failed start left files behind"
    assert not [p for p in (in_tmp / "runs").rglob("version_*") if p.is_dir() and not any(p.iterdir())]


@pytest.mark.parametrize("command", ["fit", "validate"])
@pytest.mark.slow
def test_ckpt_path_last_on_a_checkpoint_directory_is_one_sentence(command, in_tmp, finished_run, capsys):
    [last] = copy_runs(finished_run(TINY_VIT), in_tmp).glob("**/checkpoints/last.ckpt")
    last.unlink()
    sharded_checkpoint(last)
    before = checksums(in_tmp / "runs")
    capsys.readouterr()
    assert run_main([command, *TINY_VIT, "--ckpt_path=last"]) == 2
    assert "last.ckpt' is a directory" in capsys.readouterr().err  # not a new run beside it
    assert checksums(in_tmp / "runs") == before


def test_compare_into_an_unwritable_output_is_one_sentence(in_tmp, capsys):
    assert run_main(["compare", "--config", VIT, "--variants", "standard", "--output", write(in_tmp / "afile", "x")]) == 2
    assert "Cannot write runs into" in capsys.readouterr().err


@pytest.mark.slow
def test_a_compare_refused_at_planning_leaves_no_new_output_and_an_old_one_as_it_was(in_tmp, capsys):
    """--primary is checked against the plan, after the output's lock is taken: a refusal there must not
    leave behind the folder this command made, nor touch one that held a sweep."""
    bad = ["compare", "--config", VIT, "--variants", "standard,super", "--primary", "sup3r"]
    assert run_main([*bad, "--output", "new"]) == 2
    assert "names an arm this sweep does not have" in capsys.readouterr().err
    assert not (in_tmp / "new").exists()
    old = in_tmp / "old"
    (old / "runs").mkdir(parents=True)
    write(old / "runs" / "kept.txt", "a run")
    write(old / ".compare.lock", "")
    before = checksums(old)
    assert run_main([*bad, "--output", "old"]) == 2
    after = checksums(old)
    assert set(after) == set(before)  # nothing added, nothing taken away
    del after[".compare.lock"], before[".compare.lock"]  # the lock file names its last holder, by design
    assert after == before


# ---------------------------------------------------------------------------------------------- 6. what you see is what runs


def test_planning_a_run_does_not_announce_a_seed(caplog):
    """compare plans every arm x point before it trains: Lightning's "Seed set to N" for each was noise
    (the runs themselves still say it). The logger's level is put back."""
    logger = logging.getLogger(SEED_LOGGER)
    before = logger.level
    with caplog.at_level(logging.INFO):
        plan_run(TINY_GPT)
    assert "Seed set to" not in caplog.text and logger.level == before


def test_a_larger_max_len_than_the_data_is_kept_and_sizes_super():
    plan = plan_run([*TINY_GPT, "--model.attention=super", "--model.net.max_len=40"])
    assert plan.config.model.init_args.net.max_len == 40
    assert plan.model.model.blocks[0].attn.value_mix.shape == (40, 40)  # W_A's size is the user's choice


def test_imagefolder_takes_its_image_size_from_the_data_and_warns_on_huge_token_counts(tmp_path):
    from datamodules import ImageDataModule

    dm = ImageDataModule(dataset="imagefolder", data_dir=image_tree(tmp_path / "tree"))
    assert dm.model_sizes() == {"num_classes": 2, "image_size": 16, "in_channels": 3}
    with pytest.warns(UserWarning, match="224x224 images in 2x2 patches make 12,544 tokens per image"):
        with torch.device("meta"):
            ImageClassifier(net=dict(num_classes=2, image_size=224, in_channels=3, patch_size=2, dim=16, num_heads=2, depth=1))


# ---------------------------------------------------------------------------------------------- 7. one run, one process


class HeldSteps(L.Callback):
    """Holds the run before its second step (the first one's last.ckpt written) until the test kills it
    (at most 5 minutes): the run is surely still going while the test does its part, however loaded
    the machine."""

    def on_train_batch_start(self, trainer, *args) -> None:
        if trainer.global_step >= 1:
            time.sleep(300)


@pytest.mark.slow
def test_a_second_process_cannot_resume_a_running_run(in_tmp, capsys):
    """The first run is a real process (the lock is the kernel's, held until it dies); the second
    command runs in this test's process, another process than the first."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    args = [
        "fit",
        *TINY_VIT,
        "--trainer.limit_train_batches=40",
        "--run.checkpoint_every_n_steps=1",
        "--trainer.callbacks+=test_commands.HeldSteps",
    ]
    first = subprocess.Popen(
        [sys.executable, "-m", "lit_attention", *args], cwd=in_tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        while not list(in_tmp.glob("runs/**/last.ckpt")) and time.monotonic() < deadline:
            time.sleep(0.1)
        capsys.readouterr()
        status = run_main([*args, "--ckpt_path=last"])
        assert first.poll() is None, "the first run ended before the second started"
        assert status == 2
        assert f"is in use by process {first.pid} on" in capsys.readouterr().err
        assert len(list(in_tmp.glob("runs/**/version_*"))) == 1
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()


# ---------------------------------------------------------------------------------------------- 8. monitoring


def test_model_help_lists_the_variants(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--model.help", "CausalLanguageModel"])
    shown = " ".join(capsys.readouterr().out.split())
    from lit_attention.modeling.attention import list_presets

    assert all(name in shown for name in list_presets()), shown[:2000]


def test_attention_maps_have_a_log_colour_scale_and_a_colour_bar():
    weights = torch.tril(torch.rand(6, 6)).softmax(-1) * torch.tril(torch.ones(6, 6))
    figure = attention_figure(weights, "blocks.0.attn")
    image_axes, bar_axes = figure.axes
    assert type(image_axes.images[0].norm).__name__ == "LogNorm" and "log scale" in bar_axes.get_ylabel()


def test_nan_message_offers_resume_only_when_a_checkpoint_exists():
    class Loop:
        batch_idx = 3

    class FakeTrainer:
        global_step, current_epoch, callbacks = 5, 0, []
        fit_loop = type("FitLoop", (), {"epoch_loop": Loop()})()

    message = nonfinite_message(FakeTrainer(), torch.tensor(float("nan")))
    assert "no checkpoint was written before it" in message and "--ckpt_path last" not in message


@pytest.mark.slow
def test_progress_shows_the_step_and_no_negative_epoch_count(in_tmp, capsys):
    assert run_main(["fit", *TINY_GPT, f"--data.data_dir={in_tmp / 'data'}", "--trainer.enable_progress_bar=true"]) == 0
    shown = capsys.readouterr().out  # Lightning's bars write to stdout
    assert "step 4/4" in shown and "/-2" not in shown and "v_num" not in shown


@pytest.mark.slow
def test_a_run_directory_as_checkpoint_names_its_last_checkpoint(in_tmp, finished_run, capsys):
    copy_runs(finished_run(TINY_VIT), in_tmp)
    [run] = (in_tmp / "runs").glob("**/version_0")
    assert run_main(["validate", *TINY_VIT, f"--ckpt_path={run}"]) == 2
    assert (
        f"Checkpoint {str(run)!r} is a directory; pass a checkpoint file, such as "
        f"{str(run / 'checkpoints/last.ckpt')!r}, or last or best"
    ) in capsys.readouterr().err
