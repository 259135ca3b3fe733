"""The modern block's attention options (kv_heads, qk_norm, RoPE, ALiBi, no positions) with every variant.

The combinations are enrolled from the registry (every preset, and kv_heads wherever it is allowed) and
from the configs' own `position` choices, so a new preset or position is checked without a new line here.
Each guarantee is one test looping over tiny float64 modules, cheap enough for the fast tier.
"""

from __future__ import annotations

import itertools
import math
import typing
import warnings
from dataclasses import replace

import pytest
import torch

from lit_attention.analysis.weights import head_products
from lit_attention.errors import ConfigError
from lit_attention.modeling.attention import PRESETS, MultiHeadAttention, count_attention_parameters, resolve_spec
from lit_attention.modeling.costs import attention_flops
from lit_attention.modeling.gpt import GPT, GPTConfig
from lit_attention.modeling.positions import alibi_bias, alibi_slopes, apply_rotary, rotary_tables
from lit_attention.modeling.seq2seq import Seq2SeqConfig, Seq2SeqTransformer
from lit_attention.modeling.text_encoder import TextEncoderClassifier, TextEncoderConfig
from lit_attention.modeling.variants import MONOMIALS, parameter_terms

DIM, HEADS, MAX_LEN = 16, 4, 6
GPT_POSITIONS = typing.get_args(typing.get_type_hints(GPTConfig)["position"])
ENCODER_POSITIONS = typing.get_args(typing.get_type_hints(TextEncoderConfig)["position"])


def grouped(preset: str) -> bool:
    spec = PRESETS[preset]
    return spec.key == spec.value == "linear"


def variants() -> list[str]:
    """Every preset, and with kv_heads 1 (multi-query) and 2 of 4 (grouped) where it has linear keys and values."""
    names = list(PRESETS)
    names += [f"{p},kv_heads={g}" for p in PRESETS if grouped(p) for g in (1, 2)]
    return names


def randomised(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """float64 with every parameter random (W_A and the norms' weights too: ones would hide their bugs)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.3 + (1.0 if p.dim() == 1 else 0.0))
    return module.double().eval()


def attention(variant: str, position: str, qk_norm: bool, causal: bool) -> MultiHeadAttention:
    spec = replace(resolve_spec(variant), value_mix_init="normal")
    return randomised(
        MultiHeadAttention(DIM, HEADS, spec, max_len=MAX_LEN, causal=causal, qk_norm=qk_norm, alibi=position == "alibi")
    )


def rotary_of(position: str, length: int):
    return rotary_tables(torch.arange(length), DIM // HEADS, 10000.0, torch.float64) if position == "rope" else None


def combinations(positions=GPT_POSITIONS):
    return itertools.product(variants(), positions, (False, True))


# ---------------------------------------------------------------- the tables themselves


def test_rotary_tables_rotate_each_pair_of_half_columns_by_its_angle():
    """Column c and c + d_h/2 of a head turn by p·base^(-2c/d_h) at position p, written out with loops."""
    d_h, base = 6, 100.0
    x = torch.randn(5, d_h, dtype=torch.float64)
    rotated = apply_rotary(x, rotary_tables(torch.arange(5), d_h, base, torch.float64))
    for p, c in itertools.product(range(5), range(d_h // 2)):
        angle = p * base ** (-2 * c / d_h)
        first, second = x[p, c], x[p, c + d_h // 2]
        assert math.isclose(rotated[p, c], first * math.cos(angle) - second * math.sin(angle), abs_tol=1e-12)
        assert math.isclose(rotated[p, c + d_h // 2], second * math.cos(angle) + first * math.sin(angle), abs_tol=1e-12)
    torch.testing.assert_close(rotated[0], x[0], rtol=0, atol=0)  # position 0 is not rotated
    per_row = rotary_tables(torch.tensor([[3, 4], [0, 1]]), d_h, base, torch.float64)
    assert per_row[0].shape == (2, 1, 2, d_h)
    torch.testing.assert_close(per_row[0][0, 0], rotary_tables(torch.tensor([3, 4]), d_h, base, torch.float64)[0])


def test_alibi_slopes_follow_the_papers_geometric_sequence_for_any_head_count():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0 ** -(i + 1) for i in range(8)], dtype=torch.float64))
    # 6 heads: the 4-head sequence 2^-2, 2^-4, 2^-6, 2^-8, then every other one of the 8-head sequence.
    torch.testing.assert_close(
        alibi_slopes(6), torch.tensor([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3], dtype=torch.float64)
    )
    bias = alibi_bias(alibi_slopes(2), torch.arange(3), torch.arange(4))
    assert bias.shape == (2, 3, 4) and bias[1, 2, 0] == -2 * 2.0**-8 and bias[0, 1, 3] == -2 * 2.0**-4


# ---------------------------------------------------------------- each option against its definition


def test_grouped_heads_are_standard_heads_with_shared_keys_and_values():
    """kv_heads g: query head i reads key/value head i // (h / g), as transformers' repeat_kv."""
    x = torch.randn(2, 5, DIM, dtype=torch.float64)
    d_h = DIM // HEADS
    for preset, g, causal in itertools.product([p for p in PRESETS if grouped(p)], (1, 2), (False, True)):
        gqa = attention(f"{preset},kv_heads={g}", "learned", False, causal)
        full = attention(preset, "learned", False, causal)
        rows = dict(zip(gqa._from_x, gqa.in_proj.weight.split(gqa._x_widths)))  # q (d rows), k, v (g·d_h rows)
        repeat = lambda w: w.view(g, d_h, DIM).repeat_interleave(HEADS // g, dim=0).reshape(DIM, DIM)  # noqa: E731
        with torch.no_grad():
            full.in_proj.weight.copy_(torch.cat([w if n == "q" else repeat(w) for n, w in rows.items()]))
            full.out_proj.weight.copy_(gqa.out_proj.weight)
            if gqa.query_mlp is not None:
                full.query_mlp.load_state_dict(gqa.query_mlp.state_dict())
        for fused in (True, False):
            gqa.fused = full.fused = fused
            torch.testing.assert_close(gqa(x), full(x), rtol=1e-10, atol=1e-10)
        # The weight analysis reads each query head's shared key/value head the same way.
        for name, per_head in head_products(gqa).items():
            torch.testing.assert_close(per_head, head_products(full)[name], rtol=1e-10, atol=1e-10)


def test_qk_norm_makes_scores_blind_to_the_scale_of_queries_and_keys():
    x = torch.randn(2, 5, DIM, dtype=torch.float64)
    for qk_norm in (False, True):  # eps 1e-12: RMSNorm's own eps is the only break of its scale invariance
        mha = randomised(MultiHeadAttention(DIM, HEADS, "standard", qk_norm=qk_norm, norm_eps=1e-12))
        y = mha(x)
        with torch.no_grad():
            mha.in_proj.weight[: 2 * DIM] *= 3.0  # W_Q and W_K
        assert torch.allclose(mha(x), y, rtol=1e-10, atol=1e-10) == qk_norm


def test_rope_scores_depend_only_on_relative_positions_and_alibi_adds_its_bias():
    """Shifting every position leaves RoPE attention unchanged; ALiBi's weights are softmax(s QKᵀ - m|i - j|)."""
    x = torch.randn(2, 5, DIM, dtype=torch.float64)
    for variant in ("standard", "efficient", "identity_query", "nonlinear_query"):
        mha = attention(variant, "rope", False, causal=True)
        shifted = rotary_tables(torch.arange(7, 12), DIM // HEADS, 10000.0, torch.float64)
        y = mha(x, rotary=rotary_of("rope", 5))
        torch.testing.assert_close(mha(x, rotary=shifted), y, rtol=1e-10, atol=1e-10)
        assert not torch.allclose(y, mha(x), atol=1e-6)  # and it does rotate
    mha = attention("efficient", "alibi", False, causal=False)
    mha.fused, mha.record_weights = False, True
    mha(x)
    split = lambda t: t.view(2, 5, HEADS, DIM // HEADS).transpose(1, 2)  # noqa: E731
    queries, keys = split(x @ mha.in_proj.weight.T), split(x)  # efficient: Q_i = X W_Q,i, K_i = X_i
    scores = queries @ keys.transpose(-2, -1) * mha.scale + alibi_bias(alibi_slopes(HEADS), torch.arange(5), torch.arange(5))
    torch.testing.assert_close(mha.recorded_weights, scores.softmax(-1), rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------- guarantees over every combination


@pytest.mark.slow  # every combination of the block's options: about 1 s of CPU
@torch.no_grad()  # forward guarantees: autograd's bookkeeping would only cost time
def test_every_combination_fused_equals_reference_is_causal_and_ignores_padding():
    """Every preset (kv_heads 1 and 2 where allowed) × position × qk_norm, bidirectional and causal."""
    torch.manual_seed(1)
    x = torch.randn(3, 5, DIM, dtype=torch.float64)
    padding = torch.arange(5)[None] >= torch.tensor([5, 3, 2])[:, None]  # right padding
    real = ~padding[..., None]
    noise = torch.randn_like(x) * 5
    for (variant, position, qk_norm), causal in itertools.product(combinations(), (False, True)):
        case = (variant, position, qk_norm, causal)
        mha, rotary = attention(variant, position, qk_norm, causal), rotary_of(position, 5)
        outputs = {}
        for fused, padded in itertools.product((True, False), (None, padding)):  # unpadded: SDPA's no-mask path
            mha.fused = fused
            outputs[fused, padded is None] = mha(x, key_padding_mask=padded, rotary=rotary)
        torch.testing.assert_close(outputs[True, True], outputs[False, True], rtol=1e-9, atol=1e-9, msg=str(case))
        outputs[False] = outputs[False, False]
        torch.testing.assert_close(outputs[True, False] * real, outputs[False] * real, rtol=1e-9, atol=1e-9, msg=str(case))
        changed = mha(x + noise * padding[..., None], key_padding_mask=padding, rotary=rotary)
        torch.testing.assert_close(changed * real, outputs[False] * real, rtol=1e-9, atol=1e-9, msg=str(case))
        if causal:  # a change at position 3 and later leaves positions 0..2 alone (super's W_A included)
            y = mha(x, rotary=rotary)
            later = mha(torch.cat([x[:, :3], x[:, 3:] + noise[:, 3:]], dim=1), rotary=rotary)
            torch.testing.assert_close(later[:, :3], y[:, :3], rtol=1e-9, atol=1e-9, msg=str(case))
            assert not torch.allclose(later[:, 3:], y[:, 3:])


def gpt(variant: str, position: str, qk_norm: bool) -> GPT:
    config = GPTConfig(vocab_size=11, max_len=8, dim=DIM, depth=1, num_heads=HEADS, position=position, qk_norm=qk_norm)
    return randomised(GPT(config, replace(resolve_spec(variant), value_mix_init="normal")))


@pytest.mark.slow  # every combination of the block's options: about 1 s of CPU
@torch.no_grad()  # forward guarantees: autograd's bookkeeping would only cost time
def test_every_combination_decodes_from_the_cache_as_it_recomputes():
    """GPT level: chunked cached logits equal the full forward; left-padded prompts of different lengths
    (with RoPE and ALiBi at each row's own positions) decode as each row alone, with or without the cache."""
    torch.manual_seed(2)
    tokens = torch.randint(0, 11, (2, 6))
    padding = torch.zeros(2, 6, dtype=torch.bool)
    padding[1, :2] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # head width 4 rules out the fused masked GPU kernels: not this test's point
        for variant, position, qk_norm in combinations():
            case = (variant, position, qk_norm)
            model = gpt(variant, position, qk_norm)
            cache = model.new_cache(2)
            chunks = [model(tokens[:, :3], cache=cache), model(tokens[:, 3:4], cache=cache), model(tokens[:, 4:], cache=cache)]
            torch.testing.assert_close(torch.cat(chunks, 1), model(tokens), rtol=1e-9, atol=1e-9, msg=str(case))
            both = model.generate(tokens, 2, temperature=0, padding_mask=padding)
            assert torch.equal(both, model.generate(tokens, 2, temperature=0, padding_mask=padding, use_cache=False)), case
            alone = model.generate(tokens[1:, 2:], 2, temperature=0)
            assert torch.equal(both[1, -2:], alone[0, -2:]), case
            cache = model.new_cache(2)  # the ragged step itself, logit by logit
            model(tokens[:, :4], cache=cache)
            for block_cache in cache:
                block_cache.attn.keep_first(torch.tensor([4, 2]))
            step = model(tokens[:, 4:5], cache=cache)
            torch.testing.assert_close(
                step[1, 0], model(torch.cat([tokens[1:, :2], tokens[1:, 4:5]], 1))[0, -1], rtol=1e-9, atol=1e-9, msg=str(case)
            )


@pytest.mark.slow  # every combination of the block's options: about 1 s of CPU
@torch.no_grad()  # forward guarantees: autograd's bookkeeping would only cost time
def test_encoders_ignore_padding_and_seq2seq_decodes_from_the_cache_with_every_position():
    torch.manual_seed(3)
    src = torch.randint(3, 11, (2, 6))
    src_padding = torch.zeros(2, 6, dtype=torch.bool)
    src_padding[1, 4:] = True
    for variant, position, qk_norm in combinations(ENCODER_POSITIONS):
        if "kv_heads=1" in variant:
            continue  # kv_heads 2 covers the grouped path; the cache above covers multi-query
        case = (variant, position, qk_norm)
        encoder = randomised(
            TextEncoderClassifier(
                TextEncoderConfig(
                    vocab_size=11,
                    max_len=6,
                    num_classes=3,
                    pad_id=0,
                    dim=DIM,
                    depth=1,
                    num_heads=HEADS,
                    position=position,
                    qk_norm=qk_norm,
                    pool="mean",
                ),
                variant,
            )
        )
        tokens = src.masked_fill(src_padding, 0)
        logits = encoder(tokens)
        torch.testing.assert_close(encoder(tokens[1:, :4])[0], logits[1], rtol=1e-9, atol=1e-9, msg=str(case))
        model = randomised(
            Seq2SeqTransformer(
                Seq2SeqConfig(
                    vocab_size=11,
                    max_src_len=6,
                    max_tgt_len=6,
                    pad_id=0,
                    bos_id=1,
                    eos_id=2,
                    dim=DIM,
                    encoder_depth=1,
                    decoder_depth=1,
                    num_heads=HEADS,
                    position=position,
                    qk_norm=qk_norm,
                ),
                variant,
            )
        )
        memory = model.encode(src, src_padding)
        target = torch.randint(3, 11, (2, 5))
        cache = model.new_decoder_cache(memory, src_padding)
        chunks = [
            model.decode(target[:, :3], memory, src_padding, cache=cache),
            model.decode(target[:, 3:], memory, src_padding, cache=cache),
        ]
        torch.testing.assert_close(
            torch.cat(chunks, 1), model.decode(target, memory, src_padding), rtol=1e-9, atol=1e-9, msg=str(case)
        )


# ---------------------------------------------------------------- accounting


def test_grouped_keys_and_values_are_counted_in_parameters_and_flops():
    for preset, g in itertools.product([p for p in PRESETS if grouped(p)], (1, 2, 4)):
        spec = resolve_spec(f"{preset},kv_heads={g}")
        terms = parameter_terms(spec)
        expected = sum(n * MONOMIALS[m](DIM, HEADS, MAX_LEN, g) for m, n in terms.items())
        for cross in (False, True):
            layer = MultiHeadAttention(DIM, HEADS, spec, max_len=MAX_LEN, cross_attention=cross)
            assert count_attention_parameters(layer) == expected, (preset, g, cross)
        saved = 2 * (DIM * DIM - DIM * g * DIM // HEADS)  # the rows W_K and W_V lose
        assert attention_flops(spec, 5, DIM, num_heads=HEADS) == attention_flops(preset, 5, DIM, num_heads=HEADS) - 2 * 5 * saved
    assert resolve_spec("standard,kv_heads=2").name == "standard,kv_heads=2"
    assert resolve_spec({"preset": "standard", "kv_heads": "2"}).kv_heads == 2
    counts = {p: gpt("standard", p, False).parameter_counts() for p in GPT_POSITIONS}
    for position in ("rope", "alibi", "none"):  # no position embedding: max_len · d fewer parameters
        assert counts["learned"]["total"] - counts[position]["total"] == 8 * DIM
        assert counts[position]["non_embedding"] == counts["learned"]["non_embedding"]
    assert gpt("standard", "learned", True).parameter_counts()["attention"] == counts["learned"]["attention"] + 2 * DIM // HEADS


# ---------------------------------------------------------------- refusals


def test_bad_combinations_are_one_sentence():
    refusals = [
        (lambda: MultiHeadAttention(DIM, HEADS, "standard,kv_heads=3"), "kv_heads=3 does not divide num_heads=4"),
        (lambda: MultiHeadAttention(DIM, HEADS, "efficient,kv_heads=2"), "needs linear keys and values"),
        (lambda: MultiHeadAttention(DIM, HEADS, "optimized,kv_heads=1"), "has an identity value"),
        (lambda: resolve_spec("standard,kv_heads=0"), "kv_heads=0 is invalid"),
        (lambda: MultiHeadAttention(DIM, HEADS, cross_attention=True, alibi=True), "alibi=True is for self-attention"),
        (
            lambda: MultiHeadAttention(DIM, HEADS, cross_attention=True)(
                torch.randn(1, 2, DIM), memory=torch.randn(1, 3, DIM), rotary=rotary_tables(torch.arange(2), 4)
            ),
            "rotary is for self-attention",
        ),
        (lambda: TextEncoderConfig(position="none"), "position='none' is invalid for the text encoder"),
        (lambda: Seq2SeqConfig(position="none"), "position='none' is invalid for the encoder-decoder"),
        (lambda: GPTConfig(dim=12, num_heads=4, position="rope"), "needs an even head width, got d_h = dim / num_heads = 3"),
        (lambda: GPTConfig(position="sinusoidal"), "valid choices are learned, rope, alibi, none"),
        (lambda: GPTConfig(rope_base=1.0), "rope_base=1.0 is invalid"),
    ]
    for build, words in refusals:
        with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")) as error:
            build()
        assert str(error.value).count(". ") == 0 and str(error.value).endswith("."), str(error.value)
    # kv_heads equal to num_heads is no grouping, so an identity key is fine there.
    MultiHeadAttention(DIM, HEADS, "efficient,kv_heads=4")
    assert GPTConfig(position=None).position == "none"  # YAML's and the command line's `none` arrive as None


@pytest.mark.slow  # attention over 2,048 positions
def test_alibi_slopes_survive_a_precision_plugin_casting_floating_buffers_to_bf16():
    """FSDP's bf16 mixed precision (and Lightning's bf16-true) cast a module's floating buffers: ALiBi's slopes,
    kept as whole-number exponents, are untouched, so at 2,048 positions and 12 heads the bias under bf16
    autocast is the exact float32 bias rounded once to bf16 (it was slopes and distances rounded too: an
    error up to 6.8 where rounding the bias alone errs up to 4)."""
    from lit_attention.modeling.gpt import GPT, GPTConfig

    model = GPT(GPTConfig(vocab_size=16, max_len=2048, dim=48, depth=1, num_heads=12, position="alibi"))
    for module in model.modules():  # what a precision plugin does to buffers
        for name, buffer in list(module.named_buffers(recurse=False)):
            if buffer.is_floating_point():
                setattr(module, name, buffer.to(torch.bfloat16))
    attention = model.blocks[0].attn
    torch.testing.assert_close(attention.alibi_slopes.double(), alibi_slopes(12), rtol=1e-6, atol=0)
    seen = {}
    model.blocks[0].register_forward_pre_hook(lambda block, args, kwargs: seen.update(mask=kwargs["mask"]), with_kwargs=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(torch.zeros(1, 2048, dtype=torch.long))
    mask = seen["mask"]
    assert mask.dtype == torch.bfloat16  # built once in the compute dtype: no layer casts it again
    exact = alibi_bias(alibi_slopes(12), torch.arange(2048), torch.arange(2048)).float()
    allowed = torch.ones(2048, 2048, dtype=torch.bool).tril()
    assert torch.equal(mask[0][:, allowed], exact.to(torch.bfloat16)[:, allowed])
    assert torch.isinf(mask[0][:, ~allowed]).all()


def test_a_gpt_with_alibi_warns_when_its_head_width_rules_out_the_fused_masked_kernels():
    from lit_attention.modeling import masks
    from lit_attention.modeling.gpt import GPT, GPTConfig

    masks.WARNED_HEAD_WIDTHS.clear()
    with pytest.warns(UserWarning, match="GPT with position alibi: head width 4"):
        GPT(GPTConfig(vocab_size=16, max_len=8, dim=12, depth=1, num_heads=3, position="alibi"))
