"""2-D axial RoPE over a ViT's patch grid, in the project's rotate-half convention (positions.py).

A head's d_h columns are two halves, column c paired with c + d_h/2 (positions.py). Axial RoPE gives the
first d_h/4 pairs the patch's column and the other d_h/4 its row, each axis with the 1-D frequencies of a
head half as wide, θ_c = base^(-4c/d_h), c < d_h/4:

    angles(row, col) = (col θ_0, ..., col θ_{d_h/4-1}, row θ_0, ..., row θ_{d_h/4-1})

so the score of two patches depends on their column offset and row offset only. This is the frequency
layout of RoPE-ViT's axial variant (arXiv 2403.13298; timm's `vit_*_patch16_rope_224`, "xy" grid order,
whose `rope_temperature` is our base); timm pairs neighbouring columns (2c, 2c + 1) instead, which a port
maps to ours by permuting each head's query and key columns (ports.py). Prefix tokens (the class token)
are not rotated: cos 1, sin 0.
"""

from __future__ import annotations

import torch

from lit_attention.modeling.positions import check_axial_width, rotary_tables


def axial_rotary_tables(
    grid: int,
    head_dim: int,
    base: float = 10000.0,
    prefix_tokens: int = 0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each (prefix_tokens + grid², d_h), for a square grid of patches in row-major order
    (the order of a strided convolution's flattened output) after `prefix_tokens` unrotated tokens."""
    check_axial_width(head_dim)
    patches = torch.arange(grid * grid, device=device)
    quarter = head_dim // 4
    # Each axis's 1-D table for a head of d_h/2 columns holds cos(p θ_c) for c < d_h/4, twice.
    cos_col, sin_col = rotary_tables(patches % grid, head_dim // 2, base, dtype)
    cos_row, sin_row = rotary_tables(patches // grid, head_dim // 2, base, dtype)
    tables = []
    for column, row, empty in ((cos_col, cos_row, 1.0), (sin_col, sin_row, 0.0)):
        half = torch.cat((column[:, :quarter], row[:, :quarter]), dim=-1)
        table = torch.cat((half, half), dim=-1)
        prefix = table.new_full((prefix_tokens, head_dim), empty)
        tables.append(torch.cat((prefix, table), dim=0))
    return tables[0], tables[1]
