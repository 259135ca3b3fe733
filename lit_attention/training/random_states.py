"""The global random states (torch, CUDA, numpy, Python) as a checkpoint carries them, per rank.

* `random_states` / `set_random_states`: one process's states as tensors and plain values (so that
  Lightning's `weights_only` checkpoint loading accepts them), and their restore. The CUDA state is the
  one of the device the process draws on, restored onto the device it draws on when it resumes, so
  global rank r resumes rank r's stream on any node layout (2 x 8 GPUs resumed as 4 x 4); a line says
  when it cannot be set (resumed on CPU).
* `gathered_random_states` / `restore_own_states`: under DDP or FSDP each rank draws its own dropout
  masks, so the one checkpoint holds every rank's states (gathered to all, written by rank 0) and
  each rank restores its own. A checkpoint from before holds one process's states, which every rank
  then restores, as it used to.
* `seed_own_stream`: with one seed on every rank every rank would draw the same dropout masks;
  rank r > 0 reseeds torch's generators from (seed, r) once the model is built. Data order and
  augmentation never draw from them (datamodules/loaders.py, augmentation.py), so they stay a
  function of the seed only, and rank 0 (a one-device run too) draws what it always drew.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from datamodules.loaders import global_seed


def random_states() -> dict[str, Any]:
    """This process's torch, CUDA, numpy and Python random states."""
    _, keys, position, has_gauss, gauss = np.random.get_state()
    version, python_state, python_gauss = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        # Only the device this process draws on (Lightning has made it the current one): a rank's state is
        # then its own wherever it resumes, whichever device index its rank gets on another node layout.
        "cuda_own": torch.cuda.get_rng_state(torch.cuda.current_device()) if torch.cuda.is_available() else None,
        "numpy": {
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(position),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
        "python": [version, list(python_state), python_gauss],
    }


def set_random_states(states: dict[str, Any]) -> str | None:
    """Restore `states`; a sentence when some saved CUDA states have no visible device here."""
    torch.set_rng_state(states["torch"])
    note = set_own_cuda_state(states["cuda_own"]) if "cuda_own" in states else set_cuda_states(states["cuda"])
    numpy = states["numpy"]
    np.random.set_state(("MT19937", numpy["keys"].numpy().astype(np.uint32), numpy["pos"], numpy["has_gauss"], numpy["gauss"]))
    version, python_state, python_gauss = states["python"]
    random.setstate((version, tuple(python_state), python_gauss))
    return note


def set_own_cuda_state(saved: torch.Tensor | None) -> str | None:
    """This process's saved CUDA state, set on the device it draws on now."""
    if saved is None:
        return None
    if not torch.cuda.is_available():
        return (
            "Resumed without CUDA: the checkpoint's CUDA random states are not used, so the random draws "
            "(dropout) are not the ones an uninterrupted run on GPUs would make."
        )
    torch.cuda.set_rng_state(saved, torch.cuda.current_device())
    return None


def set_cuda_states(saved: list[torch.Tensor]) -> str | None:
    # A checkpoint written before `cuda_own` holds every visible device's state, by device index.
    # Device i's state goes to visible device i, as torch.cuda.set_rng_state_all does; that function
    # indexes devices by the saved list and fails on the first one that is not visible.
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for device, state in enumerate(saved[:visible]):
        torch.cuda.set_rng_state(state, device)
    if len(saved) <= visible:
        return None
    missing = f" {visible}" if len(saved) == visible + 1 else f"s {visible}-{len(saved) - 1}"
    return (
        f"Resumed without the CUDA random states of device{missing}: the checkpoint holds "
        f"{len(saved)} CUDA devices' states and {visible} are visible here, so the random draws (dropout) "
        "on those devices are not the ones an uninterrupted run would make."
    )


def rank_and_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gathered_random_states() -> dict[str, Any]:
    """{"ranks": [rank 0's states, rank 1's, ...]}; a collective under DDP, as saving a checkpoint is."""
    _, world = rank_and_world()
    if world == 1:
        return {"ranks": [random_states()]}
    everyone: list[Any] = [None] * world
    dist.all_gather_object(everyone, random_states())
    return {"ranks": everyone}


def restore_own_states(saved: dict[str, Any]) -> list[str]:
    """Set this rank's saved states; sentences for what could not be restored as saved."""
    ranks = saved["ranks"] if "ranks" in saved else [saved]
    rank, world = rank_and_world()
    notes = []
    if len(ranks) != world and rank == 0:  # the same for every rank: said once
        notes.append(
            f"The checkpoint holds the random states of {len(ranks)} process(es) and this run has {world}; "
            f"ranks from {len(ranks)} on resume from rank 0's, so their dropout masks are not an "
            "uninterrupted run's."
            if world > len(ranks)
            else f"The checkpoint holds the random states of {len(ranks)} processes and this run has {world}; "
            "each rank restores its own and the others' are not used."
        )
    note = set_random_states(ranks[rank] if rank < len(ranks) else ranks[0])
    return notes + ([note] if note else [])


def seed_own_stream(rank: int) -> None:
    """Rank r > 0: torch's CPU and CUDA generators reseeded from (the run's seed, r)."""
    if rank > 0:
        torch.manual_seed(int(np.random.SeedSequence([global_seed(), rank]).generate_state(1, np.uint64)[0]))
