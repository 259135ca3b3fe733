"""Every model family with every preset: shapes, learning, causality, padding, counts, decoding."""

import pytest
import torch
import torch.nn.functional as F

from lit_attention.modeling.attention import MultiHeadAttention, list_presets
from lit_attention.modeling.costs import attention_parameters
from lit_attention.modeling import GPT, Seq2SeqTransformer, TextEncoderClassifier, VisionTransformer
from lit_attention.modeling import GPTConfig, Seq2SeqConfig, TextEncoderConfig, ViTConfig

PRESET_NAMES = list_presets()
SMALL = dict(dim=32, num_heads=4, mlp_ratio=2.0)
VOCAB, LENGTH = 23, 12


def randomise_value_mix(model):
    """W_A starts at the identity, which would hide a leak through it; make it dense."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, MultiHeadAttention) and module.value_mix is not None:
                module.value_mix.normal_(0, 0.5)
    return model


def build(family, attention, seed=0):
    torch.manual_seed(seed)
    if family == "vit":
        return VisionTransformer(
            ViTConfig(image_size=8, patch_size=2, in_channels=1, num_classes=5, depth=2, **SMALL), attention=attention
        )
    if family == "text":
        return TextEncoderClassifier(
            TextEncoderConfig(pad_id=0, vocab_size=VOCAB, max_len=LENGTH, num_classes=3, depth=2, **SMALL), attention=attention
        )
    if family == "gpt":
        return GPT(GPTConfig(vocab_size=VOCAB, max_len=LENGTH, depth=2, **SMALL), attention=attention)
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
        attention=attention,
    )


def batch_for(family, generator):
    tokens = torch.randint(3, VOCAB, (4, LENGTH), generator=generator)
    if family == "vit":
        return (torch.randn(4, 1, 8, 8, generator=generator),), torch.arange(4) % 5
    if family == "text":
        lengths = torch.tensor([12, 9, 5, 2])
        padding = torch.arange(LENGTH)[None] >= lengths[:, None]
        return (tokens.masked_fill(padding, 0), padding), torch.arange(4) % 3
    if family == "gpt":
        return (tokens[:, :-1],), tokens[:, 1:]
    src_padding = torch.arange(LENGTH)[None] >= torch.tensor([12, 8, 6, 3])[:, None]
    return (tokens.masked_fill(src_padding, 0), tokens[:, :-1], src_padding), tokens[:, 1:]


def loss_of(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


@pytest.mark.parametrize("attention", PRESET_NAMES)
@pytest.mark.parametrize("family", ["vit", "text", "gpt", "seq2seq"])
@pytest.mark.slow
def test_every_family_and_preset_learns_a_fixed_batch(family, attention):
    model = build(family, attention)
    inputs, targets = batch_for(family, torch.Generator().manual_seed(1))
    logits = model(*inputs)
    expected_shape = {"vit": (4, 5), "text": (4, 3), "gpt": (4, LENGTH - 1, VOCAB), "seq2seq": (4, LENGTH - 1, VOCAB)}
    assert logits.shape == expected_shape[family]
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(25):
        loss = loss_of(model(*inputs), targets)
        assert torch.isfinite(loss)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses


@pytest.mark.parametrize("attention", PRESET_NAMES)
def test_gpt_is_causal(attention):
    model = randomise_value_mix(build("gpt", attention)).eval()
    tokens = torch.randint(0, VOCAB, (2, LENGTH))
    logits = model(tokens)
    for t in (0, 5, LENGTH - 2):
        future = tokens.clone()
        future[:, t + 1 :] = (future[:, t + 1 :] + 7) % VOCAB
        torch.testing.assert_close(model(future)[:, : t + 1], logits[:, : t + 1], rtol=0, atol=1e-5)


@pytest.mark.parametrize("attention", PRESET_NAMES)
def test_seq2seq_decoder_is_causal_and_ignores_padded_source(attention):
    model = randomise_value_mix(build("seq2seq", attention)).eval()
    src = torch.randint(3, VOCAB, (2, LENGTH))
    src_padding = torch.arange(LENGTH)[None] >= torch.tensor([LENGTH, 7])[:, None]
    tgt = torch.randint(3, VOCAB, (2, LENGTH))
    logits = model(src, tgt, src_padding)
    t = 4
    future = tgt.clone()
    future[:, t + 1 :] = (future[:, t + 1 :] + 5) % VOCAB
    torch.testing.assert_close(model(src, future, src_padding)[:, : t + 1], logits[:, : t + 1], rtol=0, atol=1e-5)
    other_padding_content = src.masked_fill(src_padding, 1)
    torch.testing.assert_close(model(other_padding_content, tgt, src_padding), logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("pool", ["cls", "mean"])
@pytest.mark.parametrize("attention", PRESET_NAMES)
def test_text_encoder_ignores_padded_content(attention, pool):
    torch.manual_seed(0)
    model = TextEncoderClassifier(
        TextEncoderConfig(pad_id=0, vocab_size=VOCAB, max_len=LENGTH, num_classes=3, depth=2, pool=pool, **SMALL),
        attention=attention,
    )
    model = randomise_value_mix(model).eval()
    tokens = torch.randint(1, VOCAB, (3, LENGTH))
    padding = torch.arange(LENGTH)[None] >= torch.tensor([LENGTH, 6, 1])[:, None]
    logits = model(tokens, padding)
    garbage = torch.where(padding, torch.randint(1, VOCAB, tokens.shape), tokens)
    torch.testing.assert_close(model(garbage, padding), logits, rtol=0, atol=1e-5)
    # A short sequence alone gives the same logits as inside a padded batch.
    torch.testing.assert_close(model(tokens[1:2, :6]), logits[1:2], rtol=1e-5, atol=1e-5)


def test_padding_mask_defaults_to_pad_id():
    model = TextEncoderClassifier(
        TextEncoderConfig(vocab_size=VOCAB, max_len=LENGTH, num_classes=3, depth=1, pad_id=0, **SMALL)
    ).eval()
    tokens = torch.randint(1, VOCAB, (2, LENGTH))
    tokens[1, 5:] = 0
    torch.testing.assert_close(model(tokens), model(tokens, tokens == 0))


@pytest.mark.parametrize("attention", PRESET_NAMES)
def test_parameter_counts(attention):
    d, heads = SMALL["dim"], SMALL["num_heads"]
    gpt = GPT(GPTConfig(vocab_size=VOCAB, max_len=LENGTH, depth=3, **SMALL), attention=attention)  # bias=False by default
    counts = gpt.parameter_counts()
    # Each layer's W_A is l x l with l the model's length (the registry's formula, checked in test_attention.py).
    assert counts["attention"] == 3 * attention_parameters(attention, d, num_heads=heads, max_len=LENGTH)
    assert counts["total"] == sum(p.numel() for p in gpt.parameters())
    assert counts["non_embedding"] == counts["total"] - VOCAB * d - LENGTH * d  # tied head counts once

    vit = VisionTransformer(
        ViTConfig(image_size=8, patch_size=2, in_channels=1, num_classes=5, depth=1, **SMALL), attention=attention
    )
    tokens = 16 + 1  # 4x4 patches + CLS
    assert vit.blocks[0].attn.max_len == tokens
    with_biases = attention_parameters(attention, d, num_heads=heads, max_len=tokens, bias=True)  # ViT keeps biases
    assert (
        vit.parameter_counts()["attention"] == with_biases > attention_parameters(attention, d, num_heads=heads, max_len=tokens)
    )


def test_gpt_generate_returns_requested_length_and_respects_top_k():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=VOCAB, max_len=LENGTH, depth=1, **SMALL), attention="super").eval()
    prompt = torch.randint(0, VOCAB, (2, 3))
    out = model.generate(prompt, max_new_tokens=20, temperature=0.8, top_k=1)
    assert out.shape == (2, 23)
    assert torch.equal(out[:, :3], prompt)
    greedy = model.generate(prompt, max_new_tokens=20, temperature=0)
    assert torch.equal(out, greedy)  # top_k=1 sampling is greedy decoding


@pytest.mark.parametrize("attention", ["standard", "super", "nonlinear_query"])
def test_seq2seq_beam_of_one_equals_greedy(attention):
    model = randomise_value_mix(build("seq2seq", attention)).eval()
    src = torch.randint(3, VOCAB, (3, LENGTH))
    src_padding = torch.arange(LENGTH)[None] >= torch.tensor([LENGTH, 7, 4])[:, None]
    greedy = model.generate(src, src_padding, max_new_tokens=8)
    memory = model.encode(src, src_padding)
    beam_one = model.beam_search(memory, src_padding, max_new_tokens=8, beam_size=1)
    assert torch.equal(greedy, beam_one)
    beams = model.generate(src, src_padding, max_new_tokens=8, beam_size=4)
    assert beams.shape[0] == 3 and beams.shape[1] <= 8


def test_beam_search_finds_the_best_sequence_of_a_known_distribution():
    """With a decoder that ignores its input, beam search must return the most probable sequence."""
    model = build("seq2seq", "standard").eval()
    # eos is more probable after a token that greedy decoding does not pick first.
    table = torch.full((VOCAB, VOCAB), -20.0)
    table[1, 5], table[1, 6] = -0.5, -1.0  # after bos: 5 (p .61) beats 6 (p .37)
    table[5, 7], table[5, 8] = -1.2, -1.2  # after 5: uncertain, then a long tail
    table[7, 2], table[8, 2] = -1.2, -1.2
    table[6, 2] = -0.01  # after 6: eos almost surely
    for i in range(VOCAB):
        table[i] = table[i].log_softmax(-1)

    def decode(tgt_in, memory, src_padding_mask=None, tgt_padding_mask=None, cache=None):
        return table[tgt_in]  # depends on the last token only, so with a cache (last token alone) too

    model.decode = decode
    src = torch.randint(3, VOCAB, (1, 4))
    greedy = model.generate(src, max_new_tokens=4)
    best = model.generate(src, max_new_tokens=4, beam_size=3, length_penalty=0.0)
    assert greedy[0, 0].item() == 5
    assert best[0, :2].tolist() == [6, 2]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: VisionTransformer(ViTConfig(image_size=10, patch_size=4)), "image_size=10 is not divisible by patch_size=4"),
        (lambda: VisionTransformer(ViTConfig(pool="max")), "Unknown pool 'max'; valid choices are cls, mean"),
        (lambda: GPT(GPTConfig(vocab_size=VOCAB, max_len=LENGTH, dim=30, num_heads=4)), "dim=30 is not divisible by num_heads=4"),
    ],
)
def test_model_configuration_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_sequences_longer_than_max_len_raise():
    model = GPT(GPTConfig(vocab_size=VOCAB, max_len=LENGTH, depth=1, **SMALL))
    with pytest.raises(ValueError, match=f"Sequence length {LENGTH + 1} exceeds max_len={LENGTH}"):
        model(torch.zeros(1, LENGTH + 1, dtype=torch.long))


@pytest.mark.parametrize("init_std", [0.02, 0.125])
def test_gpt_init_std_sets_the_normal_init_and_scales_residual_projections(init_std):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=64, max_len=32, dim=64, depth=2, num_heads=2, init_std=init_std))
    block = model.blocks[0]
    assert block.attn.in_proj.weight.std().item() == pytest.approx(init_std, rel=0.05)
    assert model.token_embed.weight.std().item() == pytest.approx(init_std, rel=0.05)
    assert block.mlp.fc2.weight.std().item() == pytest.approx(init_std / 2, rel=0.05)  # 1/sqrt(2 * depth)


def test_gpt_rejects_a_non_positive_init_std():
    from lit_attention.errors import ConfigError

    with pytest.raises(ConfigError, match="init_std=0.0 is invalid"):
        GPT(GPTConfig(vocab_size=64, max_len=32, dim=64, depth=2, num_heads=2, init_std=0.0))
