"""A synthetic sequence-to-sequence transduction for the encoder-decoder family, offline: each source is a
run of data tokens with noise tokens scattered through it, and the target is its data tokens reversed (or
sorted), the noise left out. Every target token is found through cross-attention by content (is it data?)
and by position (where is it in the source?), which is what the variants change; the sources have different
lengths, so the batches hold padding.

Batches are the translation data's (datamodules/translation.py): ``src`` (B, S) ending with eos,
``src_padding_mask``, ``tgt_in`` (B, T) starting with bos, ``tgt_out`` ending with eos, ``tgt_padding_mask``;
pad 0, bos 1, eos 2, data tokens [3, 3 + data_tokens), noise tokens [3 + data_tokens, vocab_size). Test
scores are BLEU over the token ids, as with any data module without ``decode``. The data are generated from
``dataset_seed`` alone; the run's seed only orders the training set.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from lit_attention.errors import ConfigError

from .base import check_choice, check_fraction, check_positive
from .fingerprints import fingerprint
from .generated import GeneratedDataModule
from .text_tokenizers import BOS_ID, EOS_ID, PAD_ID
from .translation import translation_batch

FIRST_DATA = 3  # after pad, bos and eos


def make_transduction(
    num_examples: int,
    task: str,
    data_tokens: int,
    vocab_size: int,
    min_len: int,
    max_len: int,
    noise: float,
    rng: np.random.Generator,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(source, target) id arrays, without specials: sources of min_len..max_len tokens, each a noise token
    with probability `noise` (at least one data token), targets their data tokens reversed or sorted."""
    found = []
    for length in rng.integers(min_len, max_len + 1, num_examples):
        source = rng.integers(FIRST_DATA, FIRST_DATA + data_tokens, length)
        is_noise = rng.random(length) < noise
        is_noise[rng.integers(length)] = False  # something to write
        source[is_noise] = rng.integers(FIRST_DATA + data_tokens, vocab_size, int(is_noise.sum()))
        kept = source[~is_noise]
        found.append((source, np.sort(kept) if task == "sort" else kept[::-1].copy()))
    return found


def collate(rows: list[tuple[np.ndarray, np.ndarray]]) -> dict:
    """The translation batch of a list of (source, target) pairs."""
    return translation_batch([torch.from_numpy(s) for s, _ in rows], [torch.from_numpy(t) for _, t in rows])


class TransductionDataModule(GeneratedDataModule):
    """Reverse (or sort) the data tokens of a noisy source.

    Args:
        task: reverse or sort.
        data_tokens: distinct data tokens.
        noise_tokens: distinct noise tokens (vocab_size is 3 + data_tokens + noise_tokens).
        min_len: shortest source, in tokens (before eos).
        max_len: longest source, in tokens (before eos); targets are at most as long.
        noise: each source token's chance of being noise.
        num_train: examples in the training set.
        num_val: examples in the validation set, and as many again in the test set.
        dataset_seed: the data's seed: three independent streams of it make the three splits.
    """

    kind = "Transduction"  # "Transduction data are synthetic": what predict is told

    def __init__(
        self,
        task: Literal["reverse", "sort"] = "reverse",
        data_tokens: int = 16,
        noise_tokens: int = 4,
        min_len: int = 4,
        max_len: int = 12,
        noise: float = 0.2,
        num_train: int = 10_000,
        num_val: int = 500,
        dataset_seed: int = 0,
        **loading,
    ) -> None:
        loading.setdefault("batch_size", 64)
        super().__init__(**loading)
        check_choice("task", task, ("reverse", "sort"))
        for name, value in (
            ("data_tokens", data_tokens),
            ("noise_tokens", noise_tokens),
            ("min_len", min_len),
            ("num_train", num_train),
            ("num_val", num_val),
        ):
            check_positive(name, value)
        if max_len < min_len:
            raise ConfigError(f"max_len={max_len} is shorter than min_len={min_len}; use max_len >= {min_len}.")
        check_fraction("noise", noise)
        self.collate = collate

    def model_sizes(self) -> dict[str, int]:
        hp = self.hparams
        return {
            "vocab_size": FIRST_DATA + hp.data_tokens + hp.noise_tokens,
            "max_src_len": hp.max_len + 1,  # with eos
            "max_tgt_len": hp.max_len + 1,  # with bos or eos
            "pad_id": PAD_ID,
            "bos_id": BOS_ID,
            "eos_id": EOS_ID,
        }

    def compute_fingerprints(self) -> dict[str, str | None]:
        """The generated pairs of each split: every id, and every source's and target's length."""
        return {
            name: fingerprint(
                torch.from_numpy(np.concatenate([part for pair in rows for part in pair])),
                torch.tensor([len(part) for pair in rows for part in pair]),
            )
            for name, rows in (("train", self.train_set), ("validation", self.val_set), ("test", self.test_set))
        }

    def generate(self, count: int, rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
        hp = self.hparams
        vocab = FIRST_DATA + hp.data_tokens + hp.noise_tokens
        return make_transduction(count, hp.task, hp.data_tokens, vocab, hp.min_len, hp.max_len, hp.noise, rng)
