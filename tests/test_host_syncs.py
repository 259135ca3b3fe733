"""A training step does not make the host wait for the device, except on the steps where the loggers,
the progress bar and the NaN guard read their values (every `log_every_n_steps`).

On a GPU, reading a tensor's value on the host (`.item()`, `bool()`, `int()`, `float()`, `.tolist()`)
waits for every queued kernel, and so do the operations whose output size depends on the values
(`torch.unique` in torchmetrics' argument checks, `torch.bincount` in its class counts, a boolean-mask
index). No GPU is needed to see where those happen: the test wraps them and counts them per training
step of a real `lit-attention fit`, through every default callback, the progress bar shown.

What this proves: none of those on the steps between two logging steps. What it cannot see: any other
operation that syncs inside torch (only a GPU shows those: torch.cuda.set_sync_debug_mode), and the copy
of a Python number to the device (`self.log` of a float), which the code avoids by reading.
"""

import collections
import traceback
from pathlib import Path

import pytest
import torch

from in_process import run_main  # tests/ is on sys.path under pytest (in_tmp: conftest.py)
from lit_attention.training.tasks.base import TaskModule
from test_commands import QUIET, TINY_GPT, TINY_VIT
from test_datamodules_text import write_pairs_json

HOST_READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")
EVERY = 3  # log_every_n_steps
STEPS = 7


def translation(tmp: Path) -> list[str]:
    return [
        "--model=Seq2SeqTranslator",
        "--data=TranslationDataModule",
        "--data.dataset=null",
        f"--data.data_files={{train: {write_pairs_json(tmp / 'pairs.jsonl', 80)}}}",
        "--data.tokenizer=bytes",
        "--data.batch_size=4",
        "--data.max_src_len=24",
        "--data.max_tgt_len=24",
        f"--data.hf_cache_dir={tmp / 'hf'}",
        "--model.net.dim=16",
        "--model.net.num_heads=2",
        "--model.net.encoder_depth=1",
        "--model.net.decoder_depth=1",
        "--model.bleu_batches=1",
        *QUIET,
    ]


RUNS = {
    "image classification": lambda tmp: TINY_VIT,
    "language model": lambda tmp: [*TINY_GPT, f"--data.data_dir={tmp / 'data'}"],
    "translation": translation,
}


def reads_per_step(monkeypatch, args: list[str]) -> dict[int, list[str]]:
    """{training batch index: the host reads from that batch's start to the next one's, by call site}."""
    batch = [-1]
    reads: dict[int, list[str]] = collections.defaultdict(list)
    on_train_batch_start = TaskModule.on_train_batch_start

    def next_batch(self, *args, **kwargs):
        batch[0] += 1
        return on_train_batch_start(self, *args, **kwargs)

    def counted(name, read):
        def wrapper(*args, **kwargs):
            if batch[0] >= 0:
                frames = [frame for frame in traceback.extract_stack() if frame.filename != __file__]
                site = frames[-1]
                # Not syncs: the DataLoader collating the next batch on the host, and AdamW's step counts,
                # host tensors unless it is fused or capturable (fused on GPUs).
                loading = any("torch/utils/data/" in frame.filename for frame in frames)
                if not loading and "torch/optim/" not in site.filename:
                    reads[batch[0]].append(f"{name} at {site.filename}:{site.lineno}")
            return read(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(TaskModule, "on_train_batch_start", next_batch)
    for name in HOST_READS:
        monkeypatch.setattr(torch.Tensor, name, counted(name, getattr(torch.Tensor, name)))
    monkeypatch.setattr(torch, "unique", counted("torch.unique", torch.unique))
    monkeypatch.setattr(torch, "bincount", counted("torch.bincount", torch.bincount))
    index = torch.Tensor.__getitem__
    by_mask = counted("a boolean-mask index", index)

    def getitem(self, key):  # a mask's True count sizes the result: the host reads it
        keys = key if isinstance(key, tuple) else (key,)
        masked = any(isinstance(k, torch.Tensor) and k.dtype == torch.bool for k in keys)
        return (by_mask if masked else index)(self, key)

    monkeypatch.setattr(torch.Tensor, "__getitem__", getitem)
    # One epoch longer than the steps (an epoch's end reads its metrics), no validation.
    status = run_main(
        [
            "fit",
            *args,
            f"--trainer.max_steps={STEPS}",
            "--trainer.max_epochs=2",
            f"--trainer.limit_train_batches={STEPS + 1}",
            "--trainer.limit_val_batches=0",
            f"--trainer.log_every_n_steps={EVERY}",
            "--trainer.enable_progress_bar=true",
        ]
    )
    assert status == 0
    assert batch[0] == STEPS - 1
    return reads


@pytest.mark.slow
@pytest.mark.parametrize("task", RUNS)
def test_training_steps_read_the_device_only_every_n_steps(in_tmp, monkeypatch, task):
    reads = reads_per_step(monkeypatch, RUNS[task](in_tmp))
    logging = [k for k in range(STEPS) if (k + 1) % EVERY == 0]  # the batches after which global_step % N == 0
    quiet = [k for k in range(1, STEPS - 1) if k not in logging]  # not the first (its checks) or the last (the end)
    assert quiet and all(not reads[k] for k in quiet), {k: reads[k] for k in quiet}
    # The counter does see reads: the loggers, the progress bar and the NaN guard read on logging steps.
    assert all(reads[k] for k in logging), dict(reads)


def test_the_language_models_training_accuracy_is_torchmetrics_micro_accuracy():
    from torchmetrics.classification import MulticlassAccuracy

    from lit_attention.training.tasks.language_modeling import IGNORE, ScoredAccuracy

    generator = torch.Generator().manual_seed(0)
    ours, theirs = ScoredAccuracy(), MulticlassAccuracy(7, average="micro", ignore_index=IGNORE)
    for _ in range(3):
        predictions, targets = (torch.randint(0, 7, (4, 9), generator=generator) for _ in range(2))
        targets[torch.rand(4, 9, generator=generator) < 0.4] = IGNORE  # MQAR scores only some positions
        ours.update(predictions, targets)
        theirs.update(predictions, targets)
    assert ours.compute().item() == pytest.approx(theirs.compute().item(), abs=1e-7)
    assert 0 < ours.compute() < 1


def test_the_classifiers_training_metrics_are_torchmetrics_validation_metrics():
    from lit_attention.training.tasks.classification import TrainingClassificationMetrics, classification_metrics

    generator = torch.Generator().manual_seed(0)
    for classes in (3, 12):
        ours, theirs = TrainingClassificationMetrics(classes), classification_metrics(classes)
        for _ in range(3):
            labels = torch.randint(0, classes - 1, (16,), generator=generator)  # the last class never occurs
            logits = torch.randn(16, classes, generator=generator)
            ours.update(logits, labels)
            theirs.update(logits, labels)
        expected = {name: value.item() for name, value in theirs.compute().items()}
        found = {name: value.item() for name, value in ours.compute().items()}
        assert found.keys() == expected.keys() and found == pytest.approx(expected, abs=1e-6)
