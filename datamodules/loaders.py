"""One place that decides how every DataModule builds its DataLoaders.

No sampler is built here for DDP: Lightning replaces (or wraps) the sampler with a
``DistributedSampler`` itself, so ``batch_size`` is always per device.

Training loaders are resumable mid-epoch. Their order is a function of (seed, epoch) alone, never of
a random state, and the loader remembers how many batches of the current epoch it has served, which
Lightning stores in every checkpoint (the loader's ``state_dict``). A resumed run skips exactly those
batches, so it trains on the batches the uninterrupted run would have trained on.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
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
    seed: int | None = None,
) -> DataLoader:
    """A loader; training loaders (``shuffle`` or a ``sampler``) are resumable mid-epoch. ``shuffle``
    orders each epoch by (seed, epoch); seed None is the run's seed."""
    training = shuffle or sampler is not None
    if shuffle and sampler is None:
        sampler = EpochShuffleSampler(len(dataset), seed)
    loader_class = ResumableDataLoader if training else DataLoader
    return loader_class(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        collate_fn=collate_fn,
        num_workers=num_workers,
        # Page-locked host memory only pays off when batches go to a GPU.
        pin_memory=torch.cuda.is_available(),
        # Re-forking workers every epoch costs seconds on large datasets.
        persistent_workers=num_workers > 0,
    )


MASK64 = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """A 64-bit mixing function: nearby inputs give unrelated outputs (SplitMix64's finaliser)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def epoch_seed(seed: int, epoch: int) -> int:
    """The generator seed of one epoch of one run. Mixed, not added: with seed + epoch, seed 1's epoch e
    would be seed 0's epoch e + 1, and neighbouring seeds would share almost every epoch's order."""
    return splitmix64(splitmix64(seed & MASK64) ^ epoch) >> 1


def sample_seed(seed: int, epoch: int, index: int) -> int:
    """The seed of one training item's random draws (its augmentation) in one epoch of one run."""
    return splitmix64(epoch_seed(seed, epoch) ^ index) >> 1


def global_seed() -> int:
    """The run's seed as Lightning's `seed_everything` recorded it (Lightning's DistributedSampler uses the same)."""
    return int(os.environ.get("PL_GLOBAL_SEED", 0))


class EpochShuffleSampler(Sampler[int]):
    """A new permutation every epoch, drawn from (seed, epoch) only, like ``DistributedSampler``.

    ``RandomSampler`` draws its permutation from the global random state when the epoch starts, which
    a run resumed in the middle of that epoch no longer has; this order can always be recomputed.
    With ``global_indices`` it yields ``epoch * size + i`` instead of ``i`` (the same order), for a
    dataset whose items depend on the epoch (augmentation.AugmentedSubset): the index carries the
    epoch to whichever process loads the item, a DataLoader worker or a DDP rank.
    """

    def __init__(self, size: int, seed: int | None = None, global_indices: bool = False) -> None:
        self.size, self.epoch, self.global_indices = size, 0, global_indices
        self.seed = global_seed() if seed is None else seed

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(epoch_seed(self.seed, self.epoch))
        order = torch.randperm(self.size, generator=generator)
        return iter((order + self.epoch * self.size if self.global_indices else order).tolist())

    def __len__(self) -> int:
        return self.size


class ResumableDataLoader(DataLoader):
    """A training DataLoader that Lightning checkpoints mid-epoch (its ``_Stateful`` protocol).

    The state is (epoch, batches served in it). Lightning calls ``load_state_dict`` before the resumed
    epoch starts; that epoch's first iteration then skips the served batches' *indices*, so nothing
    skipped is loaded. Iteration starts lazily, at the first batch, because Lightning creates the
    iterator before it calls ``set_epoch``: index prefetching by workers must see the right epoch.
    Under DDP the skip applies to each rank's own share, after Lightning's distributed sampler.
    """

    _served: int = 0  # batches of the current epoch handed out so far
    _served_epoch: int | None = None
    _resume_at: tuple[int, int] | None = None  # (epoch, batches to skip), set by load_state_dict

    def state_dict(self) -> dict[str, int]:
        epoch = self._sampler_epoch() if self._served_epoch is None else self._served_epoch
        return {"epoch": epoch, "batches": self._served}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._resume_at = (int(state["epoch"]), int(state["batches"]))

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        return self._serve()

    def _serve(self) -> Iterator[Any]:
        epoch = self._sampler_epoch()
        skip = self._resume_at[1] if self._resume_at and self._resume_at[0] == epoch else 0
        self._resume_at = None  # a checkpoint from the end of an epoch resumes at the next one: no skip
        self._served_epoch, self._served = epoch, skip
        self._pending_skip.batches = skip
        # Starting an iterator draws the workers' base seed, from the global random state unless the
        # loader has a generator: draw it from (seed, epoch) instead, so that the global state (dropout
        # masks...) does not depend on when an epoch's iterator was made, before or after a resume.
        self.generator = torch.Generator().manual_seed(epoch_seed(global_seed(), epoch))
        for batch in super().__iter__():
            self._served += 1
            yield batch

    def _sampler_epoch(self) -> int:
        return int(getattr(self.sampler, "epoch", 0))

    @property
    def _pending_skip(self) -> _PendingSkip:
        if "_skip" not in self.__dict__:
            self.__dict__["_skip"] = _PendingSkip()
        return self.__dict__["_skip"]

    @property
    def _index_sampler(self):
        # What the DataLoader's iterator draws index batches from (kept by persistent workers too).
        return _SkipServedBatches(super()._index_sampler, self._pending_skip)


class _PendingSkip:
    """Batches the next iteration skips; shared with the iterator without a reference back to the
    loader (a loader <-> iterator cycle would delay shutting persistent workers down until a gc)."""

    batches: int = 0


class _SkipServedBatches:
    """The loader's index batches, minus the ones a resumed epoch already trained on."""

    def __init__(self, batches, pending: _PendingSkip) -> None:
        self.batches, self.pending = batches, pending

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[Any]:
        skip, self.pending.batches = self.pending.batches, 0
        return itertools.islice(iter(self.batches), skip, None)
