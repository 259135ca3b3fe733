"""A training step does not make the host wait for the device, except on the steps where the loggers,
the progress bar and the NaN guard read their values (every `log_every_n_steps`).

On a GPU, reading a tensor's value on the host (`.item()`, `bool()`, `int()`, `float()`, `.tolist()`)
waits for every queued kernel. No GPU is needed to see where those reads happen: the test wraps them
(and `torch.unique`, whose output size torchmetrics' argument checks read) and counts them per
training step of a real `lit-attention fit`, through every default callback, the progress bar shown.

What this proves: no Python-level read of a tensor's value on the steps between two logging steps.
What it cannot see: syncs inside a single torch operation (`torch.bincount` in torchmetrics' update,
a boolean-mask index), which only a GPU shows (torch.cuda.set_sync_debug_mode).
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
    return ["--model=Seq2SeqTranslator", "--data=TranslationDataModule", "--data.dataset=null",
            f"--data.data_files={{train: {write_pairs_json(tmp / 'pairs.jsonl', 80)}}}", "--data.tokenizer=bytes",
            "--data.batch_size=4", "--data.max_src_len=24", "--data.max_tgt_len=24", f"--data.hf_cache_dir={tmp / 'hf'}",
            "--model.net.dim=16", "--model.net.num_heads=2", "--model.net.encoder_depth=1", "--model.net.decoder_depth=1",
            "--model.bleu_batches=1", *QUIET]


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
                frames = traceback.extract_stack()[:-1]
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
    # One epoch longer than the steps (an epoch's end reads its metrics), no validation.
    status = run_main(["fit", *args, f"--trainer.max_steps={STEPS}", "--trainer.max_epochs=2",
                       f"--trainer.limit_train_batches={STEPS + 1}", "--trainer.limit_val_batches=0",
                       f"--trainer.log_every_n_steps={EVERY}", "--trainer.enable_progress_bar=true"])
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
