"""What every block of one stack is handed besides its hidden states, built in one place from the family
config's block options: RoPE's tables (1-D, or 2-D axial over a ViT's patch grid), the mask each
self-attention attends under (causality, padding and ALiBi's bias), cross-attention's padding mask, and,
for the cached path, the bias of the new positions against the cached ones. Every family's forward and
its cached decoding ask this object; none of them reads `position` itself. A learned position is an
embedding the family adds to its input (its weights keep their names in checkpoints and ports), so here
it is simply a scheme with nothing to hand the blocks.

A new position scheme is a value of a Literal and its math in positions.py, its branch here, and its line
in block_options.py's table (docs/adding-a-variant.md §4 works one through).
"""

from __future__ import annotations

import torch
from torch import nn

from lit_attention.modeling.axial_rotary import axial_rotary_tables
from lit_attention.modeling.masks import attention_mask, biased_mask, compute_dtype
from lit_attention.modeling.positions import alibi_bias, alibi_exponents, alibi_slopes_from, rotary_tables


class AttentionInputs(nn.Module):
    """The positions, masks and biases of one stack of blocks (`causal` for a decoder's).

    `grid`: a ViT's patches per side, whose rope is 2-D axial over the grid after `prefix_tokens`
    unrotated tokens (the class token). Holds no parameters, so a model's state dict is unchanged.
    """

    def __init__(self, config, causal: bool, grid: int | None = None, prefix_tokens: int = 0) -> None:
        super().__init__()
        self.position, self.causal = config.position, causal
        self.head_dim, self.rope_base = config.dim // config.num_heads, config.rope_base
        self.grid, self.prefix_tokens = grid, prefix_tokens
        if self.position == "alibi":  # whole numbers, as in the layers: no precision plugin casts them
            numerators, self.alibi_denominator = alibi_exponents(config.num_heads)
            self.register_buffer("alibi_numerators", torch.tensor(numerators), persistent=False)

    def rotary(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor] | None:
        """RoPE's (cos, sin) for the tokens of `x` at `positions` ((T,) shared by every row, (B, T) each
        row its own; default 0..T-1), None without rope. A grid's tables cover its every token."""
        if self.position != "rope":
            return None
        if self.grid is not None:
            dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
            return axial_rotary_tables(self.grid, self.head_dim, self.rope_base, self.prefix_tokens, dtype, x.device)
        if positions is None:
            positions = torch.arange(x.shape[1], device=x.device)
        return rotary_tables(positions, self.head_dim, self.rope_base, x.dtype)

    def self_mask(self, x: torch.Tensor, padding: torch.Tensor | None) -> torch.Tensor | None:
        """The mask of every self-attention layer of the stack for `x` (B, T, d) at positions 0..T-1 with
        `padding` (True at padding, None where nothing is padded): None where attention needs none (a
        causal layer then takes SDPA's is_causal path), a boolean mask, or a float one carrying a bias,
        built in the dtype attention computes in (compute_dtype)."""
        t = x.shape[1]
        positions = torch.arange(t, device=x.device)
        bias = self.bias(positions, positions)
        if bias is None and padding is None:
            return None
        allowed = attention_mask(t, t, padding, self.causal, cross_attention=False, device=x.device)
        # Built from float32 slopes and distances, then rounded once to the compute dtype: no layer casts it again.
        return allowed if bias is None else biased_mask(allowed, bias).to(compute_dtype(x))

    def memory_mask(self, memory: torch.Tensor, padding: torch.Tensor | None) -> torch.Tensor | None:
        """Cross-attention's mask over `memory` (B, S, d): its padding only; memory is neither rotated nor biased."""
        return attention_mask(1, memory.shape[1], padding, causal=False, cross_attention=True, device=memory.device)

    def bias(self, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor | None:
        """The scores' bias of queries at `query_positions` ((T,) or (B, T)) against keys at `key_positions`,
        (h, T_q, T_k) or (B, h, T_q, T_k) in float32, None without one: inside `self_mask`, and for the cached
        path, which combines it with its own causal and stale-slot masks."""
        if self.position == "alibi":
            return alibi_bias(self.alibi_slopes, query_positions, key_positions)
        return None

    @property
    def alibi_slopes(self) -> torch.Tensor:
        """ALiBi's slopes in float32, on this module's device (positions.alibi_slopes_from)."""
        return alibi_slopes_from(self.alibi_numerators, self.alibi_denominator)

    def extra_repr(self) -> str:
        return f"position={self.position!r}, causal={self.causal}"
