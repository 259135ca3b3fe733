"""Properties of every attention variant: the bugs public code has, tested for each preset."""

import itertools
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lit_attention.modeling.attention import (
    PRESETS,
    AttentionSpec,
    MultiHeadAttention,
    count_attention_parameters,
    list_presets,
    resolve_spec,
)
from lit_attention.modeling.variants import MONOMIALS, parameter_terms

DIM, HEADS, MAX_LEN = 32, 4, 12
# Presets plus combinations no preset covers: super values with a nonlinear query, mixing on linear values.
VARIANTS = list_presets() + [
    "query=residual_mlp,key=identity,value=identity,value_mix=true",
    {"query": "identity", "key": "linear", "value": "linear", "value_mix": True},
    AttentionSpec(query="residual", key="identity", value="linear"),
]
VARIANT_IDS = [resolve_spec(v).name for v in VARIANTS]


def make_attention(variant, causal=False, dtype=torch.float64, **kwargs):
    """A module with every parameter randomised, W_A included: an identity W_A would hide mask bugs."""
    torch.manual_seed(0)
    spec = replace(resolve_spec(variant), value_mix_init="normal")
    mha = MultiHeadAttention(DIM, HEADS, spec, max_len=MAX_LEN, causal=causal, **kwargs)
    with torch.no_grad():
        for p in mha.parameters():
            p.copy_(torch.randn_like(p) * 0.3 + (1.0 if p.dim() == 1 else 0.0))
    return mha.to(dtype)


def right_padding(batch=3, length=10):
    """Bool (B, T), True at padding; one row unpadded, others with different real lengths."""
    lengths = torch.tensor([length, 6, 3])[:batch]
    return torch.arange(length)[None, :] >= lengths[:, None]


def left_padding(batch=3, length=10):
    return right_padding(batch, length).flip(-1)


def textbook_attention(mha: MultiHeadAttention, x, padding=None, memory=None, memory_padding=None):
    """docs/DESIGN.md §2 written out head by head, query by query, with loops; valid at real positions."""
    d, h, spec = mha.dim, mha.num_heads, mha.spec
    dh = d // h
    source = x if memory is None else memory
    kv_padding = memory_padding if memory is not None else padding
    weights = {}
    if mha.in_proj is not None:
        weights.update(zip(mha._from_x, mha.in_proj.weight.split(d, 0)))
    if mha.memory_proj is not None:
        weights.update(zip(mha._from_memory, mha.memory_proj.weight.split(d, 0)))
    queries = {
        "linear": lambda: x @ weights["q"].T,
        "identity": lambda: x,
        "residual": lambda: x + x @ weights["q"].T,
        "residual_mlp": lambda: x + mha.query_mlp(x),
    }
    q = queries[spec.query]()
    k = source @ weights["k"].T if spec.key == "linear" else source
    v = source @ weights["v"].T if spec.value == "linear" else source
    batch, t_q, t_k = x.shape[0], x.shape[1], source.shape[1]
    out = torch.zeros(batch, t_q, d, dtype=x.dtype)
    for b in range(batch):
        pad = kv_padding[b] if kv_padding is not None else torch.zeros(t_k, dtype=torch.bool)
        v_b = v[b]
        if spec.value_mix:
            a = mha.value_mix[:t_k, :t_k].clone()
            for i, j in itertools.product(range(t_k), range(t_k)):
                if (mha.causal and j > i) or pad[j]:
                    a[i, j] = 0.0
            v_b = a @ v_b
        for head in range(h):
            cols = slice(head * dh, (head + 1) * dh)
            for t in range(t_q):
                allowed = [s for s in range(t_k) if not pad[s] and not (mha.causal and s > t)]
                if not allowed:  # a padded query with no visible key: undefined, never compared
                    continue
                scores = torch.stack([q[b, t, cols] @ k[b, s, cols] for s in allowed]) * mha.scale
                probs = torch.exp(scores - scores.max())
                probs = probs / probs.sum()
                out[b, t, cols] = sum(p * v_b[s, cols] for p, s in zip(probs, allowed))
    return out @ mha.out_proj.weight.T


def real_positions(padding):
    return ~padding[..., None]


# ---------------------------------------------------------------- exact math


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_matches_textbook_formula(variant, causal):
    mha = make_attention(variant, causal)
    x = torch.randn(3, 10, DIM, dtype=torch.float64)
    padding = right_padding() if not causal else left_padding()
    for fused in (True, False):
        mha.fused = fused
        y = mha(x, key_padding_mask=padding)
        expected = textbook_attention(mha, x, padding)
        keep = real_positions(padding)
        torch.testing.assert_close(y * keep, expected * keep, rtol=1e-9, atol=1e-9)


def test_standard_matches_torch_multihead_attention():
    """The softmax runs over keys: same numbers as torch's own module with the same weights."""
    mha = make_attention("standard", causal=True, dtype=torch.float32)
    ref = nn.MultiheadAttention(DIM, HEADS, bias=False, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(mha.in_proj.weight)
        ref.out_proj.weight.copy_(mha.out_proj.weight)
    x = torch.randn(3, 10, DIM)
    padding = right_padding()
    causal_mask = torch.ones(10, 10, dtype=torch.bool).triu(1)
    expected, _ = ref(x, x, x, key_padding_mask=padding, attn_mask=causal_mask, need_weights=False)
    y = mha(x, key_padding_mask=padding)
    keep = real_positions(padding)
    torch.testing.assert_close(y * keep, expected * keep, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- fused == reference


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_fused_equals_reference_forward_and_gradients(variant, causal, padded, dtype):
    mha = make_attention(variant, causal, dtype=dtype)
    x = torch.randn(3, 10, DIM, dtype=dtype)
    padding = (left_padding() if causal else right_padding()) if padded else None
    upstream = torch.randn(3, 10, DIM, dtype=dtype)
    results = []
    for fused in (True, False):
        mha.fused = fused
        mha.zero_grad()
        xi = x.clone().requires_grad_(True)
        y = mha(xi, key_padding_mask=padding)
        (y * upstream).sum().backward()
        grads = {n: p.grad.clone() for n, p in mha.named_parameters()}
        results.append((y.detach(), xi.grad, grads))
    tol = dict(rtol=1e-9, atol=1e-9) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-4)
    (y_f, gx_f, gp_f), (y_r, gx_r, gp_r) = results
    assert torch.isfinite(y_f).all() and torch.isfinite(gx_f).all()
    torch.testing.assert_close(y_f, y_r, **tol)
    torch.testing.assert_close(gx_f, gx_r, **tol)
    assert gp_f.keys() == gp_r.keys()
    for name in gp_f:
        torch.testing.assert_close(gp_f[name], gp_r[name], **tol, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_cross_attention_fused_equals_reference_and_textbook(variant, padded):
    mha = make_attention(variant, cross_attention=True)
    x = torch.randn(3, 7, DIM, dtype=torch.float64)
    memory = torch.randn(3, 10, DIM, dtype=torch.float64)
    memory_padding = right_padding() if padded else None
    outputs = []
    for fused in (True, False):
        mha.fused = fused
        outputs.append(mha(x, memory=memory, memory_padding_mask=memory_padding))
    torch.testing.assert_close(outputs[0], outputs[1], rtol=1e-9, atol=1e-9)
    expected = textbook_attention(mha, x, memory=memory, memory_padding=memory_padding)
    torch.testing.assert_close(outputs[0], expected, rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------- causality and padding


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "reference"])
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_causal_outputs_ignore_the_future(variant, fused):
    mha = make_attention(variant, causal=True)
    mha.fused = fused
    x = torch.randn(2, MAX_LEN, DIM, dtype=torch.float64)
    y = mha(x)
    for t in (0, 4, MAX_LEN - 2):
        changed = x.clone()
        changed[:, t + 1 :] = torch.randn_like(changed[:, t + 1 :]) * 5
        y_changed = mha(changed)
        torch.testing.assert_close(y_changed[:, : t + 1], y[:, : t + 1], rtol=0, atol=1e-12)
        assert not torch.allclose(y_changed[:, t + 1 :], y[:, t + 1 :])  # the future did change


def test_causal_value_mix_gets_no_gradient_above_the_diagonal():
    mha = make_attention("super", causal=True)
    mha(torch.randn(2, MAX_LEN, DIM, dtype=torch.float64)).sum().backward()
    grad = mha.value_mix.grad
    assert torch.count_nonzero(grad.triu(1)) == 0
    assert torch.count_nonzero(grad.tril()) > 0


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "reference"])
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_padding_content_never_reaches_real_positions(variant, fused, causal):
    mha = make_attention(variant, causal=causal)
    mha.fused = fused
    for padding in (right_padding(), left_padding()):
        x = torch.randn(3, 10, DIM, dtype=torch.float64)
        garbage = x.masked_fill(padding[..., None], 0.0) + torch.randn_like(x) * 10 * padding[..., None]
        y, y_garbage = mha(x, key_padding_mask=padding), mha(garbage, key_padding_mask=padding)
        keep = real_positions(padding)
        assert torch.isfinite(y_garbage).all()
        torch.testing.assert_close(y_garbage * keep, y * keep, rtol=0, atol=1e-12)


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_cross_attention_ignores_padded_memory(variant):
    mha = make_attention(variant, cross_attention=True)
    x = torch.randn(3, 5, DIM, dtype=torch.float64)
    memory = torch.randn(3, 10, DIM, dtype=torch.float64)
    padding = right_padding()
    changed = memory + torch.randn_like(memory) * 10 * padding[..., None]
    y = mha(x, memory=memory, memory_padding_mask=padding)
    torch.testing.assert_close(mha(x, memory=changed, memory_padding_mask=padding), y, rtol=0, atol=1e-12)


# ---------------------------------------------------------------- sizes, parameters, errors


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_attention_parameter_counts_match_the_registrys_formula(variant):
    """Each option declares its parameters in the registry (what the docs' tables print); the module
    must build exactly those, and count_attention_parameters must find only the attention's."""
    terms = parameter_terms(resolve_spec(variant))
    for d, heads, length in ((64, 4, 16), (96, 8, 50)):
        expected = sum(n * MONOMIALS[m](d, heads, length) for m, n in terms.items())
        mha = MultiHeadAttention(d, heads, variant, max_len=length)
        assert count_attention_parameters(mha) == expected
        assert count_attention_parameters(nn.Sequential(mha, nn.Linear(d, d))) == expected


def test_super_uses_top_left_block_for_shorter_sequences():
    mha = make_attention("super")
    x = torch.randn(2, MAX_LEN, DIM, dtype=torch.float64)
    short = x[:, :5]
    expected = textbook_attention(mha, short)
    torch.testing.assert_close(mha(short), expected, rtol=1e-9, atol=1e-9)


def test_super_rejects_sequences_longer_than_max_len():
    mha = make_attention("super")
    with pytest.raises(ValueError, match=f"Sequence length {MAX_LEN + 1} exceeds max_len={MAX_LEN}"):
        mha(torch.randn(1, MAX_LEN + 1, DIM, dtype=torch.float64))


def test_super_starts_as_efficient_by_default():
    torch.manual_seed(1)
    sup = MultiHeadAttention(DIM, HEADS, "super", max_len=MAX_LEN)
    eff = MultiHeadAttention(DIM, HEADS, "efficient")
    eff.load_state_dict({k: v for k, v in sup.state_dict().items() if k != "value_mix"})
    x = torch.randn(2, MAX_LEN, DIM)
    torch.testing.assert_close(sup(x), eff(x))


def test_identity_axes_are_views_of_the_input():
    mha = MultiHeadAttention(DIM, HEADS, "query=identity,key=identity,value=identity")
    x = torch.randn(2, 6, DIM)
    q, k, v = mha._project(x, None)
    for t in (q, k, v, mha._split_heads(k)):
        assert t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_kept_matrices_share_one_fused_projection():
    for name, spec in PRESETS.items():
        mha = MultiHeadAttention(DIM, HEADS, name, max_len=MAX_LEN)
        linears = [m for m in mha.modules() if isinstance(m, nn.Linear) and m is not mha.out_proj]
        kept = (spec.query in ("linear", "residual")) + (spec.key == "linear") + (spec.value == "linear")
        if mha.query_mlp is not None:
            linears = [m for m in linears if m not in (mha.query_mlp.up, mha.query_mlp.down)]
        assert len(linears) == (1 if kept else 0), name
        if kept:
            assert linears[0].out_features == kept * DIM


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_every_variant_runs_through_scaled_dot_product_attention(variant, causal, monkeypatch):
    calls = []
    real_sdpa = F.scaled_dot_product_attention

    def counting_sdpa(*args, **kwargs):
        calls.append(args[0].shape)
        return real_sdpa(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counting_sdpa)
    mha = MultiHeadAttention(DIM, HEADS, variant, max_len=MAX_LEN, causal=causal)
    mha(torch.randn(2, 8, DIM))
    mha(torch.randn(2, 8, DIM), key_padding_mask=right_padding(2, 8))
    assert calls == [(2, HEADS, 8, DIM // HEADS)] * 2  # once per forward, all heads at once


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: MultiHeadAttention(DIM, HEADS, "superb"),
            "Unknown attention variant 'superb'; valid presets are standard, optimized",
        ),
        (
            lambda: MultiHeadAttention(DIM, HEADS, "query=quadratic"),
            "Unknown query option 'quadratic'; valid query options are linear, identity, residual, residual_mlp",
        ),
        (
            lambda: MultiHeadAttention(DIM, HEADS, {"key": "mlp"}),
            "Unknown key option 'mlp'; valid key options are linear, identity",
        ),
        (
            lambda: MultiHeadAttention(DIM, HEADS, {"values": "identity"}),
            "Unknown attention axis 'values'; valid axes are query, key, value, value_mix",
        ),
        (lambda: MultiHeadAttention(DIM, HEADS, {"preset": "super", "key": "linear"}), "changes an axis of preset 'super'"),
        (lambda: MultiHeadAttention(DIM, HEADS, "value_mix=maybe"), "value_mix must be true or false, got 'maybe'"),
        (lambda: MultiHeadAttention(30, 4), "dim=30 is not divisible by num_heads=4"),
        (lambda: MultiHeadAttention(DIM, HEADS, "super"), "max_len=None is invalid: variant 'super' mixes values with W_A"),
        (
            lambda: MultiHeadAttention(DIM, HEADS, "super,value_mix_init=zeros", max_len=8),
            "Unknown value_mix_init option 'zeros'; valid value_mix_init options are identity, xavier, orthogonal, normal",
        ),
        (
            lambda: MultiHeadAttention(DIM, HEADS, "query=residual_mlp,key"),
            "Malformed attention spec 'query=residual_mlp,key': 'key' is not an axis=option pair",
        ),
        (
            lambda: MultiHeadAttention(DIM, HEADS, "super,value_mix_init=xavier,value_mix_init=normal", max_len=8),
            "sets value_mix_init twice (value_mix_init=xavier and value_mix_init=normal)",
        ),
        (
            lambda: MultiHeadAttention(DIM, HEADS, "standard,query_scale=third"),
            "Unknown query_scale option 'third'; valid query_scale options are standard, half",
        ),
        (
            lambda: MultiHeadAttention(DIM, HEADS, "nonlinear_query,query_hidden=0"),
            "query_hidden=0 is invalid; give a positive width r",
        ),
        (lambda: MultiHeadAttention(DIM, HEADS, causal=True, cross_attention=True), "causal=True is for self-attention"),
    ],
)
def test_bad_configuration_raises_one_clear_sentence(make, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_memory_must_match_cross_attention_flag():
    mha = MultiHeadAttention(DIM, HEADS)
    with pytest.raises(ValueError, match="memory must be given exactly when"):
        mha(torch.randn(1, 4, DIM), memory=torch.randn(1, 4, DIM))


def test_dropout_is_active_only_in_training():
    mha = MultiHeadAttention(DIM, HEADS, dropout=0.5)
    x = torch.randn(2, 8, DIM)
    mha.eval()
    torch.testing.assert_close(mha(x), mha(x))
    mha.train()
    assert not torch.allclose(mha(x), mha(x))


# The nonlinear-query authors' released configs scale every non-linear query's scores by
# 1/(2 sqrt(d_h)) (their Q = (X + f(X)) / 2); only the original linear W_Q keeps 1/sqrt(d_h).
@pytest.mark.parametrize(
    "variant, factor",
    [
        ("standard", 1.0),
        ("optimized", 1.0),
        ("efficient", 1.0),
        ("super", 1.0),
        ("identity_query", 0.5),
        ("residual_query", 0.5),
        ("nonlinear_query", 0.5),
        ("identity_query,query_scale=standard", 1.0),
        ("standard,query_scale=half", 0.5),
        ("query=residual_mlp,key=identity,value=identity,value_mix=true", 0.5),
    ],
)
def test_query_scale_of_each_preset(variant, factor):
    mha = MultiHeadAttention(DIM, HEADS, variant, max_len=MAX_LEN)
    assert mha.scale == pytest.approx(factor / (DIM // HEADS) ** 0.5)
    # The scale is what the fused path uses: doubling it by hand reproduces the standard-scale output.
    torch.manual_seed(0)
    x = torch.randn(2, 6, DIM, dtype=torch.float64)
    mha = mha.double()
    expected = textbook_attention(mha, x)
    torch.testing.assert_close(mha(x), expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    "variant",
    [
        "identity_query,query_scale=standard",
        "super,value_mix_init=xavier",
        "nonlinear_query,query_hidden=8",
        "query=linear,key=identity,value=linear,value_mix=false,query_scale=half",
    ],
)
def test_spec_names_round_trip(variant):
    spec = resolve_spec(variant)
    assert spec.name == variant and resolve_spec(spec.name) == spec


def test_value_mix_inits():
    length = 16
    torch.manual_seed(0)
    weights = {
        init: MultiHeadAttention(DIM, HEADS, f"super,value_mix_init={init}", max_len=length).value_mix.detach()
        for init in ("identity", "xavier", "orthogonal", "normal")
    }
    torch.testing.assert_close(weights["identity"], torch.eye(length))
    bound = (6 / (2 * length)) ** 0.5
    assert weights["xavier"].abs().max() <= bound and weights["xavier"].std() > bound / 3
    torch.testing.assert_close(weights["orthogonal"] @ weights["orthogonal"].T, torch.eye(length), atol=1e-5, rtol=0)
    assert abs(weights["normal"].std().item() - length**-0.5) < 0.05


def test_query_hidden_sets_the_query_mlp_width():
    mha = MultiHeadAttention(DIM, HEADS, "nonlinear_query,query_hidden=8")
    assert mha.query_mlp.up.out_features == 8 and mha.query_mlp.down.in_features == 8
    assert mha.query_mlp.norm_in.eps == 1e-5  # the authors' RMSNorm eps
