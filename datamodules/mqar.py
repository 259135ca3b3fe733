"""Multi-query associative recall (MQAR), the synthetic diagnostic of Zoology (Arora et al., 2023).

Each sequence first lists ``num_kv_pairs`` key-value pairs ``k1 v1 k2 v2 ...``; then every key is
queried once, in random order, at random positions of the rest of the sequence, each query followed
by its value. A causal language model must predict, at each query's position, the value paired with
that key earlier on: exactly the key/value matching that removing W_K or W_V, or mixing values with
W_A, changes.

Batches are ``(inputs int64 (B, T), targets int64 (B, T))``; targets are -100 (ignored by
``cross_entropy``) everywhere except at query positions. Token 0 fills the gaps, keys are drawn
from [1, V/2) and values from [V/2, V). The data are generated from ``dataset_seed`` alone, so
identical across runs and machines; the run's seed only orders the training set.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import TensorDataset

from lit_attention.errors import ConfigError

from .base import check_positive
from .generated import GeneratedDataModule

IGNORE_INDEX = -100


def make_mqar(
    num_examples: int, num_kv_pairs: int, vocab_size: int, seq_len: int, rng: np.random.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    n, first_value = num_kv_pairs, vocab_size // 2
    keys = np.stack([rng.choice(first_value - 1, size=n, replace=False) + 1 for _ in range(num_examples)])
    values = rng.integers(first_value, vocab_size, size=(num_examples, n))
    inputs = np.zeros((num_examples, seq_len), dtype=np.int64)
    targets = np.full((num_examples, seq_len), IGNORE_INDEX, dtype=np.int64)
    inputs[:, 0 : 2 * n : 2], inputs[:, 1 : 2 * n : 2] = keys, values

    # Queries sit in two-token slots (key, value) after the context, at random distinct slots.
    num_slots = (seq_len - 2 * n) // 2
    slots = np.sort(np.argsort(rng.random((num_examples, num_slots)), axis=1)[:, :n], axis=1)
    order = np.argsort(rng.random((num_examples, n)), axis=1)  # which pair each query asks for
    rows = np.arange(num_examples)[:, None]
    positions = 2 * n + 2 * slots
    inputs[rows, positions] = keys[rows, order]
    inputs[rows, positions + 1] = values[rows, order]
    targets[rows, positions] = values[rows, order]
    return torch.from_numpy(inputs), torch.from_numpy(targets)


class MQARDataModule(GeneratedDataModule):
    """Multi-query associative recall.

    Args:
        num_kv_pairs: key-value pairs (and queries) per sequence.
        vocab_size: tokens; keys use [1, V/2), values [V/2, V), so V/2 - 1 >= num_kv_pairs.
        max_len: sequence length; at least 4 * num_kv_pairs (context plus one slot per query).
        num_train: examples in the training set.
        num_val: examples in the validation set, and as many again in the test set.
        dataset_seed: the data's seed: the training, validation and test sets come from three
            independent streams of it, fixed whatever the run's seed (which orders the training set).
    """

    kind = "MQAR"  # "MQAR data are synthetic": what predict is told

    def __init__(
        self,
        num_kv_pairs: int = 8,
        vocab_size: int = 256,
        max_len: int = 64,
        num_train: int = 20_000,
        num_val: int = 1_000,
        dataset_seed: int = 0,
        **loading,
    ) -> None:
        loading.setdefault("batch_size", 64)
        super().__init__(**loading)
        for name, value in (("num_kv_pairs", num_kv_pairs), ("num_train", num_train), ("num_val", num_val)):
            check_positive(name, value)
        if vocab_size // 2 - 1 < num_kv_pairs:
            raise ConfigError(
                f"vocab_size={vocab_size} leaves too few distinct keys for num_kv_pairs={num_kv_pairs}; "
                f"use vocab_size >= {2 * (num_kv_pairs + 1)}."
            )
        if max_len < 4 * num_kv_pairs:
            raise ConfigError(
                f"max_len={max_len} cannot hold {num_kv_pairs} pairs and their queries; use max_len >= {4 * num_kv_pairs}."
            )

    def model_sizes(self) -> dict[str, int]:
        return {"vocab_size": self.hparams.vocab_size, "max_len": self.hparams.max_len}

    def generate(self, count: int, rng: np.random.Generator) -> TensorDataset:
        hp = self.hparams
        return TensorDataset(*make_mqar(count, hp.num_kv_pairs, hp.vocab_size, hp.max_len, rng))
