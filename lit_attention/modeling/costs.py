"""What a variant costs in one self-attention layer: its parameters and forward FLOPs, counted on the
layer itself built on the meta device (no memory, no initialisation), so the numbers follow the math in
attention.py instead of a formula kept beside it. The registry's tables and the benchmarks read them."""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from lit_attention.modeling.attention import MultiHeadAttention, count_attention_parameters
from lit_attention.modeling.variants import AttentionSpec, Variant, resolve_spec


def _layer_on_meta(
    variant, dim: int, num_heads: int, max_len: int | None, query_hidden: int | None, bias: bool = False
) -> MultiHeadAttention:
    """One self-attention layer built on the meta device: its shapes without memory or initialisation."""
    spec = resolve_spec(variant)
    if query_hidden is not None:
        spec = replace(spec, query_hidden=query_hidden)
    with torch.device("meta"):
        return MultiHeadAttention(dim, num_heads, spec, max_len=max_len, bias=bias)


def attention_parameters(
    variant: str | dict | AttentionSpec | Variant,
    dim: int,
    *,
    num_heads: int,
    max_len: int | None = None,
    query_hidden: int | None = None,
    bias: bool = False,
) -> int:
    """Parameters of one self-attention layer of `variant`, counted on the module itself;
    `max_len` (l) is required when the variant mixes values, `query_hidden` overrides the spec's r."""
    return count_attention_parameters(_layer_on_meta(variant, dim, num_heads, max_len, query_hidden, bias))


def attention_flops(
    variant: str | dict | AttentionSpec | Variant, seq_len: int, dim: int, *, num_heads: int, query_hidden: int | None = None
) -> int:
    """Forward FLOPs of one self-attention layer on one sequence (docs/DESIGN.md §2, cost model).

    2·T per weight of the layer's matrices (W_Q, W_K, W_V, W_O, the residual MLP query's W_1 and W_2:
    each a Linear applied at every position), 4·T²·d for the scores and the weighted sum, 2·T²·d for the
    W_A value mix. Biases and norms are left out.
    """
    layer = _layer_on_meta(variant, dim, num_heads, seq_len, query_hidden)
    t, d = seq_len, dim
    matrices = sum(m.weight.numel() for m in layer.modules() if isinstance(m, nn.Linear))
    return 2 * t * matrices + 4 * t * t * d + (2 * t * t * d if layer.spec.value_mix else 0)
