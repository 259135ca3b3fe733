"""Whether a configured model can fit in the memory of the machine it would run on, from the model built
on the meta device (no memory used): a size that cannot fit is refused before anything is allocated,
instead of an allocator failure minutes later."""

from __future__ import annotations

import os

import torch
from torch import nn

from lit_attention.errors import ConfigError

# Bytes per parameter that training holds at the least: float32 weights, their gradients and AdamW's
# two moments. Activations come on top, so the estimate is a lower bound.
TRAINING_BYTES = 16
WEIGHT_BYTES = 4
HINT = (
    "make it smaller: --model.net.dim, --model.net.depth, --model.net.mlp_ratio, or the lengths and vocabulary "
    "it takes from the data (--data.max_len)"
)


def machine_memory(on_cpu: bool) -> tuple[int, str] | None:
    """(bytes, what they are) of the memory one process of the run can use, or None when unknown."""
    if not on_cpu and torch.cuda.is_available():
        return torch.cuda.get_device_properties(0).total_memory, f"{torch.cuda.get_device_name(0)}'s memory"
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "this machine's memory"
    except (OSError, ValueError):
        return None


def check_fits_memory(model: nn.Module, training: bool, on_cpu: bool, hint: str = HINT) -> None:
    """Refuse a model whose parameters alone (with gradients and optimizer state when `training`) need
    more than the device has; `hint` says which settings make it large."""
    parameters = sum(p.numel() for p in model.parameters())
    need = parameters * (TRAINING_BYTES if training else WEIGHT_BYTES)
    memory = machine_memory(on_cpu)
    if memory is None or need <= memory[0]:
        return
    what = (
        "float32 weights, gradients and AdamW's two moments: 16 bytes a parameter"
        if training
        else "float32 weights: 4 bytes a parameter"
    )
    raise ConfigError(
        f"The configured model has {parameters:,} parameters and needs at least {gigabytes(need)} "
        f"({what}, before any activations), more than {memory[1]} ({gigabytes(memory[0])}); {hint}."
    )


def gigabytes(count: int) -> str:
    return f"{count / 1e9:,.1f} GB"
