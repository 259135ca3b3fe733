"""What the models hand SDPA: no mask when a batch has no padding (causality through `is_causal`), one
mask per kind of attention built once per forward when it has, and the same function either way."""

import pytest
import torch
import torch.nn.functional as F

from lit_attention.modeling import (
    GPT,
    GPTConfig,
    Seq2SeqConfig,
    Seq2SeqTransformer,
    TextEncoderClassifier,
    TextEncoderConfig,
)
from lit_attention.modeling import masks
from lit_attention.modeling.attention import MultiHeadAttention, list_presets

VOCAB, LENGTH = 23, 10
SMALL = dict(dim=16, num_heads=2, mlp_ratio=2.0, dropout=0.0)


@pytest.fixture
def sdpa_calls(monkeypatch) -> list[dict]:
    """Every SDPA call's mask (the tensor itself, kept alive so identity means one tensor) and is_causal."""
    calls, real = [], F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, *args, is_causal=False, **kwargs):
        calls.append({"mask": attn_mask, "is_causal": is_causal})
        return real(q, k, v, attn_mask, *args, is_causal=is_causal, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    return calls


def text_encoder(variant, depth=3):
    torch.manual_seed(0)
    return TextEncoderClassifier(
        TextEncoderConfig(pad_id=0, vocab_size=VOCAB, max_len=LENGTH, num_classes=3, depth=depth, **SMALL), attention=variant
    ).eval()


def seq2seq(variant):
    torch.manual_seed(0)
    return Seq2SeqTransformer(
        Seq2SeqConfig(
            pad_id=0,
            bos_id=1,
            eos_id=2,
            vocab_size=VOCAB,
            max_src_len=LENGTH,
            max_tgt_len=LENGTH,
            encoder_depth=2,
            decoder_depth=2,
            **SMALL,
        ),
        attention=variant,
    ).eval()


def dense_value_mix(model):
    """W_A random and dense (its identity init would hide padded columns that leak)."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, MultiHeadAttention) and module.value_mix is not None:
                module.value_mix.normal_(0, 0.5)
    return model.double()


def use_reference_path(model, reference: bool):
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.fused = not reference


@pytest.mark.parametrize("variant", list_presets())
def test_text_encoder_passes_no_mask_without_padding_and_one_mask_with_it(variant, sdpa_calls):
    model = text_encoder(variant)
    tokens = torch.randint(1, VOCAB, (3, LENGTH))
    model(tokens)  # no pad_id anywhere: the derived mask marks nothing
    assert len(sdpa_calls) == 3 and all(c["mask"] is None and not c["is_causal"] for c in sdpa_calls)
    sdpa_calls.clear()
    model(tokens.masked_fill(torch.arange(LENGTH)[None] >= torch.tensor([10, 6, 2])[:, None], 0))
    masks = [c["mask"] for c in sdpa_calls]
    assert len(masks) == 3 and masks[0] is not None and all(m is masks[0] for m in masks)  # built once
    assert masks[0].shape == (3, 1, LENGTH + 1, LENGTH + 1)  # the CLS token is a position


@pytest.mark.parametrize("variant", list_presets())
def test_seq2seq_masks_only_padding_and_builds_each_kind_once(variant, sdpa_calls):
    model = seq2seq(variant)
    src, tgt = torch.randint(3, VOCAB, (3, LENGTH)), torch.randint(3, VOCAB, (3, LENGTH))
    nothing = torch.zeros(3, LENGTH, dtype=torch.bool)
    model(src, tgt, nothing, nothing)
    # Encoder (2 layers), then per decoder layer self- and cross-attention: only causality, as is_causal.
    assert [(c["mask"], c["is_causal"]) for c in sdpa_calls] == [(None, False)] * 2 + [(None, True), (None, False)] * 2
    sdpa_calls.clear()
    padding = torch.arange(LENGTH)[None] >= torch.tensor([10, 7, 3])[:, None]
    model(src.masked_fill(padding, 0), tgt.masked_fill(padding, 0), padding, padding)
    masks = [c["mask"] for c in sdpa_calls]
    encoder, decoder_self, cross = masks[:2], masks[2::2], masks[3::2]
    for kind in (encoder, decoder_self, cross):
        assert kind[0] is not None and all(m is kind[0] for m in kind)
    assert len({id(m) for m in masks}) == 3


@pytest.mark.parametrize("variant", list_presets())
def test_models_fused_path_equals_reference_path_with_padding(variant):
    padding = torch.arange(LENGTH)[None] >= torch.tensor([10, 6, 1])[:, None]
    tokens = torch.randint(1, VOCAB, (3, LENGTH)).masked_fill(padding, 0)
    for model, args in (
        (text_encoder(variant, depth=2), (tokens, padding)),
        (seq2seq(variant), (tokens, tokens.flip(0), padding, padding.flip(0))),
    ):
        model = dense_value_mix(model)
        fused = model(*args)
        use_reference_path(model, True)
        torch.testing.assert_close(model(*args), fused, rtol=1e-9, atol=1e-9)


def test_a_head_width_that_rules_out_the_fused_masked_kernels_warns_once_per_configuration(recwarn, monkeypatch):
    monkeypatch.setattr(masks, "WARNED_HEAD_WIDTHS", set())  # what earlier tests in this process warned about

    def warnings_of(build):
        recwarn.clear()
        build()
        return [str(w.message) for w in recwarn if "multiple of 8" in str(w.message)]

    def text(dim, heads):
        return TextEncoderClassifier(
            TextEncoderConfig(pad_id=0, vocab_size=VOCAB, max_len=LENGTH, num_classes=3, dim=dim, num_heads=heads, depth=1)
        )

    [message] = warnings_of(lambda: text(48, 4))
    assert "head width 12 (dim=48 / num_heads=4)" in message and "num_heads among 1, 2, 3, 6" in message
    assert warnings_of(lambda: text(48, 4)) == []  # once per configuration
    assert len(warnings_of(lambda: text(40, 4))) == 1  # another configuration
    assert warnings_of(lambda: text(32, 4)) == []  # head width 8: nothing to say
    gpt = GPT(GPTConfig(vocab_size=VOCAB, max_len=LENGTH, dim=48, num_heads=4, depth=1)).eval()
    tokens = torch.randint(0, VOCAB, (2, 4))
    assert warnings_of(lambda: gpt.generate(tokens, 2)) == []  # causal without a mask: flash takes any width
    padding = torch.tensor([[True, False, False, False], [False] * 4])
    assert len(warnings_of(lambda: gpt.generate(tokens, 2, padding_mask=padding))) == 1  # ragged prompts: masked


def test_padded_batches_run_on_the_meta_device():
    """Training counts FLOPs on the meta device, where a mask has no values to check for padding."""
    with torch.device("meta"):
        text, translation = text_encoder("super"), seq2seq("super")
        tokens, padding = torch.zeros(2, LENGTH, dtype=torch.long), torch.zeros(2, LENGTH, dtype=torch.bool)
        assert text(tokens, padding).shape == (2, 3)
        assert translation(tokens, tokens, padding, padding).shape == (2, LENGTH, VOCAB)


def test_a_padding_flag_known_on_the_host_decides_without_reading_the_mask():
    """The collate functions say on the host whether a batch has padding; the model then trusts it."""
    from lit_attention.modeling.masks import padding_or_none

    unpadded, padded = torch.zeros(2, 5, dtype=torch.bool), torch.ones(2, 5, dtype=torch.bool)
    assert padding_or_none(unpadded, padded=False) is None and padding_or_none(unpadded, padded=True) is unpadded
    assert padding_or_none(unpadded) is None and padding_or_none(padded) is padded  # unknown: it looks
