"""One place that decides how every DataModule builds its DataLoaders.

No sampler is built here for DDP: Lightning replaces (or wraps) the sampler with a
``DistributedSampler`` itself, so ``batch_size`` is always per device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, Sampler


def make_loader(
    dataset: Dataset,
    *,
    batch_size: int,
    num_workers: int,
    shuffle: bool = False,
    sampler: Sampler | None = None,
    collate_fn: Callable[[list[Any]], Any] | None = None,
) -> DataLoader:
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle if sampler is None else False,
        sampler=sampler,
        collate_fn=collate_fn,
        num_workers=num_workers,
        # Page-locked host memory only pays off when batches go to a GPU.
        pin_memory=torch.cuda.is_available(),
        # Re-forking workers every epoch costs seconds on large datasets.
        persistent_workers=num_workers > 0,
    )
