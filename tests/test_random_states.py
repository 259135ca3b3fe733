"""The random states a checkpoint carries: restored where they fit, and said in one line where not;
under DDP every rank's own, and each rank draws its own dropout masks."""

import contextlib
import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lit_attention.training.checkpointing import ExactResume
from lit_attention.training.random_states import random_states
from in_process import OFFLINE  # tests/ is on sys.path under pytest

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def lightning_lines():
    """What Lightning's logger prints meanwhile (its handler writes to the stderr of its import time)."""
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    logger = logging.getLogger("lightning.pytorch")
    logger.addHandler(handler)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)


def cuda_states(count: int) -> list[torch.Tensor]:
    """`count` CUDA generator states as `torch.cuda.get_rng_state_all` returns them (seed and offset)."""
    if torch.cuda.is_available():
        torch.cuda.manual_seed(11)
        return [torch.cuda.get_rng_state(0).clone() for _ in range(count)]
    return [torch.arange(16, dtype=torch.uint8) + i for i in range(count)]


def test_a_checkpoint_from_more_cuda_devices_restores_those_visible_and_says_which_were_not():
    visible = torch.cuda.device_count()  # 0 here: a checkpoint of a 2-GPU run resumed on CPU
    state = {**random_states(), "cuda": cuda_states(visible + 2)}
    saved_torch = torch.get_rng_state()
    torch.manual_seed(123)
    with lightning_lines() as printed:
        ExactResume().load_state_dict(state)
    assert torch.equal(torch.get_rng_state(), saved_torch)
    for device in range(visible):
        assert torch.equal(torch.cuda.get_rng_state(device), cuda_states(visible + 2)[device])
    [line] = printed.getvalue().splitlines()
    assert f"{visible + 2} CUDA devices" in line and f"{visible} are visible" in line, line


# A 2-process gloo DDP run of a tiny ViT with dropout: 4 steps straight, its step-2 checkpoint kept
# by Lightning's own ModelCheckpoint, and a second run resumed from that checkpoint.
DDP_VIT = ["fit", "--config", str(ROOT / "recipes/quickstart/vit_digits.yaml"), "--trainer.accelerator=cpu",
           "--trainer.devices=2", "--trainer.strategy=ddp", "--trainer.max_steps=4", "--trainer.limit_train_batches=4",
           "--trainer.limit_val_batches=1", "--trainer.enable_progress_bar=false", "--model.warmup_steps=1",
           "--model.net.dim=16", "--model.net.num_heads=2", "--model.net.depth=1", "--model.net.dropout=0.5",
           "--data.batch_size=16", "--trainer.deterministic=true"]
EVERY_TWO_STEPS = ["--trainer.callbacks+=lightning.pytorch.callbacks.ModelCheckpoint",
                   "--trainer.callbacks.every_n_train_steps=2", "--trainer.callbacks.save_top_k=-1"]


def fit(args: list[str], cwd: Path) -> None:
    env = {**os.environ, **OFFLINE, "OMP_NUM_THREADS": "1"}  # bit-exact sums need the same thread count
    done = subprocess.run([sys.executable, "-m", "lit_attention", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
def test_ddp_resume_is_exact_on_every_rank_and_the_ranks_draw_their_own_dropout_masks(tmp_path):
    steps = tmp_path / "steps"
    fit([*DDP_VIT, "--run.root=straight", *EVERY_TWO_STEPS, f"--trainer.callbacks.dirpath={steps}"], tmp_path)
    middle = steps / "epoch=0-step=2.ckpt"
    fit([*DDP_VIT, "--run.root=resumed", f"--ckpt_path={middle}"], tmp_path)
    [resumed] = tmp_path.glob("resumed/**/checkpoints/last.ckpt")
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
