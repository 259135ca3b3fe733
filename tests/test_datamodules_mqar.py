"""MQARDataModule: every query's answer is the value paired with its key, and the data are fixed by the seed."""

import pytest
import torch

from lit_attention.errors import ConfigError
from datamodules import MQARDataModule
from datamodules.mqar import IGNORE_INDEX


def built(**kwargs):
    dm = MQARDataModule(**{"num_train": 300, "num_val": 50, **kwargs})
    dm.setup("fit")
    return dm


@pytest.mark.parametrize("pairs, vocab, length", [(8, 256, 64), (4, 32, 16), (16, 8192, 100)])
def test_every_query_answers_with_the_paired_value(pairs, vocab, length):
    dm = built(num_kv_pairs=pairs, vocab_size=vocab, max_len=length)
    assert dm.model_sizes() == {"vocab_size": vocab, "max_len": length}
    for inputs, targets in (dm.train_set.tensors, dm.val_set.tensors):
        assert inputs.shape == targets.shape == (len(inputs), length) and inputs.dtype == targets.dtype == torch.int64
        assert inputs.min() >= 0 and inputs.max() < vocab
        for row_in, row_tgt in zip(inputs, targets):
            context = row_in[: 2 * pairs].tolist()
            keys, values = context[0::2], context[1::2]
            assert len(set(keys)) == pairs and all(1 <= k < vocab // 2 <= v < vocab for k, v in zip(keys, values))
            lookup = dict(zip(keys, values))
            queries = (row_tgt != IGNORE_INDEX).nonzero().flatten().tolist()
            assert len(queries) == pairs and min(queries) >= 2 * pairs  # one query per key, after the context
            assert sorted(row_in[queries].tolist()) == sorted(keys)
            for p in queries:
                assert row_tgt[p] == lookup[int(row_in[p])] == row_in[p + 1]
            rest = torch.ones(length, dtype=torch.bool)
            rest[: 2 * pairs] = False
            rest[queries] = False
            rest[[p + 1 for p in queries]] = False
            assert (row_in[rest] == 0).all()  # everything else is filler


def test_data_are_fixed_by_the_seed():
    a, again, other = built(dataset_seed=3), built(dataset_seed=3), built(dataset_seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.train_set.tensors, again.train_set.tensors))
    assert all(torch.equal(x, y) for x, y in zip(a.val_set.tensors, again.val_set.tensors))
    assert not torch.equal(a.train_set.tensors[0], other.train_set.tensors[0])
    assert not torch.equal(a.train_set.tensors[0][:50], a.val_set.tensors[0])


def test_loader_batches():
    dm = built(batch_size=32)
    inputs, targets = next(iter(dm.train_dataloader()))
    assert inputs.shape == targets.shape == (32, 64)
    assert len(dm.val_dataloader()) == 2


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_kv_pairs": 20, "max_len": 64}, "max_len=64 cannot hold 20 pairs and their queries; use max_len >= 80"),
        ({"num_kv_pairs": 8, "vocab_size": 16}, "vocab_size=16 leaves too few distinct keys"),
        ({"num_train": 0}, "num_train=0 is invalid"),
    ],
)
def test_bad_sizes_fail_in_init(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        MQARDataModule(**kwargs)
