"""The global random states (torch, CUDA, numpy, Python) as a checkpoint carries them.

`random_states` / `set_random_states`: one process's states as tensors and plain values (so that
Lightning's `weights_only` checkpoint loading accepts them), and their restore, which sets the CUDA
states of the devices visible here and returns a line saying which saved ones it could not set (a
run saved on 8 GPUs resumed on 4, or on CPU).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def random_states() -> dict[str, Any]:
    """This process's torch, CUDA, numpy and Python random states."""
    _, keys, position, has_gauss, gauss = np.random.get_state()
    version, python_state, python_gauss = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": {"keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(position),
                  "has_gauss": int(has_gauss), "gauss": float(gauss)},
        "python": [version, list(python_state), python_gauss],
    }


def set_random_states(states: dict[str, Any]) -> str | None:
    """Restore `states`; a sentence when some saved CUDA states have no visible device here."""
    torch.set_rng_state(states["torch"])
    note = set_cuda_states(states["cuda"])
    numpy = states["numpy"]
    np.random.set_state(("MT19937", numpy["keys"].numpy().astype(np.uint32), numpy["pos"], numpy["has_gauss"], numpy["gauss"]))
    version, python_state, python_gauss = states["python"]
    random.setstate((version, tuple(python_state), python_gauss))
    return note


def set_cuda_states(saved: list[torch.Tensor]) -> str | None:
    # Device i's state goes to visible device i, as torch.cuda.set_rng_state_all does; that function
    # indexes devices by the saved list and fails on the first one that is not visible.
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for device, state in enumerate(saved[:visible]):
        torch.cuda.set_rng_state(state, device)
    if len(saved) <= visible:
        return None
    missing = f" {visible}" if len(saved) == visible + 1 else f"s {visible}-{len(saved) - 1}"
    return (f"Resumed without the CUDA random states of device{missing}: the checkpoint holds "
            f"{len(saved)} CUDA devices' states and {visible} are visible here, so the random draws (dropout) "
            "on those devices are not the ones an uninterrupted run would make.")
