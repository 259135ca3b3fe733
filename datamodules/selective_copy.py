"""Selective copying, the in-context task of the Mamba paper (Gu and Dao, 2023, section 3.1): a sequence holds
``num_tokens`` data tokens at random positions among blanks; after a separator the model must write them out
again, in order. Where MQAR asks for one value by its key, this asks for every data token by its rank among
the others: the model has to find them by content (they are not at fixed offsets) and keep their order, so it
needs position-aware, content-based attention, and its difficulty grows with the tokens to copy and the
length they are spread over (at the protocol's budget it does not saturate, unlike MQAR at 4 pairs).

Batches are ``(inputs int64 (B, T), targets int64 (B, T))`` for the causal language model: the sequence is
``context (max_len - num_tokens positions), separator, data tokens``, inputs its first T tokens and targets the
next ones, -100 (not scored) everywhere but the ``num_tokens`` positions that write a data token. Token 0 is
the blank, 1 the separator, data tokens are drawn from [2, V). The data are generated from ``dataset_seed``
alone, identical across runs and machines; the run's seed only orders the training set.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import TensorDataset

from lit_attention.errors import ConfigError

from .base import check_positive
from .generated import GeneratedDataModule

IGNORE_INDEX = -100
BLANK, SEPARATOR, FIRST_DATA = 0, 1, 2


def make_selective_copy(
    num_examples: int, num_tokens: int, vocab_size: int, seq_len: int, rng: np.random.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """`num_examples` sequences of `seq_len` inputs: context of seq_len - num_tokens positions holding the data
    tokens at random distinct positions, then the separator and the data tokens (shifted by one as targets)."""
    context = seq_len - num_tokens
    data = rng.integers(FIRST_DATA, vocab_size, (num_examples, num_tokens))
    places = np.sort(np.argsort(rng.random((num_examples, context)), axis=1)[:, :num_tokens], axis=1)
    sequences = np.full((num_examples, seq_len + 1), BLANK, dtype=np.int64)
    np.put_along_axis(sequences[:, :context], places, data, axis=1)
    sequences[:, context] = SEPARATOR
    sequences[:, context + 1 :] = data
    targets = np.full((num_examples, seq_len), IGNORE_INDEX, dtype=np.int64)
    targets[:, context:] = data  # at the separator and each written token: the next data token
    return torch.from_numpy(sequences[:, :seq_len].copy()), torch.from_numpy(targets)


class SelectiveCopyDataModule(GeneratedDataModule):
    """Selective copying.

    Args:
        num_tokens: data tokens per sequence, each scored once when written out.
        vocab_size: tokens; 0 is the blank, 1 the separator, data tokens are [2, V).
        max_len: sequence length: a context of max_len - num_tokens positions, then the copy; at least
            2 * num_tokens, so that the context holds the data with room to spare.
        num_train: examples in the training set.
        num_val: examples in the validation set, and as many again in the test set.
        dataset_seed: the data's seed: the three splits come from three independent streams of it, fixed
            whatever the run's seed (which orders the training set).
    """

    kind = "Selective-copy"  # "Selective-copy data are synthetic": what predict is told

    def __init__(
        self,
        num_tokens: int = 8,
        vocab_size: int = 16,
        max_len: int = 64,
        num_train: int = 20_000,
        num_val: int = 1_000,
        dataset_seed: int = 0,
        **loading,
    ) -> None:
        loading.setdefault("batch_size", 64)
        super().__init__(**loading)
        for name, value in (("num_tokens", num_tokens), ("num_train", num_train), ("num_val", num_val)):
            check_positive(name, value)
        if vocab_size < FIRST_DATA + 2:
            raise ConfigError(f"vocab_size={vocab_size} leaves fewer than 2 data tokens; use vocab_size >= {FIRST_DATA + 2}.")
        if max_len < 2 * num_tokens:
            raise ConfigError(
                f"max_len={max_len} cannot spread {num_tokens} tokens over a context and copy them; "
                f"use max_len >= {2 * num_tokens}."
            )

    def model_sizes(self) -> dict[str, int]:
        return {"vocab_size": self.hparams.vocab_size, "max_len": self.hparams.max_len}

    def generate(self, count: int, rng: np.random.Generator) -> TensorDataset:
        hp = self.hparams
        return TensorDataset(*make_selective_copy(count, hp.num_tokens, hp.vocab_size, hp.max_len, rng))
