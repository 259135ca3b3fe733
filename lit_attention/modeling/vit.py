"""Vision Transformer: patches -> pre-norm blocks -> CLS or mean pooling -> linear head."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from lit_attention.errors import ConfigError
from lit_attention.modeling.axial_rotary import axial_rotary_tables, check_axial_width
from lit_attention.modeling.blocks import TransformerBlock, drop_path_rates, make_norm, parameter_counts
from lit_attention.modeling.config import ModelConfig
from lit_attention.modeling.variants import AttentionSpec

POOLS = ("cls", "mean")
POSITIONS = ("learned", "rope")


@dataclass(frozen=True)
class ViTConfig(ModelConfig):
    """The Vision Transformer's architecture.

    Args:
        num_classes: classes; set from the data.
        image_size: side of the square images; set from the data.
        in_channels: image channels; set from the data.
        patch_size: side of the square patches (4 for 32x32 images, 2 for 8x8).
        dim: model width d.
        depth: transformer blocks.
        num_heads: attention heads (must divide dim).
        mlp_ratio: MLP hidden width as a multiple of dim.
        norm: layernorm or rmsnorm (weight only, as Llama's), for every norm of the model.
        mlp: gelu (fc1, GELU, fc2) or swiglu (Llama's gated MLP, SiLU(x W_gate) * x W_up, then W_down).
        mlp_hidden: the MLP's hidden width; null derives it from mlp_ratio (swiglu: int(2/3 * int(mlp_ratio * dim)),
            Llama's rule without its rounding up, so it holds about the gelu MLP's parameters).
        pool: cls (a learned CLS token) or mean (mean of the patch tokens).
        position: learned (an absolute embedding added to the tokens) or rope (2-D axial rotary positions over
            the patch grid, the CLS token not rotated; needs dim / num_heads divisible by 4).
        rope_base: the rotary base θ of position=rope (timm's RoPE ViTs call it rope_temperature and use 100).
        qk_norm: RMSNorm over each head's queries and keys (weight only, eps norm_eps), before the rotation.
        dropout: dropout in attention and MLP.
        drop_path: stochastic depth of the last block (growing linearly from 0 over the blocks).
        bias: biases in linear layers and LayerNorms (RMSNorm has none).
        norm_eps: the norms' eps (timm's ViT uses 1e-6).
    """

    num_classes: int | None = None
    image_size: int | None = None
    in_channels: int | None = None
    patch_size: int = 4
    dim: int = 192
    depth: int = 6
    num_heads: int = 3
    mlp_ratio: float = 4.0
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    mlp: Literal["gelu", "swiglu"] = "gelu"
    mlp_hidden: int | None = None
    pool: Literal["cls", "mean"] = "cls"
    position: Literal["learned", "rope"] = "learned"
    rope_base: float = 10000.0
    qk_norm: bool = False
    dropout: float = 0.0
    drop_path: float = 0.1
    bias: bool = True
    norm_eps: float = 1e-5

    from_data = ("num_classes", "image_size", "in_channels")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pool not in POOLS:
            raise ConfigError(f"Unknown pool {self.pool!r}; valid choices are {', '.join(POOLS)}.")
        if self.position not in POSITIONS:
            raise ConfigError(f"Unknown position {self.position!r}; valid choices are {', '.join(POSITIONS)}.")
        if self.position == "rope" and self.dim % self.num_heads == 0:
            check_axial_width(self.dim // self.num_heads)
        if self.image_size is not None and self.image_size % self.patch_size != 0:
            raise ConfigError(
                f"image_size={self.image_size} is not divisible by patch_size={self.patch_size}; "
                "choose a patch size that divides the image size."
            )

    @property
    def num_tokens(self) -> int:
        """Patches, plus the CLS token with CLS pooling: l, the size of W_A."""
        return (self.image_size // self.patch_size) ** 2 + (self.pool == "cls")


class VisionTransformer(nn.Module):
    """ViT for small images (patch 4 for 32x32, 2 for 8x8). For `super`, W_A spans every token
    (patches plus CLS), so l = (image_size / patch_size)^2 + 1 with CLS pooling.

    With `norm_eps=1e-6` and `attention="standard"` it computes exactly what timm's
    VisionTransformer (class token, qkv bias) computes; `lit_attention.modeling.ports.timm_vit_state_dict`
    converts its weights. With `position="rope"` the positions are 2-D axial rotations over the patch
    grid (axial_rotary.py), the CLS token not rotated: with `rope_base=100` it computes timm's RoPE ViT
    (`vit_*_patch16_rope_224` without layer scale), whose weights `timm_rope_vit_state_dict` converts.
    """

    def __init__(self, config: ViTConfig, attention: str | dict | AttentionSpec = "standard") -> None:
        super().__init__()
        config.require_data_sizes()
        self.config, c = config, config
        self.pool = c.pool
        self.num_tokens = c.num_tokens
        # A strided convolution is the patch split + shared linear projection in one op.
        self.patch_embed = nn.Conv2d(c.in_channels, c.dim, kernel_size=c.patch_size, stride=c.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.dim)) if c.pool == "cls" else None
        # With rope the positions are rotations inside attention, so there is no embedding to add.
        self.pos_embed = nn.Parameter(torch.randn(1, self.num_tokens, c.dim) * 0.02) if c.position == "learned" else None
        self.dropout = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(c.dim, c.num_heads, attention, max_len=self.num_tokens, mlp_ratio=c.mlp_ratio,
                             dropout=c.dropout, drop_path=rate, bias=c.bias, norm_eps=c.norm_eps,
                             norm=c.norm, mlp=c.mlp, mlp_hidden=c.mlp_hidden, qk_norm=c.qk_norm)
            for rate in drop_path_rates(c.drop_path, c.depth)
        )
        self.norm = make_norm(c.norm, c.dim, c.norm_eps, c.bias)
        self.head = nn.Linear(c.dim, c.num_classes)
        self.apply(_init_weights)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # (B, patches, dim)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        rotary = None
        if self.pos_embed is not None:
            x = x + self.pos_embed
        else:
            rotary = self.rotary_tables(x)
        x = self.dropout(x)
        for block in self.blocks:
            x = block(x, rotary=rotary)
        x = self.norm(x)
        pooled = x[:, 0] if self.pool == "cls" else x.mean(dim=1)
        return self.head(pooled)

    def rotary_tables(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin) of position=rope for the tokens `x`, the CLS token (first) not rotated."""
        c = self.config
        return axial_rotary_tables(c.image_size // c.patch_size, c.dim // c.num_heads, c.rope_base,
                                   prefix_tokens=int(self.cls_token is not None),
                                   dtype=torch.float64 if x.dtype == torch.float64 else torch.float32, device=x.device)

    def parameter_counts(self) -> dict[str, int]:
        embedding = [p for p in (self.pos_embed, *self.patch_embed.parameters()) if p is not None]
        if self.cls_token is not None:
            embedding.append(self.cls_token)
        return parameter_counts(self, embedding)


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
