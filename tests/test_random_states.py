"""The random states a checkpoint carries: restored where they fit, and said in one line where not.
Under DDP every rank's own, each rank drawing its own dropout masks: test_ddp_results.py, on its DDP run."""

import contextlib
import io
import logging

import torch

from lit_attention.training.checkpointing import ExactResume
from lit_attention.training.random_states import random_states


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

