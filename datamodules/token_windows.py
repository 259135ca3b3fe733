"""Flat token files on disk and the windows a language model trains on.

A corpus is tokenized once into one flat binary file per split (uint16 when the vocabulary fits,
else uint32) and read through a memory map, opened lazily in each process that reads it, so
DataLoader workers never pickle or copy the corpus.

Training windows form a map-style dataset whose item k starts at a hash of (seed, k): a
counter-based generator needs no state, so any process can compute any window. The sampler hands
out k = epoch * windows_per_epoch + i, so every epoch sees new windows; under DDP Lightning wraps
the sampler in a ``DistributedSamplerWrapper`` that gives each rank a different share of the k's
and forwards ``set_epoch``; and a resumed run reproduces exactly the windows it would have seen.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import Dataset, Sampler

from lit_attention.atomic_files import replace_file
from lit_attention.errors import ConfigError

from .loaders import MASK64, splitmix64


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.uint32)


def write_token_file(path: Path, token_lists: pa.ChunkedArray, dtype: np.dtype) -> tuple[int, str]:
    """Concatenate a column of token-id lists into `path`; returns the number of tokens and the file's
    sha256 (hashed as it is written: a multi-GB file is never read again to fingerprint it).

    Written whole or not at all (atomic_files.replace_file), so a crash never leaves a truncated file behind.
    """
    count, digest = 0, hashlib.sha256()

    def write(out) -> None:
        nonlocal count
        for chunk in token_lists.chunks:
            data = chunk.flatten().to_numpy(zero_copy_only=False).astype(dtype, copy=False).tobytes()
            out.write(data)
            digest.update(data)
            count += len(data) // dtype.itemsize

    replace_file(path, write)
    return count, digest.hexdigest()


class TokenFile:
    """A flat token file, memory-mapped on first use in whichever process reads it."""

    def __init__(self, path: str | Path, dtype: np.dtype | str) -> None:
        self.path, self.dtype = Path(path), np.dtype(dtype)
        self.num_tokens = self.path.stat().st_size // self.dtype.itemsize
        self._tokens: np.memmap | None = None

    @property
    def tokens(self) -> np.memmap:
        if self._tokens is None:
            self._tokens = np.memmap(self.path, dtype=self.dtype, mode="r")
        return self._tokens

    def window(self, start: int, length: int) -> torch.Tensor:
        return torch.from_numpy(self.tokens[start : start + length].astype(np.int64))

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_tokens": None}  # workers map the file themselves


class _Windows(Dataset):
    def __init__(self, tokens: TokenFile, max_len: int, split: str) -> None:
        self.tokens, self.max_len = tokens, max_len
        # Windows hold max_len + 1 tokens: inputs are the first max_len, targets the last max_len.
        self.num_starts = tokens.num_tokens - max_len
        if self.num_starts < 1:
            raise ConfigError(
                f"The {split} split has {tokens.num_tokens} tokens, fewer than max_len + 1 = {max_len + 1}; "
                f"lower max_len or give more text."
            )

    def _item(self, start: int) -> tuple[torch.Tensor, torch.Tensor]:
        window = self.tokens.window(start, self.max_len + 1)
        return window[:-1], window[1:]


class TrainWindows(_Windows):
    """Item k is the window starting at hash(seed, k); any integer k >= 0 is valid."""

    def __init__(self, tokens: TokenFile, max_len: int, windows_per_epoch: int, seed: int) -> None:
        super().__init__(tokens, max_len, "training")
        self.windows_per_epoch, self.seed = windows_per_epoch, seed

    def __len__(self) -> int:
        return self.windows_per_epoch

    def index(self, epoch: int, i: int) -> int:
        return epoch * self.windows_per_epoch + i

    def start(self, k: int) -> int:
        return splitmix64(splitmix64(self.seed & MASK64) ^ k) % self.num_starts

    def __getitem__(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self._item(self.start(int(k)))


class EpochSampler(Sampler[int]):
    """Yields the window indices of the current epoch; Lightning calls ``set_epoch`` every epoch."""

    def __init__(self, windows: TrainWindows) -> None:
        self.windows, self.epoch = windows, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.windows.index(self.epoch, 0), self.windows.index(self.epoch + 1, 0)))

    def __len__(self) -> int:
        return len(self.windows)


class EvalWindows(_Windows):
    """Fixed windows, evenly spaced over the split (all non-overlapping ones when `count` is None)."""

    def __init__(self, tokens: TokenFile, max_len: int, count: int | None, split: str) -> None:
        super().__init__(tokens, max_len, split)
        if count is None:
            self.starts = np.arange(0, self.num_starts, max_len)  # every target predicted once
        else:
            self.starts = np.linspace(0, self.num_starts - 1, num=count).round().astype(np.int64)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self._item(int(self.starts[i]))
