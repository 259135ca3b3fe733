"""Training items whose random augmentation is a function of (data seed, epoch, sample index) alone.

torchvision's transforms draw from torch's global random state, which model initialisation has
already advanced by an amount that depends on the architecture: drawn from there, two arms of one
seed see differently augmented batches (results/vit_digits_500 had 6 different first batches across
the 9 arms of each seed), and a resumed run sees other ones than a run that never stopped. Here each
item's transform runs under its own seed inside ``torch.random.fork_rng``, so the global state is
neither read nor changed.

The training sampler (loaders.EpochShuffleSampler with ``global_indices``) hands out
``k = epoch * len + i``, so the epoch travels with the index to whichever process loads the item:
DataLoader workers, persistent or not; DDP ranks (Lightning's ``DistributedSamplerWrapper`` shares
out the k's unchanged); and a resumed run, whose loader skips the batches already served.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils.data import Dataset

from .loaders import EpochShuffleSampler, sample_seed


class AugmentedSubset(Dataset):
    """Items ``indices`` of a dataset of (image, label), transformed at random: item ``k`` is training
    image ``k % len`` in epoch ``k // len``, augmented with the seed ``sample_seed(seed, epoch, index)``."""

    def __init__(self, base: Dataset, indices: Sequence[int], transform: Callable, seed: int) -> None:
        self.base, self.indices, self.transform, self.seed = base, list(indices), transform, int(seed)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, k: int) -> tuple[Any, int]:
        epoch, index = divmod(int(k), len(self.indices))
        return self.item(epoch, index)

    def item(self, epoch: int, index: int) -> tuple[Any, int]:
        image, label = self.base[self.indices[index]]
        with torch.random.fork_rng(devices=[]):
            # The CPU generator only: torch.manual_seed would also reseed every CUDA generator, which
            # fork_rng(devices=[]) does not put back (the run's dropout on a GPU would follow the data).
            torch.random.default_generator.manual_seed(sample_seed(self.seed, epoch, index))
            return self.transform(image), label

    def sampler(self) -> EpochShuffleSampler:
        """The training order this dataset needs: shuffled by (seed, epoch), indices carrying the epoch."""
        return EpochShuffleSampler(len(self), self.seed, global_indices=True)
