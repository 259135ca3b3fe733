"""Pre-norm transformer blocks shared by every model family, with their norm (LayerNorm or RMSNorm) and
MLP (GELU or SwiGLU) chosen by the family's config."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lit_attention.modeling.attention import AttentionSpec, KVCache, MultiHeadAttention, count_attention_parameters
from lit_attention.errors import ConfigError

# GPT-2 uses the tanh approximation of GELU; ViT, BERT and most recent models the exact one.
ACTIVATIONS = {"gelu": "none", "gelu_tanh": "tanh"}
NORMS = ("layernorm", "rmsnorm")
MLPS = ("gelu", "swiglu")


def make_norm(norm: str, dim: int, eps: float = 1e-5, bias: bool = True) -> nn.Module:
    """One norm of a model: LayerNorm (with a bias when `bias`) or RMSNorm (a weight only, as Llama's)."""
    if norm == "layernorm":
        return nn.LayerNorm(dim, eps=eps, bias=bias)
    if norm == "rmsnorm":
        return nn.RMSNorm(dim, eps=eps)
    raise ConfigError(f"Unknown norm {norm!r}; valid choices are {', '.join(NORMS)}.")


def mlp_hidden_width(dim: int, mlp_ratio: float, mlp: str = "gelu", mlp_hidden: int | None = None) -> int:
    """The MLP's hidden width: `mlp_hidden` when given, else H = int(mlp_ratio * dim) for the GELU MLP and,
    for SwiGLU, Llama's two thirds of it, int(2 * H / 3), so that its three matrices hold about the GELU
    MLP's parameters (3 * d * 2H/3 = 2 * d * H). Llama then rounds up to a multiple of 256 (`multiple_of`),
    for its kernels; that is skipped here: it adds up to 255 units (3·255·d parameters) a block, and
    compare's parameter matching steps the width one unit at a time. A port sets `mlp_hidden` instead."""
    if mlp not in MLPS:
        raise ConfigError(f"Unknown mlp {mlp!r}; valid choices are {', '.join(MLPS)}.")
    if mlp_hidden is not None:
        return mlp_hidden
    hidden = int(dim * mlp_ratio)
    if mlp == "gelu":
        return hidden
    return max(1, int(2 * hidden / 3))


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


class SwiGLU(nn.Module):
    """y = W_down (SiLU(x W_gate) * x W_up), Llama's MLP. The gate and up projections are one Linear,
    `fc1`, whose output rows are [gate; up] (one matmul instead of two); `fc2` is the down projection,
    named as the GELU MLP's so that GPT's scaled residual init and the ports find it."""

    def __init__(self, dim: int, hidden: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, 2 * hidden, bias=bias)
        self.fc2 = nn.Linear(hidden, dim, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.fc1(x).chunk(2, dim=-1)
        return self.dropout(self.fc2(F.silu(gate) * up))


@dataclass
class BlockCache:
    """One block's decoding state: its self-attention cache and, in a decoder block, its cross-attention's."""

    attn: KVCache
    cross_attn: KVCache | None = None


class TransformerBlock(nn.Module):
    """x + attn(N(x)), then x + MLP(N(x)); with `cross_attention`, a cross-attention sub-layer
    on the encoder memory sits between the two (the decoder block of an encoder–decoder).
    N is `norm` (layernorm or rmsnorm), the MLP is `mlp` (gelu: fc1, GELU, fc2; swiglu: `SwiGLU`)
    of width `mlp_hidden_width(dim, mlp_ratio, mlp, mlp_hidden)`. `qk_norm` applies to both attentions;
    `alibi` and the forward's `rotary` to self-attention only (queries and memory are different sequences)."""

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
        norm: str = "layernorm",
        mlp: str = "gelu",
        mlp_hidden: int | None = None,
    ) -> None:
        super().__init__()
        self.norm1 = make_norm(norm, dim, norm_eps, bias)
        self.attn = MultiHeadAttention(
            dim,
            num_heads,
            attention,
            max_len=max_len,
            causal=causal,
            bias=bias,
            dropout=dropout,
            qk_norm=qk_norm,
            norm_eps=norm_eps,
            alibi=alibi,
        )
        if cross_attention:
            self.norm_cross = make_norm(norm, dim, norm_eps, bias)
            self.cross_attn = MultiHeadAttention(
                dim,
                num_heads,
                attention,
                max_len=memory_max_len,
                bias=bias,
                dropout=dropout,
                cross_attention=True,
                qk_norm=qk_norm,
                norm_eps=norm_eps,
            )
        else:
            self.norm_cross = self.cross_attn = None
        self.norm2 = make_norm(norm, dim, norm_eps, bias)
        hidden = mlp_hidden_width(dim, mlp_ratio, mlp, mlp_hidden)
        self.mlp = SwiGLU(dim, hidden, dropout, bias) if mlp == "swiglu" else MLP(dim, hidden, dropout, bias, activation)
        self.drop_path = DropPath(drop_path)

    @classmethod
    def stack(
        cls, config, attention: str | dict | AttentionSpec, depth: int, max_len: int, causal: bool = False, **options
    ) -> nn.ModuleList:
        """`depth` blocks with the block options of a family's `config` (ModelConfig's shared fields), stochastic
        depth growing over them (drop_path_rates); `options`: a decoder block's cross_attention and
        memory_max_len. ALiBi's flag lets a layer bias its scores itself where no model hands it a mask."""
        c = config
        return nn.ModuleList(
            cls(
                c.dim,
                c.num_heads,
                attention,
                max_len=max_len,
                causal=causal,
                mlp_ratio=c.mlp_ratio,
                dropout=c.dropout,
                drop_path=rate,
                bias=c.bias,
                activation=c.activation,
                norm_eps=c.norm_eps,
                qk_norm=c.qk_norm,
                alibi=c.position == "alibi",
                norm=c.norm,
                mlp=c.mlp,
                mlp_hidden=c.mlp_hidden,
                **options,
            )
            for rate in drop_path_rates(c.drop_path, depth)
        )

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
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """With a `cache` (from `new_cache`), `x` holds only the new positions; padding and memory are
        in the cache, and `bias` is the new positions' score bias (AttentionInputs.bias). `mask` /
        `memory_mask`: the `attention_mask` of `padding_mask` / `memory_padding_mask`, built once per
        forward by the model (else by each layer); `mask` may carry ALiBi's bias (`biased_mask`).
        `rotary`: (cos, sin) of the positions of `x`, for self-attention. The model's AttentionInputs
        makes all of them."""
        if cache is not None:
            return self._forward_cached(x, cache, rotary, bias)
        x = x + self.drop_path(self.attn(self.norm1(x), key_padding_mask=padding_mask, mask=mask, rotary=rotary))
        if self.cross_attn is not None:
            x = x + self.drop_path(
                self.cross_attn(self.norm_cross(x), memory=memory, memory_padding_mask=memory_padding_mask, mask=memory_mask)
            )
        return x + self.drop_path(self.mlp(self.norm2(x)))

    def _forward_cached(self, x: torch.Tensor, cache: BlockCache, rotary=None, bias=None) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x), cache=cache.attn, rotary=rotary, bias=bias))
        if self.cross_attn is not None:
            x = x + self.drop_path(self.cross_attn(self.norm_cross(x), cache=cache.cross_attn))
        return x + self.drop_path(self.mlp(self.norm2(x)))

    def new_cache(
        self,
        batch: int,
        capacity: int | None = None,
        memory: torch.Tensor | None = None,
        memory_padding_mask: torch.Tensor | None = None,
    ) -> BlockCache:
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
