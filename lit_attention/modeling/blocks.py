"""Pre-norm transformer blocks shared by every model family."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from lit_attention.modeling.attention import AttentionSpec, KVCache, MultiHeadAttention, count_attention_parameters
from lit_attention.errors import ConfigError

# GPT-2 uses the tanh approximation of GELU; ViT, BERT and most recent models the exact one.
ACTIVATIONS = {"gelu": "none", "gelu_tanh": "tanh"}


class DropPath(nn.Module):
    """Stochastic depth: drop a whole residual branch per sample while training."""

    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.p == 0.0 or not self.training:
            return x
        keep = x.new_empty(x.shape[0], *([1] * (x.dim() - 1))).bernoulli_(1.0 - self.p)
        return x * keep / (1.0 - self.p)


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int, dropout: float = 0.0, bias: bool = True, activation: str = "gelu") -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ConfigError(f"Unknown activation {activation!r}; valid choices are {', '.join(ACTIVATIONS)}.")
        self.fc1 = nn.Linear(dim, hidden, bias=bias)
        self.act = nn.GELU(approximate=ACTIVATIONS[activation])
        self.fc2 = nn.Linear(hidden, dim, bias=bias)  # a residual projection (scaled init in GPT)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.fc2(self.act(self.fc1(x))))


@dataclass
class BlockCache:
    """One block's decoding state: its self-attention cache and, in a decoder block, its cross-attention's."""

    attn: KVCache
    cross_attn: KVCache | None = None


class TransformerBlock(nn.Module):
    """x + attn(LN(x)), then x + MLP(LN(x)); with `cross_attention`, a cross-attention sub-layer
    on the encoder memory sits between the two (the decoder block of an encoder–decoder).
    `qk_norm` applies to both attentions; `alibi` and the forward's `rotary` to self-attention only
    (queries and memory are different sequences)."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        attention: str | dict | AttentionSpec = "standard",
        max_len: int | None = None,
        causal: bool = False,
        mlp_ratio: float = 4.0,
        dropout: float = 0.0,
        drop_path: float = 0.0,
        bias: bool = True,
        cross_attention: bool = False,
        memory_max_len: int | None = None,
        activation: str = "gelu",
        norm_eps: float = 1e-5,
        qk_norm: bool = False,
        alibi: bool = False,
    ) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps, bias=bias)
        self.attn = MultiHeadAttention(dim, num_heads, attention, max_len=max_len, causal=causal, bias=bias, dropout=dropout,
                                       qk_norm=qk_norm, norm_eps=norm_eps, alibi=alibi)
        if cross_attention:
            self.norm_cross = nn.LayerNorm(dim, eps=norm_eps, bias=bias)
            self.cross_attn = MultiHeadAttention(
                dim, num_heads, attention, max_len=memory_max_len, bias=bias, dropout=dropout, cross_attention=True,
                qk_norm=qk_norm, norm_eps=norm_eps,
            )
        else:
            self.norm_cross = self.cross_attn = None
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps, bias=bias)
        self.mlp = MLP(dim, int(dim * mlp_ratio), dropout, bias, activation)
        self.drop_path = DropPath(drop_path)

    def forward(
        self,
        x: torch.Tensor,
        padding_mask: torch.Tensor | None = None,
        memory: torch.Tensor | None = None,
        memory_padding_mask: torch.Tensor | None = None,
        cache: BlockCache | None = None,
        mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """With a `cache` (from `new_cache`), `x` holds only the new positions; padding and memory are
        in the cache. `mask` / `memory_mask`: the `attention_mask` of `padding_mask` /
        `memory_padding_mask`, built once per forward by the model (else by each layer); `mask` may carry
        ALiBi's bias (`biased_mask`). `rotary`: (cos, sin) of the positions of `x`, for self-attention."""
        if cache is not None:
            return self._forward_cached(x, cache, rotary)
        x = x + self.drop_path(self.attn(self.norm1(x), key_padding_mask=padding_mask, mask=mask, rotary=rotary))
        if self.cross_attn is not None:
            x = x + self.drop_path(self.cross_attn(self.norm_cross(x), memory=memory,
                                                   memory_padding_mask=memory_padding_mask, mask=memory_mask))
        return x + self.drop_path(self.mlp(self.norm2(x)))

    def _forward_cached(self, x: torch.Tensor, cache: BlockCache, rotary=None) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x), cache=cache.attn, rotary=rotary))
        if self.cross_attn is not None:
            x = x + self.drop_path(self.cross_attn(self.norm_cross(x), cache=cache.cross_attn))
        return x + self.drop_path(self.mlp(self.norm2(x)))

    def new_cache(self, batch: int, capacity: int | None = None, memory: torch.Tensor | None = None,
                  memory_padding_mask: torch.Tensor | None = None) -> BlockCache:
        """An empty self-attention cache (see MultiHeadAttention.new_cache) and, for a decoder block,
        the cross-attention cache of `memory`."""
        cross = None if self.cross_attn is None else self.cross_attn.memory_cache(memory, memory_padding_mask)
        return BlockCache(self.attn.new_cache(batch, capacity), cross)


def drop_path_rates(drop_path: float, depth: int) -> list[float]:
    """Stochastic depth growing linearly with depth, as in DeiT."""
    return [drop_path * i / max(depth - 1, 1) for i in range(depth)]


def parameter_counts(model: nn.Module, embedding_parameters: list[nn.Parameter]) -> dict[str, int]:
    """Total, non-embedding (without token/position/patch embeddings) and attention parameters.

    Parameters are de-duplicated, so a head tied to the token embedding counts once.
    """
    unique = {id(p): p for p in model.parameters()}
    embedding = {id(p) for p in embedding_parameters}
    total = sum(p.numel() for p in unique.values())
    return {
        "total": total,
        "non_embedding": total - sum(p.numel() for i, p in unique.items() if i in embedding),
        "attention": count_attention_parameters(model),
    }
