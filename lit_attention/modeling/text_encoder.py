"""Text encoder classifier: tokens -> pre-norm blocks with a padding mask -> CLS or masked mean."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from lit_attention.errors import ConfigError
from lit_attention.modeling.attention_inputs import AttentionInputs
from lit_attention.modeling.masks import padding_or_none, warn_if_masked_kernels_unfused
from lit_attention.modeling.blocks import TransformerBlock, make_norm, parameter_counts
from lit_attention.modeling.config import ModelConfig
from lit_attention.modeling.positions import OrderedPosition, check_position
from lit_attention.modeling.variants import AttentionSpec

POOLS = ("cls", "mean")


@dataclass(frozen=True)
class TextEncoderConfig(ModelConfig):
    """The text encoder classifier's architecture; the block's fields are ModelConfig's.

    Args:
        vocab_size: token ids; set from the data (a larger value is allowed).
        max_len: positions (and the size of W_A); set from the data (a larger value is allowed).
        num_classes: classes; set from the data.
        pad_id: the padding token's id; set from the data.
        depth: transformer blocks.
        pool: cls (a learned CLS token) or mean (masked mean of the real tokens).
        position: how attention knows positions: learned (an embedding per position), rope (rotary
            queries and keys; the CLS token sits at position 0, which is not rotated) or alibi (a
            distance penalty on the scores, both ways); see docs/DESIGN.md.
    """

    vocab_size: int | None = None
    max_len: int | None = None
    num_classes: int | None = None
    pad_id: int | None = None

    depth: int = 4
    pool: Literal["cls", "mean"] = "cls"

    # ModelConfig's block fields, at this family's defaults
    dropout: float = 0.1
    position: OrderedPosition = "learned"

    from_data = ("vocab_size", "max_len", "num_classes", "pad_id")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pool not in POOLS:
            raise ConfigError(f"Unknown pool {self.pool!r}; valid choices are {', '.join(POOLS)}.")
        check_position(self, "text encoder", causal=False)


class TextEncoderClassifier(nn.Module):
    """Bidirectional encoder over padded token sequences.

    The padding mask (True marks padding) reaches every attention layer and the pooling, so the
    logits do not depend on what sits at padded positions. With `pool="cls"` a learned CLS token is
    prepended, so `super`'s W_A spans max_len + 1 positions.
    """

    def __init__(self, config: TextEncoderConfig, attention: str | dict | AttentionSpec = "standard") -> None:
        super().__init__()
        config.require_data_sizes()
        self.config, c = config, config
        warn_if_masked_kernels_unfused("TextEncoderClassifier", c.dim, c.num_heads)
        self.vocab_size, self.max_len, self.pool, self.pad_id = c.vocab_size, c.max_len, c.pool, c.pad_id
        num_positions = c.max_len + (c.pool == "cls")
        self.token_embed = nn.Embedding(c.vocab_size, c.dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.dim)) if c.pool == "cls" else None
        self.pos_embed = nn.Embedding(num_positions, c.dim) if c.position == "learned" else None
        self.dropout = nn.Dropout(c.dropout)
        self.inputs = AttentionInputs(c, causal=False)
        self.blocks = TransformerBlock.stack(c, attention, c.depth, max_len=num_positions)
        self.norm = make_norm(c.norm, c.dim, c.norm_eps, c.bias)
        self.head = nn.Linear(c.dim, c.num_classes)
        nn.init.normal_(self.token_embed.weight, std=0.02)
        if self.pos_embed is not None:
            nn.init.normal_(self.pos_embed.weight, std=0.02)

    def forward(
        self, tokens: torch.Tensor, key_padding_mask: torch.Tensor | None = None, padded: bool | None = None
    ) -> torch.Tensor:
        """tokens (B, T) with T <= max_len; key_padding_mask (B, T), True at padding
        (derived from `pad_id` when not given); `padded`: whether it marks any, if known on the host
        (see `padding_or_none`)."""
        if tokens.shape[1] > self.max_len:
            raise ConfigError(
                f"Sequence length {tokens.shape[1]} exceeds max_len={self.max_len}; truncate inputs to max_len tokens."
            )
        if key_padding_mask is None:
            key_padding_mask = tokens == self.pad_id
        x = self.token_embed(tokens)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
            key_padding_mask = torch.cat([key_padding_mask.new_zeros(x.shape[0], 1), key_padding_mask], dim=1)
        t = x.shape[1]
        if self.pos_embed is not None:
            x = x + self.pos_embed.weight[:t]
        x = self.dropout(x)
        # Without padding no mask (SDPA may use its flash kernel); with it, one mask for every layer.
        padding = padding_or_none(key_padding_mask, padded)
        mask, rotary = self.inputs.self_mask(x, padding), self.inputs.rotary(x)
        for block in self.blocks:
            x = block(x, padding_mask=padding, mask=mask, rotary=rotary)
        x = self.norm(x)
        if self.pool == "cls":
            pooled = x[:, 0]
        else:
            real = (~key_padding_mask).unsqueeze(-1).to(x.dtype)
            pooled = (x * real).sum(dim=1) / real.sum(dim=1).clamp(min=1.0)
        return self.head(pooled)

    def parameter_counts(self) -> dict[str, int]:
        embedding = [self.token_embed.weight] + ([] if self.pos_embed is None else [self.pos_embed.weight])
        if self.cls_token is not None:
            embedding.append(self.cls_token)
        return parameter_counts(self, embedding)
