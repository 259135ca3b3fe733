"""The scorecard's generated tasks beside MQAR: selective copying (every scored target is the next data token of
the context, in order) and the seq2seq transduction (each target is its source's data tokens reversed or
sorted, in the translation data's batch layout with padding); both fixed by their dataset seed, and bad
settings refused in one sentence."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from datamodules import SelectiveCopyDataModule, TransductionDataModule
from datamodules.selective_copy import BLANK, IGNORE_INDEX, SEPARATOR
from datamodules.transduction import FIRST_DATA
from datamodules.text_tokenizers import BOS_ID, EOS_ID, PAD_ID
from lit_attention.errors import ConfigError


def selective(**kwargs) -> SelectiveCopyDataModule:
    dm = SelectiveCopyDataModule(**{"num_train": 200, "num_val": 40, **kwargs})
    dm.setup("fit")
    return dm


def test_selective_copy_scores_the_context_data_tokens_in_order():
    dm = selective(num_tokens=5, vocab_size=12, max_len=24)
    inputs, targets = dm.train_set.tensors
    assert inputs.shape == targets.shape == (200, 24)
    context = 24 - 5
    for row, target in zip(inputs, targets):
        data = row[:context][row[:context] != BLANK]
        assert len(data) == 5 and torch.all(data >= 2) and torch.all(data < 12)
        assert row[context] == SEPARATOR
        scored = target[target != IGNORE_INDEX]
        assert torch.equal(scored, data)  # written out in the order they stand in the context
        assert torch.equal(torch.nonzero(target != IGNORE_INDEX).flatten(), torch.arange(context, 24))
        assert torch.equal(row[context + 1 :], data[:-1])  # teacher forcing: each written token is the next input


def test_selective_copy_is_fixed_by_its_dataset_seed_and_splits_differ():
    a, b, c = selective(), selective(), selective(dataset_seed=1)
    assert torch.equal(a.train_set.tensors[0], b.train_set.tensors[0])
    assert not torch.equal(a.train_set.tensors[0], c.train_set.tensors[0])
    assert not torch.equal(a.val_set.tensors[0], a.test_set.tensors[0])
    assert a.fingerprints() == b.fingerprints() != c.fingerprints()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(vocab_size=3), "vocab_size=3 leaves fewer than 2 data tokens; use vocab_size >= 4."),
        (dict(num_tokens=8, max_len=10), "max_len=10 cannot spread 8 tokens over a context and copy them; use max_len >= 16."),
        (dict(num_tokens=0), "num_tokens"),
    ],
)
def test_selective_copy_refuses_bad_settings_in_one_sentence(kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SelectiveCopyDataModule(**kwargs)


def transduction(**kwargs) -> TransductionDataModule:
    dm = TransductionDataModule(**{"num_train": 200, "num_val": 40, **kwargs})
    dm.setup("fit")
    return dm


@pytest.mark.parametrize("task", ["reverse", "sort"])
def test_a_transduction_target_is_its_sources_data_tokens_reversed_or_sorted(task):
    dm = transduction(task=task, data_tokens=10, noise_tokens=3, min_len=3, max_len=9, noise=0.3)
    noise_seen = 0
    for source, target in dm.train_set:
        assert 3 <= len(source) <= 9 and len(target) >= 1
        data = source[source < FIRST_DATA + 10]
        noise_seen += len(source) - len(data)
        assert np.all(source >= FIRST_DATA) and np.all(source < FIRST_DATA + 13)
        assert np.array_equal(target, np.sort(data) if task == "sort" else data[::-1])
    assert 0.2 < noise_seen / sum(len(s) for s, _ in dm.train_set) < 0.4
    assert dm.model_sizes() == {"vocab_size": 16, "max_src_len": 10, "max_tgt_len": 10, "pad_id": 0, "bos_id": 1, "eos_id": 2}


def test_a_transduction_batch_has_the_translation_layout_with_padding():
    dm = transduction(min_len=2, max_len=8)
    batch = dm.collate([dm.train_set[i] for i in range(16)])
    src, tgt_in, tgt_out = batch["src"], batch["tgt_in"], batch["tgt_out"]
    assert batch["src_padded"] and batch["tgt_padded"]  # lengths differ within 16 pairs of 2..8 tokens
    for i, (source, target) in enumerate(dm.train_set[j] for j in range(16)):
        n, m = len(source), len(target)
        assert src[i, :n].tolist() == source.tolist() and src[i, n] == EOS_ID and torch.all(src[i, n + 1 :] == PAD_ID)
        assert batch["src_padding_mask"][i].tolist() == [k > n for k in range(src.shape[1])]
        assert tgt_in[i, 0] == BOS_ID and tgt_in[i, 1 : m + 1].tolist() == target.tolist()
        assert tgt_out[i, :m].tolist() == target.tolist() and tgt_out[i, m] == EOS_ID
        assert batch["tgt_padding_mask"][i].tolist() == [k > m for k in range(tgt_in.shape[1])]


def test_transduction_is_fixed_by_its_dataset_seed():
    a, b, c = transduction(), transduction(), transduction(dataset_seed=3)
    assert all(np.array_equal(x[0], y[0]) for x, y in zip(a.train_set, b.train_set))
    assert a.fingerprints() == b.fingerprints() != c.fingerprints()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(task="shuffle"), "task"),
        (dict(min_len=6, max_len=4), "max_len=4 is shorter than min_len=6; use max_len >= 6."),
        (dict(noise=1.5), "noise"),
        (dict(noise_tokens=0), "noise_tokens"),
    ],
)
def test_transduction_refuses_bad_settings_in_one_sentence(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        TransductionDataModule(**kwargs)


def test_the_scorecards_tasks_pick_checkpoints_by_validation_loss_where_asked():
    """The card compares test losses, so its ViT and encoder-decoder tasks pick their checkpoints by val/loss;
    a metric a task does not log is one sentence."""
    from lit_attention.training.tasks import ImageClassifier, Seq2SeqTranslator

    vit = dict(num_classes=3, image_size=8, in_channels=1, patch_size=2, dim=16, num_heads=2, depth=1)
    seq2seq = dict(
        vocab_size=30,
        max_src_len=10,
        max_tgt_len=11,
        pad_id=0,
        bos_id=1,
        eos_id=2,
        encoder_depth=1,
        decoder_depth=1,
        dim=16,
        num_heads=2,
    )
    assert (ImageClassifier(net=vit).monitor, ImageClassifier(net=vit).monitor_mode) == ("val/acc", "max")
    assert (
        ImageClassifier(net=vit, monitor="val/loss").monitor_mode,
        Seq2SeqTranslator(net=seq2seq, monitor="val/loss").monitor_mode,
    ) == ("min", "min")
    assert Seq2SeqTranslator(net=seq2seq).monitor == "val/bleu"
    with pytest.raises(ConfigError, match="monitor 'val/bleu' is not available here; valid choices are val/acc, val/loss."):
        ImageClassifier(net=vit, monitor="val/bleu")
