"""Text encoder classifier: tokens -> pre-norm blocks with a padding mask -> CLS or masked mean."""

from __future__ import annotations

import torch
from torch import nn

from lit_attention.modeling.attention import AttentionSpec
from lit_attention.errors import ConfigError
from lit_attention.modeling.blocks import TransformerBlock, drop_path_rates, parameter_counts

POOLS = ("cls", "mean")


class TextEncoderClassifier(nn.Module):
    """Bidirectional encoder over padded token sequences.

    The padding mask (True marks padding) reaches every attention layer and the pooling, so the
    logits do not depend on what sits at padded positions. With `pool="cls"` a learned CLS token is
    prepended, so `super`'s W_A spans max_len + 1 positions.
    """

    def __init__(
        self,
        vocab_size: int,
        max_len: int,
        num_classes: int,
        dim: int = 256,
        depth: int = 4,
        num_heads: int = 4,
        mlp_ratio: float = 4.0,
        attention: str | dict | AttentionSpec = "standard",
        pool: str = "cls",
        pad_id: int = 0,
        dropout: float = 0.0,
        drop_path: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if pool not in POOLS:
            raise ConfigError(f"Unknown pool {pool!r}; valid choices are {', '.join(POOLS)}.")
        self.vocab_size, self.max_len, self.pool, self.pad_id = vocab_size, max_len, pool, pad_id
        num_positions = max_len + (pool == "cls")
        self.token_embed = nn.Embedding(vocab_size, dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim)) if pool == "cls" else None
        self.pos_embed = nn.Embedding(num_positions, dim)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(dim, num_heads, attention, max_len=num_positions, mlp_ratio=mlp_ratio,
                             dropout=dropout, drop_path=rate, bias=bias)
            for rate in drop_path_rates(drop_path, depth)
        )
        self.norm = nn.LayerNorm(dim, bias=bias)
        self.head = nn.Linear(dim, num_classes)
        nn.init.normal_(self.token_embed.weight, std=0.02)
        nn.init.normal_(self.pos_embed.weight, std=0.02)

    def forward(self, tokens: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """tokens (B, T) with T <= max_len; key_padding_mask (B, T), True at padding
        (derived from `pad_id` when not given)."""
        if tokens.shape[1] > self.max_len:
            raise ConfigError(f"Sequence length {tokens.shape[1]} exceeds max_len={self.max_len}; truncate inputs to max_len tokens.")
        if key_padding_mask is None:
            key_padding_mask = tokens == self.pad_id
        x = self.token_embed(tokens)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
            key_padding_mask = torch.cat([key_padding_mask.new_zeros(x.shape[0], 1), key_padding_mask], dim=1)
        x = self.dropout(x + self.pos_embed.weight[: x.shape[1]])
        for block in self.blocks:
            x = block(x, padding_mask=key_padding_mask)
        x = self.norm(x)
        if self.pool == "cls":
            pooled = x[:, 0]
        else:
            real = (~key_padding_mask).unsqueeze(-1).to(x.dtype)
            pooled = (x * real).sum(dim=1) / real.sum(dim=1).clamp(min=1.0)
        return self.head(pooled)

    def parameter_counts(self) -> dict[str, int]:
        embedding = [self.token_embed.weight, self.pos_embed.weight]
        if self.cls_token is not None:
            embedding.append(self.cls_token)
        return parameter_counts(self, embedding)
