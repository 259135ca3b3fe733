"""Vision Transformer: patches -> pre-norm blocks -> CLS or mean pooling -> linear head."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from lit_attention.errors import ConfigError
from lit_attention.modeling.attention_inputs import AttentionInputs
from lit_attention.modeling.blocks import TransformerBlock, make_norm, parameter_counts
from lit_attention.modeling.config import ModelConfig
from lit_attention.modeling.positions import GridPosition, check_position
from lit_attention.modeling.variants import AttentionSpec

POOLS = ("cls", "mean")


@dataclass(frozen=True)
class ViTConfig(ModelConfig):
    """The Vision Transformer's architecture; the block's fields are ModelConfig's.

    Args:
        num_classes: classes; set from the data.
        image_size: side of the square images; set from the data.
        in_channels: image channels; set from the data.
        patch_size: side of the square patches (4 for 32x32 images, 2 for 8x8).
        depth: transformer blocks.
        pool: cls (a learned CLS token) or mean (mean of the patch tokens).
        position: learned (an absolute embedding added to the tokens) or rope (2-D axial rotary positions over
            the patch grid, the CLS token not rotated; needs dim / num_heads divisible by 4).
        rope_base: the rotary base θ of position=rope (timm's RoPE ViTs call it rope_temperature and use 100).
        dropout: dropout in attention and MLP.
        norm_eps: the norms' eps (timm's ViT uses 1e-6).
    """

    num_classes: int | None = None
    image_size: int | None = None
    in_channels: int | None = None

    patch_size: int = 4
    depth: int = 6
    pool: Literal["cls", "mean"] = "cls"

    # ModelConfig's block fields, at this family's defaults
    dim: int = 192
    num_heads: int = 3
    drop_path: float = 0.1
    position: GridPosition = "learned"

    from_data = ("num_classes", "image_size", "in_channels")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pool not in POOLS:
            raise ConfigError(f"Unknown pool {self.pool!r}; valid choices are {', '.join(POOLS)}.")
        check_position(self, "ViT", causal=False, axial=True)
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
        self.inputs = AttentionInputs(c, causal=False, grid=c.image_size // c.patch_size, prefix_tokens=int(c.pool == "cls"))
        self.blocks = TransformerBlock.stack(c, attention, c.depth, max_len=self.num_tokens)
        self.norm = make_norm(c.norm, c.dim, c.norm_eps, c.bias)
        self.head = nn.Linear(c.dim, c.num_classes)
        self.apply(_init_weights)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # (B, patches, dim)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        if self.pos_embed is not None:
            x = x + self.pos_embed
        x = self.dropout(x)
        rotary, mask = self.inputs.rotary(x), self.inputs.self_mask(x, None)
        for block in self.blocks:
            x = block(x, mask=mask, rotary=rotary)
        x = self.norm(x)
        pooled = x[:, 0] if self.pool == "cls" else x.mean(dim=1)
        return self.head(pooled)

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
