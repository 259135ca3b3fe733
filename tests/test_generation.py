"""Decoding with the key/value cache computes what the full recompute computes, for every variant.

Every weight is random, W_A included: an identity W_A (super's default init) would hide a wrong row,
a missing causal mask or padding leaking through the value mix. Float64, so "equal" can mean 1e-10.
"""

import pytest
import torch

from lit_attention.modeling.attention import MultiHeadAttention, list_presets, resolve_spec
from lit_attention.errors import ConfigError
from lit_attention.modeling import GPT, Seq2SeqTransformer
from lit_attention.modeling.sampling import filter_logits, next_token
from lit_attention.modeling import GPTConfig, Seq2SeqConfig

DIM, HEADS, VOCAB, MAX_LEN = 16, 2, 19, 14
VARIANTS = list_presets() + [
    "query=residual_mlp,key=identity,value=identity,value_mix=true",
    "query=identity,key=linear,value=linear,value_mix=true",
    "query=residual,key=identity,value=linear",
]
IDS = [resolve_spec(v).name for v in VARIANTS]
TIGHT = dict(rtol=1e-10, atol=1e-10)


def randomise(model):
    """Every parameter random, in float64, in eval mode: matrices (W_A too) at about 1/sqrt(fan-in),
    norm weights around 1, small biases; scaled so that decoding depends on the context (large
    biases or a tied head would make it repeat one token, and hide a cache that loses the context)."""
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(torch.randn_like(p) * 0.1)
            elif p.dim() == 1:
                p.copy_(1.0 + torch.randn_like(p) * 0.3)
            else:
                p.copy_(torch.randn_like(p) * 1.5 / p.shape[-1] ** 0.5)
    return model.double().eval()


def gpt(variant):
    torch.manual_seed(0)
    return randomise(
        GPT(
            GPTConfig(
                vocab_size=VOCAB, max_len=MAX_LEN, dim=DIM, depth=2, num_heads=HEADS, mlp_ratio=2.0, bias=True, tie_weights=False
            ),
            attention=variant,
        )
    )


def seq2seq(variant):
    torch.manual_seed(0)
    return randomise(
        Seq2SeqTransformer(
            Seq2SeqConfig(
                pad_id=0,
                bos_id=1,
                eos_id=2,
                vocab_size=VOCAB,
                max_src_len=9,
                max_tgt_len=8,
                dim=DIM,
                encoder_depth=1,
                decoder_depth=2,
                num_heads=HEADS,
                mlp_ratio=2.0,
                tie_weights=False,
            ),
            attention=variant,
        )
    )


def left_padding(lengths, width):
    return torch.arange(width)[None] < (width - torch.tensor(lengths))[:, None]


# ---------------------------------------------------------------- one attention layer


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_layer_cache_matches_full_forward_in_any_chunking(variant):
    torch.manual_seed(1)
    mha = randomise(MultiHeadAttention(DIM, HEADS, variant, max_len=MAX_LEN, causal=True))
    x = torch.randn(3, 11, DIM, dtype=torch.float64)
    expected = mha(x)
    cache = mha.new_cache(3)
    # A prompt, single steps, then several positions at once after a prefix (the offset causal mask).
    chunks = [mha(x[:, :4], cache=cache)] + [mha(x[:, t : t + 1], cache=cache) for t in range(4, 8)]
    chunks.append(mha(x[:, 8:], cache=cache))
    torch.testing.assert_close(torch.cat(chunks, dim=1), expected, **TIGHT)
    assert cache.length == 11


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_cross_attention_memory_cache_matches_full_forward(variant):
    torch.manual_seed(1)
    mha = randomise(MultiHeadAttention(DIM, HEADS, variant, max_len=MAX_LEN, cross_attention=True))
    x = torch.randn(3, 5, DIM, dtype=torch.float64)
    memory = torch.randn(3, 9, DIM, dtype=torch.float64)
    padding = torch.arange(9)[None] >= torch.tensor([9, 5, 2])[:, None]
    expected = mha(x, memory=memory, memory_padding_mask=padding)
    cache = mha.memory_cache(memory, padding)
    steps = torch.cat([mha(x[:, t : t + 1], cache=cache) for t in range(5)], dim=1)
    torch.testing.assert_close(steps, expected, **TIGHT)


@pytest.mark.parametrize("variant", ["standard", "super", "efficient"])
def test_reordered_cache_continues_the_rows_it_took_over(variant):
    """Beam search's reorder: after it, row i continues row rows[i]'s prefix exactly."""
    torch.manual_seed(1)
    mha = randomise(MultiHeadAttention(DIM, HEADS, variant, max_len=MAX_LEN, causal=True))
    x = torch.randn(4, 7, DIM, dtype=torch.float64)
    rows = torch.tensor([2, 2, 0, 3])
    cache = mha.new_cache(4)
    mha(x[:, :6], cache=cache)
    cache.reorder(rows)
    expected = mha(torch.cat([x[rows, :6], x[:, 6:]], dim=1))[:, 6:]
    torch.testing.assert_close(mha(x[:, 6:], cache=cache), expected, **TIGHT)


@pytest.mark.parametrize("variant", ["efficient", "super", "optimized"])
def test_reordering_a_memory_cache_leaves_the_callers_memory_alone(variant):
    """Identity keys (and values) make the cross-attention cache hold the memory tensor itself: a
    reorder must not write into it, and must still give row i what row rows[i] attended to."""
    torch.manual_seed(2)
    mha = randomise(MultiHeadAttention(DIM, HEADS, variant, max_len=6, cross_attention=True))
    memory = torch.randn(3, 6, DIM, dtype=torch.float64)
    before = memory.clone()
    x = torch.randn(3, 1, DIM, dtype=torch.float64)
    rows = torch.tensor([2, 0, 0])
    cache = mha.memory_cache(memory)
    torch.testing.assert_close(mha(x, cache=cache), mha(x, memory=memory), **TIGHT)  # the first forward fills it
    assert any(buffer is memory for buffer in (cache.keys, cache.raw_values))  # the aliasing this test is about
    cache.reorder(rows)
    assert torch.equal(memory, before)
    torch.testing.assert_close(mha(x, cache=cache), mha(x, memory=memory[rows]), **TIGHT)


def test_cache_errors_are_one_sentence():
    mha = MultiHeadAttention(DIM, HEADS, "super", max_len=MAX_LEN, causal=True)
    with pytest.raises(ConfigError, match="Cache capacity 20 is invalid for variant 'super'"):
        mha.new_cache(1, capacity=20)
    with pytest.raises(ConfigError, match="new_cache is for causal self-attention"):
        MultiHeadAttention(DIM, HEADS).new_cache(1, capacity=8)
    with pytest.raises(ConfigError, match="memory_cache is for cross-attention"):
        mha.memory_cache(torch.randn(1, 4, DIM))
    cache = mha.new_cache(1, capacity=4)
    with pytest.raises(ConfigError, match="Position 4 is past the cache's capacity of 4 positions"):
        mha(torch.randn(1, 5, DIM), cache=cache)


# ---------------------------------------------------------------- GPT


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_gpt_cached_logits_match_uncached_at_every_step(variant):
    model = gpt(variant)
    tokens = torch.randint(0, VOCAB, (2, MAX_LEN))
    expected = model(tokens)
    cache = model.new_cache(2)
    logits = [model(tokens[:, :5], cache=cache)]
    logits += [model(tokens[:, t : t + 1], cache=cache) for t in range(5, MAX_LEN)]
    torch.testing.assert_close(torch.cat(logits, dim=1), expected, **TIGHT)


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_gpt_greedy_and_padded_generation_are_the_same_with_and_without_cache(variant):
    model = gpt(variant)
    torch.manual_seed(2)
    tokens = torch.randint(0, VOCAB, (3, 6))
    padding = left_padding([6, 4, 1], 6)
    # 6 + 12 > MAX_LEN: the last steps crop the context (and drop the cache).
    cached = model.generate(tokens, 12, temperature=0)
    assert cached.shape == (3, 18) and torch.equal(cached[:, :6], tokens)
    assert torch.equal(cached, model.generate(tokens, 12, temperature=0, use_cache=False))
    padded = model.generate(tokens, 12, temperature=0, padding_mask=padding)
    assert torch.equal(padded, model.generate(tokens, 12, temperature=0, padding_mask=padding, use_cache=False))
    assert torch.equal(padded[:, :6], tokens)  # the prompts come back with their padding in front
    for row, pads in enumerate(padding.sum(dim=1).tolist()):
        alone = model.generate(tokens[row : row + 1, pads:], 12, temperature=0)
        assert torch.equal(padded[row, pads:], alone[0]), row


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_gpt_cache_of_rows_with_different_lengths_matches_each_row_alone(variant):
    """Prompts right-aligned in one forward, then `keep_first`: each row's logits, step by step, are
    those of the full forward of that row alone (own positions, own W_A rows, nothing stale)."""
    model = gpt(variant)
    torch.manual_seed(3)
    lengths = torch.tensor([5, 3, 1])
    sequences = torch.randint(0, VOCAB, (3, 12))
    cache = model.new_cache(3)
    prompt_logits = model(sequences[:, :5], cache=cache)  # rows 1 and 2 carry 2 and 4 stale positions
    for block_cache in cache:
        block_cache.attn.keep_first(lengths)
    steps = [model(sequences[torch.arange(3), lengths + i][:, None], cache=cache) for i in range(7)]
    for row, length in enumerate(lengths.tolist()):
        alone = model(sequences[row : row + 1, : length + 7])[0]
        torch.testing.assert_close(prompt_logits[row, :length], alone[:length], **TIGHT)
        torch.testing.assert_close(torch.cat(steps, dim=1)[row], alone[length:], **TIGHT)


def test_gpt_cache_refuses_positions_past_max_len():
    model = gpt("super")
    for lengths in (torch.tensor([MAX_LEN, MAX_LEN]), torch.tensor([MAX_LEN, 3])):  # equal rows, then unequal
        cache = model.new_cache(2)
        model(torch.zeros(2, MAX_LEN, dtype=torch.long), cache=cache)
        for block_cache in cache:
            block_cache.attn.keep_first(lengths)
        with pytest.raises(ConfigError, match=f"Sequence length {MAX_LEN + 1} exceeds max_len={MAX_LEN}"):
            model(torch.zeros(2, 1, dtype=torch.long), cache=cache)


def test_gpt_sampling_draws_the_same_tokens_with_and_without_cache():
    model = gpt("super")
    tokens = torch.randint(0, VOCAB, (2, 3))
    runs = []
    for use_cache in (True, False):
        torch.manual_seed(7)
        runs.append(model.generate(tokens, 8, temperature=0.9, top_k=5, top_p=0.9, use_cache=use_cache))
    assert torch.equal(*runs)


def test_gpt_generate_rejects_bad_padding_masks():
    model = gpt("standard")
    tokens = torch.randint(0, VOCAB, (2, 4))
    with pytest.raises(ConfigError, match="padding_mask has padding after a real token; pad prompts on the left"):
        model.generate(tokens, 2, padding_mask=left_padding([4, 2], 4).flip(-1))
    with pytest.raises(ConfigError, match="marks a whole prompt as padding"):
        model.generate(tokens, 2, padding_mask=left_padding([4, 0], 4))
    with pytest.raises(ConfigError, match="padding_mask must be a bool tensor shaped like the prompts"):
        model.generate(tokens, 2, padding_mask=torch.zeros(2, 3, dtype=torch.bool))


# ---------------------------------------------------------------- encoder–decoder


def translation_batch():
    torch.manual_seed(4)
    src = torch.randint(3, VOCAB, (3, 9))
    padding = torch.arange(9)[None] >= torch.tensor([9, 6, 3])[:, None]  # sources are right-padded
    return src, padding


def with_reachable_eos(model, src, padding):
    """Make eos a token greedy decoding first emits a few steps in, so rows and beams finish at
    different steps (the default eos may never come from random weights)."""
    model.eos_id = -1
    greedy = model.generate(src, padding, use_cache=False)[0].tolist()
    late = [token for i, token in enumerate(greedy) if i >= 2 and token not in greedy[:i] + [model.pad_id, model.bos_id]]
    model.eos_id = late[0] if late else greedy[-1]
    return model


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_seq2seq_cached_decoder_logits_match_uncached(variant):
    model = seq2seq(variant)
    src, padding = translation_batch()
    memory = model.encode(src, padding)
    tgt = torch.randint(0, VOCAB, (3, 8))
    expected = model.decode(tgt, memory, padding)
    cache = model.new_decoder_cache(memory, padding)
    steps = torch.cat([model.decode(tgt[:, t : t + 1], memory, padding, cache=cache) for t in range(8)], dim=1)
    torch.testing.assert_close(steps, expected, **TIGHT)


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_seq2seq_greedy_and_beams_are_the_same_with_and_without_cache_and_alone(variant):
    model = seq2seq(variant)
    src, padding = translation_batch()
    model = with_reachable_eos(model, src, padding)
    for beam_size in (1, 3):
        cached = model.generate(src, padding, beam_size=beam_size, length_penalty=0.7)
        assert torch.equal(cached, model.generate(src, padding, beam_size=beam_size, length_penalty=0.7, use_cache=False))
        for row, length in enumerate((~padding).sum(dim=1).tolist()):
            alone = model.generate(src[row : row + 1, :length], beam_size=beam_size, length_penalty=0.7)[0]
            assert torch.equal(cached[row, : len(alone)], alone), (beam_size, row)
            assert (cached[row, len(alone) :] == model.pad_id).all()
    assert (cached == model.eos_id).any()  # some hypothesis did finish


# ---------------------------------------------------------------- sampler


def test_top_k_one_keeps_a_single_candidate_among_tied_maxima():
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    kept = filter_logits(logits, top_k=1).isfinite()
    assert kept.sum(dim=1).tolist() == [1, 1]
    assert kept[0, 1] and kept[1, 0]  # ties go to the lower token id, as argmax
    assert filter_logits(logits, top_k=3).isfinite().sum(dim=1).tolist() == [3, 3]
    assert torch.equal(next_token(logits, temperature=1.0, top_k=1), logits.argmax(dim=-1))


def test_top_p_keeps_the_fewest_tokens_reaching_the_mass():
    logits = torch.tensor([[0.05, 0.5, 0.15, 0.3]]).log()
    assert filter_logits(logits, top_p=0.45).isfinite().tolist() == [[False, True, False, False]]
    assert filter_logits(logits, top_p=0.75).isfinite().tolist() == [[False, True, False, True]]
    assert filter_logits(logits, top_p=0.9).isfinite().tolist() == [[False, True, True, True]]
    assert filter_logits(logits, top_p=1.0).isfinite().all()
    # top_k first, then top_p on what is left: of {0.5, 0.3}, renormalised to {0.625, 0.375}.
    assert filter_logits(logits, top_k=2, top_p=0.6).isfinite().tolist() == [[False, True, False, False]]
    torch.manual_seed(0)
    draws = torch.stack([next_token(logits, temperature=1.0, top_p=0.75) for _ in range(200)])
    assert set(draws.flatten().tolist()) == {1, 3}


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(top_k=0), "top_k=0 is invalid; give a positive number of candidates, or None to keep them all."),
        (dict(temperature=-0.5), "temperature=-0.5 is invalid; give 0 for greedy decoding or a positive temperature."),
        (dict(top_p=0.0), r"top_p=0.0 is invalid; give a probability mass in \(0, 1\], or None to keep every token."),
        (dict(top_p=1.5), r"top_p=1.5 is invalid"),
    ],
)
def test_bad_sampling_settings_raise_one_sentence(settings, message):
    model = gpt("standard")
    with pytest.raises(ConfigError, match=f"^{message}"):
        model.generate(torch.zeros(1, 2, dtype=torch.long), 3, **settings)
