"""Multi-head attention with every variant of docs/DESIGN.md §2 in one module.

Notation: input X is (B, T, d), h heads of width d_h = d / h, X_i the i-th slice of d_h columns.
Each variant is a point on three axes plus one flag:

    query      linear        Q_i = X W_Q,i
               identity      Q_i = X_i
               residual      Q   = X + X W_Q
               residual_mlp  Q   = X + LN(GELU(RMSNorm(X) W_1) W_2), W_1: d->r, W_2: r->d,
                             scores scaled by 1 / (2 sqrt(d_h)), i.e. the paper's (X + f(X)) / 2
    key        linear        K_i = X W_K,i
               identity      K_i = X_i
    value      linear        V_i = X W_V,i
               identity      V_i = X_i
    value_mix  on            V_i <- W_A V_i, W_A (l x l) mixes positions, one per layer, all heads

    Y = concat_i softmax(s Q_i K_i^T + mask) V_i  W_O        (softmax over the *key* axis)

Three options shape every variant alike (docs/DESIGN.md §2, "Modern options"):
  * kv_heads g (a setting of the spec): W_K and W_V make g heads, query head i reads key/value head
    i // (h / g) (grouped-query attention; g = 1 is multi-query); it needs linear keys and values;
  * qk_norm: RMSNorm over each head's Q_i and K_i (d_h wide), before the rotation;
  * positions (positions.py): `rotary` rotates whatever Q_i and K_i the variant makes; `alibi` adds its
    bias to the scores. Neither touches the values, so W_A mixes values as before.

Masking rules for W_A (the ones published code gets wrong):
  * causal: W_A is used lower-triangular, so V_t only mixes positions <= t;
  * padding: the columns of W_A at padded positions are zeroed, so padding never leaks in;
  * T < l uses the top-left T x T block; T > l is an error.

Two paths compute the same thing: the fused one (one input projection, views for identity axes,
`F.scaled_dot_product_attention`) used for training, and a plain-math reference path (explicit
scores, explicit masks, explicit softmax) kept so tests can prove the fused one right.

A third, for decoding, takes a `KVCache` (`forward(x, cache=...)`): it computes only the new
positions and keeps what later positions need (cached_attention.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from lit_attention.modeling.variants import (  # noqa: F401  (re-exported: the spec is part of this module's API)
    PRESETS,
    REGISTRY,
    AttentionSpec,
    list_presets,
    resolve_spec,
)
from lit_attention.errors import ConfigError
from lit_attention.modeling.cached_attention import CachedDecoding
from lit_attention.modeling.kv_cache import KVCache
from lit_attention.modeling.masks import attention_mask, biased_mask
from lit_attention.modeling.positions import alibi_bias, alibi_exponents, alibi_slopes_from, apply_rotary, check_rotary_width


class QueryMLP(nn.Module):
    """f(X) = LN(GELU(RMSNorm(X) W_1) W_2): the nonlinear part of the residual query, no biases."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.norm_in = nn.RMSNorm(dim, eps=1e-5)  # the authors' eps (torch's default is the dtype's epsilon)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        self.norm_out = nn.LayerNorm(dim, bias=False)  # weight-only LN

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm_out(self.down(F.gelu(self.up(self.norm_in(x)))))


def value_mix_init(kind: str, length: int) -> torch.Tensor:
    """A fresh (length, length) W_A initialised as `kind` (see AttentionSpec.value_mix_init)."""
    weight = torch.empty(length, length)
    if kind == "identity":
        return nn.init.eye_(weight)
    if kind == "xavier":
        return nn.init.xavier_uniform_(weight)
    if kind == "orthogonal":
        return nn.init.orthogonal_(weight)
    return nn.init.normal_(weight, std=1.0 / math.sqrt(length))


class MultiHeadAttention(CachedDecoding, nn.Module):
    """Self- or cross-attention for every preset and every combination of the axes.

    Args:
        dim: model width d; must divide by `num_heads`.
        num_heads: h.
        variant: preset name (see `list_presets()`), `axis=option,...` string, dict or AttentionSpec.
        max_len: l, the size of W_A; required when the variant mixes values. For cross-attention it
            is the memory (source) length.
        causal: mask future keys (self-attention only).
        bias: biases on the projections.
        dropout: dropout on attention weights and on the output.
        cross_attention: keys and values come from `memory` passed to `forward`.
        fused: use `F.scaled_dot_product_attention`; False selects the plain-math reference path.
        qk_norm: RMSNorm (weight only, eps `norm_eps`) over each head's queries and keys.
        alibi: add ALiBi's bias to the scores (self-attention only).
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        variant: str | dict | AttentionSpec = "standard",
        max_len: int | None = None,
        causal: bool = False,
        bias: bool = False,
        dropout: float = 0.0,
        cross_attention: bool = False,
        fused: bool = True,
        qk_norm: bool = False,
        norm_eps: float = 1e-5,
        alibi: bool = False,
    ) -> None:
        super().__init__()
        self.spec = resolve_spec(variant)
        if num_heads < 1 or dim % num_heads != 0:
            raise ConfigError(f"dim={dim} is not divisible by num_heads={num_heads}; choose num_heads among the divisors of dim.")
        if causal and cross_attention:
            raise ConfigError("causal=True is for self-attention; cross-attention sees the whole memory.")
        if self.spec.value_mix and (max_len is None or max_len < 1):
            raise ConfigError(
                f"max_len={max_len} is invalid: variant {self.spec.name!r} mixes values with W_A "
                "and needs max_len, a positive sequence length."
            )
        if alibi and cross_attention:
            raise ConfigError(
                "alibi=True is for self-attention; queries and memory are different sequences, "
                "so cross-attention has no distance to penalise."
            )
        self.dim, self.num_heads, self.head_dim = dim, num_heads, dim // num_heads
        self.kv_heads = check_kv_heads(self.spec, num_heads)
        self.kv_dim = self.kv_heads * self.head_dim  # the width of K and V (dim unless grouped)
        self.max_len, self.causal, self.cross_attention = max_len, causal, cross_attention
        self.dropout = dropout
        self.fused = fused
        # Set by tools that draw attention maps: the reference path then keeps its weights here.
        self.record_weights = False
        self.recorded_weights: torch.Tensor | None = None

        # Which of W_Q, W_K, W_V exist, and which input each one reads.
        wants_q = self.spec.query in ("linear", "residual")
        wants_k = self.spec.key == "linear"
        wants_v = self.spec.value == "linear"
        from_x = [n for n, keep in (("q", wants_q), ("k", wants_k), ("v", wants_v)) if keep and (n == "q" or not cross_attention)]
        from_memory = [n for n, keep in (("k", wants_k), ("v", wants_v)) if keep and cross_attention]
        self._from_x, self._from_memory = tuple(from_x), tuple(from_memory)
        # One fused projection for the kept matrices that read x (never one Linear per head).
        width = {"q": dim, "k": self.kv_dim, "v": self.kv_dim}
        self._x_widths, self._memory_widths = [width[n] for n in from_x], [width[n] for n in from_memory]
        self.in_proj = nn.Linear(dim, sum(self._x_widths), bias=bias) if from_x else None
        self.memory_proj = nn.Linear(dim, sum(self._memory_widths), bias=bias) if from_memory else None
        self.query_mlp = QueryMLP(dim, self.spec.query_hidden or dim // 2) if self.spec.query == "residual_mlp" else None
        self.out_proj = nn.Linear(dim, dim, bias=bias)  # W_O is kept in every variant

        if self.spec.value_mix:
            self.value_mix = nn.Parameter(value_mix_init(self.spec.value_mix_init, max_len))
        else:
            self.register_parameter("value_mix", None)
        self.q_norm = nn.RMSNorm(self.head_dim, eps=norm_eps) if qk_norm else None
        self.k_norm = nn.RMSNorm(self.head_dim, eps=norm_eps) if qk_norm else None
        self.alibi = alibi
        if alibi:  # not saved: the slopes follow from num_heads. Integers: a precision plugin casts floating
            # buffers (FSDP's bf16 mixed precision does), which would round the slopes and so every bias.
            numerators, self.alibi_denominator = alibi_exponents(num_heads)
            self.register_buffer("alibi_numerators", torch.tensor(numerators), persistent=False)

        # `half` is the nonlinear-query paper's Q = (X + f(X)) / 2, folded into the softmax scale.
        self.scale = 1.0 / math.sqrt(self.head_dim)
        if self.spec.query_scale == "half":
            self.scale /= 2.0

    # ------------------------------------------------------------------ projections

    def _project(self, x: torch.Tensor, memory: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return Q, K, V as (B, T, d) tensors; identity axes are the inputs themselves (no copy)."""
        source = x if memory is None else memory
        parts = self._project_input(x)
        if self.memory_proj is not None:
            parts.update(zip(self._from_memory, self.memory_proj(source).split(self._memory_widths, dim=-1)))
        return self._query(x, parts), parts.get("k", source), parts.get("v", source)

    def _project_input(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """The projections of `x` this variant keeps, by name (q, k, v), from the one fused matmul."""
        if self.in_proj is None:
            return {}
        return dict(zip(self._from_x, self.in_proj(x).split(self._x_widths, dim=-1)))

    def _query(self, x: torch.Tensor, parts: dict[str, torch.Tensor]) -> torch.Tensor:
        query = self.spec.query
        if query == "linear":
            return parts["q"]
        if query == "identity":
            return x
        if query == "residual":
            return x + parts["q"]
        return x + self.query_mlp(x)  # residual_mlp

    def _split_heads(self, t: torch.Tensor) -> torch.Tensor:
        """(B, T, n·d_h) -> (B, n, T, d_h) as a view: head i is the i-th slice of d_h columns (n = h for
        queries, kv_heads for grouped keys and values)."""
        b, n, width = t.shape
        return t.view(b, n, width // self.head_dim, self.head_dim).transpose(1, 2)

    @property
    def alibi_slopes(self) -> torch.Tensor:
        """ALiBi's slopes m_1..m_h in float32, on this layer's device."""
        return alibi_slopes_from(self.alibi_numerators, self.alibi_denominator)

    def _shape(self, t: torch.Tensor, norm: nn.Module | None, rotary) -> torch.Tensor:
        """Heads (B, n, T, d_h) of a query or key: RMSNorm'd with qk_norm, then rotated with `rotary`."""
        if norm is not None:
            t = norm(t)
        return t if rotary is None else apply_rotary(t, rotary)

    def _scores_mask(
        self, t_q: int, t_k: int, kv_padding: torch.Tensor | None, mask: torch.Tensor | None, device: torch.device
    ) -> torch.Tensor | None:
        """The mask this forward attends under: the model's (or one built from the padding), with ALiBi's
        bias added as floats when this layer has it and the model did not add it already."""
        if mask is None and kv_padding is not None:
            mask = self._allowed(t_q, t_k, kv_padding, device)
        if not self.alibi or (mask is not None and mask.is_floating_point()):
            return mask
        if mask is None and self.causal:
            mask = self._allowed(t_q, t_k, None, device)
        return biased_mask(
            mask, alibi_bias(self.alibi_slopes, torch.arange(t_q, device=device), torch.arange(t_k, device=device))
        )

    def _value_mix_block(self, length: int) -> torch.Tensor:
        """Top-left length x length block of W_A, lower-triangular when causal."""
        if length > self.max_len:
            raise ConfigError(
                f"Sequence length {length} exceeds max_len={self.max_len} of W_A; "
                f"use sequences of at most {self.max_len} positions or build the model with a larger max_len."
            )
        block = self.value_mix[:length, :length]
        return torch.tril(block) if self.causal else block

    def _allowed(self, t_q: int, t_k: int, key_padding_mask: torch.Tensor | None, device: torch.device) -> torch.Tensor | None:
        """This layer's boolean mask (see `attention_mask`)."""
        return attention_mask(t_q, t_k, key_padding_mask, self.causal, self.cross_attention, device)

    # ------------------------------------------------------------------ forward

    def forward(
        self,
        x: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        memory: torch.Tensor | None = None,
        memory_padding_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        mask: torch.Tensor | None = None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attend from `x` (B, T, d) to itself, or to `memory` (B, S, d) for cross-attention.

        `key_padding_mask` / `memory_padding_mask`: bool (B, T) / (B, S), True marks padding
        (the torch.nn.MultiheadAttention convention).
        `mask`: this layer's `attention_mask` of that padding, when the model built it once for all
        its layers; built here from the padding otherwise.
        `cache`: decode incrementally (see `KVCache`); `x` then holds only the new positions, and the
        padding and memory live in the cache. This path always uses SDPA (`fused` selects between the
        two uncached paths); tests compare it with the uncached forward.
        `mask` may be a float mask (ALiBi's bias added, -inf where not allowed; see `biased_mask`).
        `rotary`: (cos, sin) of `positions.rotary_tables` for the positions of `x` (the new ones with a
        cache), rotating queries and keys; self-attention only.
        `bias`: with a cache, the scores' bias of the new positions against every cached one (a model's
        AttentionInputs.bias); without one, a layer built with `alibi` adds ALiBi's itself.
        """
        if rotary is not None:
            if self.cross_attention:
                raise ConfigError(
                    "rotary is for self-attention; cross-attention's queries and memory are "
                    "different sequences and are not rotated."
                )
            check_rotary_width(self.head_dim)
        if cache is not None:
            return self._forward_cached(x, cache, rotary, bias)
        if self.cross_attention != (memory is not None):
            raise ConfigError("memory must be given exactly when the module was built with cross_attention=True.")
        kv_padding = memory_padding_mask if self.cross_attention else key_padding_mask
        q, k, v = self._project(x, memory)
        if self.value_mix is not None:
            w = self._value_mix_block(v.shape[1])
            v = self._fused_value_mix(w, v, kv_padding) if self.fused else self._reference_value_mix(w, v, kv_padding)
        q = self._shape(self._split_heads(q), self.q_norm, rotary)
        k = self._shape(self._split_heads(k), self.k_norm, rotary)
        v = self._split_heads(v)
        mask = self._scores_mask(q.shape[-2], k.shape[-2], kv_padding, mask, q.device)
        attend = self._fused_attention if self.fused else self._reference_attention
        y = attend(q, k, v, mask)
        y = y.transpose(1, 2).reshape(x.shape[0], x.shape[1], self.dim)
        return F.dropout(self.out_proj(y), self.dropout, self.training)

    @staticmethod
    def _fused_value_mix(w: torch.Tensor, v: torch.Tensor, kv_padding: torch.Tensor | None) -> torch.Tensor:
        # Zeroing padded rows of V is zeroing padded columns of W_A, without a (B, T, T) copy.
        if kv_padding is not None:
            v = v.masked_fill(kv_padding[..., None], 0.0)
        # One GEMM for the whole batch and all heads: (T, T) @ (T, B*d), not B products
        # against a broadcast W_A whose backward would sum B (T, T) gradients.
        b, t, d = v.shape
        return (w @ v.transpose(0, 1).reshape(t, b * d)).view(t, b, d).transpose(0, 1)

    def _fused_attention(self, q, k, v, mask):
        """SDPA with `mask` (from the padding), or without one: `is_causal` covers causality alone."""
        dropout_p = self.dropout if self.training else 0.0
        gqa = k.shape[1] != q.shape[1]
        if mask is None and self.causal:
            if q.shape[-2] == k.shape[-2]:
                return F.scaled_dot_product_attention(
                    q, k, v, dropout_p=dropout_p, is_causal=True, scale=self.scale, enable_gqa=gqa
                )
            mask = self._allowed(q.shape[-2], k.shape[-2], None, q.device)
        if mask is not None and mask.is_floating_point():
            mask = mask.to(q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=self.scale, enable_gqa=gqa)

    # ------------------------------------------------------------------ reference path

    def _reference_value_mix(self, w: torch.Tensor, v: torch.Tensor, kv_padding: torch.Tensor | None) -> torch.Tensor:
        """V' = W_A V with W_A's padded columns zeroed, written as the math reads."""
        if kv_padding is not None:
            w = w[None] * (~kv_padding)[:, None, :].to(w.dtype)  # (B, T, T): column j zero if j is padding
        return w @ v

    def attention_weights(self, q, k, kv_padding=None, mask=None) -> torch.Tensor:
        """softmax(s Q K^T + mask) over the key axis, explicitly; (B, h, T_q, T_k). `mask` as in
        `forward`, else built from `kv_padding` (and causality, and ALiBi). Grouped keys (fewer heads
        than the queries) are repeated: query head i reads key head i // (h / kv_heads)."""
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        scores = (q @ k.transpose(-2, -1)) * self.scale
        allowed = mask if mask is not None else self._allowed(q.shape[-2], k.shape[-2], kv_padding, q.device)
        if self.alibi and (allowed is None or not allowed.is_floating_point()):
            allowed = self._scores_mask(q.shape[-2], k.shape[-2], None, allowed, q.device)
        if allowed is not None and allowed.is_floating_point():
            scores = scores + allowed.to(scores.dtype)
        elif allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        return scores.softmax(dim=-1)

    def _reference_attention(self, q, k, v, mask):
        weights = self.attention_weights(q, k, mask=mask)
        if self.record_weights:
            self.recorded_weights = weights.detach()
        weights = F.dropout(weights, self.dropout, self.training)
        return weights @ v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)

    def projection_weights(self) -> dict[str, torch.Tensor]:
        """The kept projection matrices W as applied to rows (X W, shape (d, d)), by name: `q`, `k`, `v`
        (those this variant keeps; `k` and `v` read the memory in cross-attention) and `o`. Head i's
        W_Q,i is columns i*d_h:(i+1)*d_h; head i's W_O,i is rows i*d_h:(i+1)*d_h. Biases are left out.
        With kv_heads g < h, `k` and `v` are (d, g·d_h): key/value head j serves query heads j·h/g..
        For tools that look at what a trained layer learned (lit_attention/analysis)."""
        found = {}
        if self.in_proj is not None:
            found.update(zip(self._from_x, self.in_proj.weight.split(self._x_widths, dim=0)))
        if self.memory_proj is not None:
            found.update(zip(self._from_memory, self.memory_proj.weight.split(self._memory_widths, dim=0)))
        found["o"] = self.out_proj.weight
        return {name: weight.detach().t() for name, weight in found.items()}

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, num_heads={self.num_heads}, variant={self.spec.name!r}, "
            f"max_len={self.max_len}, causal={self.causal}, cross_attention={self.cross_attention}"
            + (", alibi=True" if self.alibi else "")
        )


def check_kv_heads(spec: AttentionSpec, num_heads: int) -> int:
    """The key/value heads of `spec` with `num_heads` query heads, or one sentence why it has none."""
    kv_heads = spec.kv_heads or num_heads
    if num_heads % kv_heads:
        divisors = ", ".join(str(n) for n in range(1, num_heads + 1) if num_heads % n == 0)
        raise ConfigError(f"kv_heads={kv_heads} does not divide num_heads={num_heads}; choose kv_heads among {divisors}.")
    if kv_heads < num_heads and "identity" in (spec.key, spec.value):
        linear = ", ".join(name for name, s in PRESETS.items() if s.key == s.value == "linear")
        raise ConfigError(
            f"kv_heads={kv_heads} needs linear keys and values, but variant {spec.name!r} has an identity "
            f"{'key' if spec.key == 'identity' else 'value'} (a shared head of X_i is no slice of X); "
            f"use kv_heads with {linear}."
        )
    return kv_heads


def count_attention_parameters(module: nn.Module) -> int:
    """Number of parameters inside every MultiHeadAttention of `module` (the module itself included)."""
    return sum(p.numel() for m in module.modules() if isinstance(m, MultiHeadAttention) for p in m.parameters())
