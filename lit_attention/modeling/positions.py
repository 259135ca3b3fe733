"""Positions that live inside attention rather than in the embedding: rotary embeddings (RoPE) and ALiBi.

RoPE (arXiv 2104.09864) rotates each head's queries and keys by angles that grow with the position, so
the score of a query at m and a key at n depends on m - n only. One convention for the whole project,
that of Hugging Face's Llama: a head's d_h columns are two halves, column c paired with c + d_h/2, and

    rotary(x) = x * cos + rotate_half(x) * sin,   rotate_half(x) = cat(-x[..., d_h/2:], x[..., :d_h/2]),
    cos, sin  = cos(p θ), sin(p θ) repeated over both halves,  θ_c = base^(-2c/d_h), c < d_h/2.

A position whose cos is 1 and sin 0 is left as it is (the ViT's class token). The tables are computed once
per forward by the model and handed to every layer as `rotary = (cos, sin)`, of shape (T, d_h) when every
row has the same positions, or (B, 1, T, d_h) when they differ.

ALiBi (arXiv 2108.12409) adds -m_i |q - k| to head i's scores, m_i a fixed geometric sequence of slopes:
a bias on the scores, so it goes into the attention mask as floats (see attention.py).
"""

from __future__ import annotations

import math
import typing
from typing import Literal

import torch

from lit_attention.errors import ConfigError


# What `position` may be in each kind of stack: a family's config declares one of these as its field's type,
# so a new scheme added here reaches every family of that kind (and the tests that enumerate them). A
# bidirectional stack needs position information, so it has no `none`; a ViT's rope is 2-D axial.
CausalPosition = Literal["learned", "rope", "alibi", "none"]
OrderedPosition = Literal["learned", "rope", "alibi"]
GridPosition = Literal["learned", "rope"]


def check_position(config, model: str, causal: bool, axial: bool = False) -> None:
    """One sentence when `config.position` is no choice of `model` (its config's Literal; a bidirectional
    one needs position information) or RoPE meets a head width it cannot rotate (`axial`: a ViT's 2-D
    RoPE). A YAML or command-line `none` arrives as None: it is `none`."""
    if config.position is None:
        object.__setattr__(config, "position", "none")  # frozen: set once, as the dataclass would have
    choices = typing.get_args(typing.get_type_hints(type(config))["position"])
    position, dim, num_heads = config.position, config.dim, config.num_heads
    if position == "none" and not causal:
        raise ConfigError(
            f"position='none' is invalid for the {model}: without the causal mask of a decoder, "
            f"attention cannot tell the order of its tokens; choose {', '.join(choices)}."
        )
    if position not in choices:
        raise ConfigError(f"Unknown position {position!r}; valid choices are {', '.join(choices)}.")
    if position == "rope" and isinstance(dim, int) and isinstance(num_heads, int) and num_heads > 0 and dim % num_heads == 0:
        (check_axial_width if axial else check_rotary_width)(dim // num_heads)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) over the two halves of the last axis."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rotary(x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """x (..., T, d_h) rotated by `rotary` = (cos, sin), broadcastable to x."""
    cos, sin = rotary
    return x * cos.to(x.dtype) + rotate_half(x) * sin.to(x.dtype)


def check_rotary_width(head_dim: int) -> None:
    if head_dim % 2:
        raise ConfigError(
            f"position=rope needs an even head width, got d_h = dim / num_heads = {head_dim}; "
            "choose num_heads so that dim / num_heads is even."
        )


def check_axial_width(head_dim: int) -> None:
    if head_dim % 4:
        raise ConfigError(
            f"position=rope in a ViT needs a head width divisible by 4 (two axes, each rotating pairs), "
            f"got d_h = dim / num_heads = {head_dim}; choose dim and num_heads so that dim / num_heads "
            "is a multiple of 4."
        )


def rotary_tables(
    positions: torch.Tensor, head_dim: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) for integer `positions` (T,) -> each (T, d_h), or (B, T) -> each (B, 1, T, d_h).

    Computed in float32 (float64 if asked): the angles of late positions need the precision.
    """
    check_rotary_width(head_dim)
    work = torch.float64 if dtype == torch.float64 else torch.float32
    inv_freq = base ** (-torch.arange(0, head_dim, 2, device=positions.device, dtype=work) / head_dim)
    freqs = positions.to(work)[..., None] * inv_freq
    angles = torch.cat((freqs, freqs), dim=-1)
    if positions.dim() == 2:
        angles = angles[:, None]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def alibi_exponents(num_heads: int) -> tuple[list[int], int]:
    """(n_1..n_h, D) with the ALiBi slope m_i = 2^(-8 n_i / D): 2^(-8/h), 2^(-16/h), ... for h a power of 2;
    otherwise those of the largest power of 2 below h, then every other slope of twice that power (the
    ALiBi reference's rule). Whole numbers, so a layer keeps them where no precision cast reaches."""
    below = 2 ** math.floor(math.log2(num_heads))
    return [2 * (i + 1) for i in range(below)] + [2 * j + 1 for j in range(num_heads - below)], 2 * below


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """The ALiBi slopes m_1..m_h (alibi_exponents), in float64."""
    numerators, denominator = alibi_exponents(num_heads)
    return torch.tensor([2.0 ** (-8.0 * n / denominator) for n in numerators], dtype=torch.float64)


def alibi_slopes_from(numerators: torch.Tensor, denominator: int) -> torch.Tensor:
    """The slopes in float32 on the numerators' device (no copy from the host): alibi_exponents' formula."""
    return torch.exp2(numerators.to(torch.float32) * (-8.0 / denominator))


def alibi_bias(slopes: torch.Tensor, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
    """-m_i |q - k| for every head i: (h, T_q, T_k) for positions (T,), (B, h, T_q, T_k) for (B, T).

    Symmetric, so a bidirectional encoder penalises distance both ways; under a causal mask it is the
    paper's m_i (k - q) on every allowed key.
    """
    distance = (query_positions[..., :, None] - key_positions[..., None, :]).abs().to(slopes.dtype)
    return -slopes.view(-1, 1, 1) * distance[..., None, :, :]
