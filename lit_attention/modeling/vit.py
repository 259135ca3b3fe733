"""Vision Transformer: patches -> pre-norm blocks -> CLS or mean pooling -> linear head."""

from __future__ import annotations

import torch
from torch import nn

from lit_attention.modeling.attention import AttentionSpec
from lit_attention.errors import ConfigError
from lit_attention.modeling.blocks import TransformerBlock, drop_path_rates, parameter_counts

POOLS = ("cls", "mean")


class VisionTransformer(nn.Module):
    """ViT for small images (patch 4 for 32x32, 2 for 8x8). For `super`, W_A spans every token
    (patches plus CLS), so l = (image_size / patch_size)^2 + 1 with CLS pooling.

    With `norm_eps=1e-6` and `attention="standard"` it computes exactly what timm's
    VisionTransformer (class token, qkv bias) computes; `lit_attention.modeling.ports.timm_vit_state_dict`
    converts its weights.
    """

    def __init__(
        self,
        image_size: int = 32,
        patch_size: int = 4,
        in_channels: int = 3,
        num_classes: int = 10,
        dim: int = 192,
        depth: int = 6,
        num_heads: int = 3,
        mlp_ratio: float = 4.0,
        attention: str | dict | AttentionSpec = "standard",
        pool: str = "cls",
        dropout: float = 0.0,
        drop_path: float = 0.0,
        bias: bool = True,
        norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        if image_size % patch_size != 0:
            raise ConfigError(
                f"image_size={image_size} is not divisible by patch_size={patch_size}; "
                "choose a patch size that divides the image size."
            )
        if pool not in POOLS:
            raise ConfigError(f"Unknown pool {pool!r}; valid choices are {', '.join(POOLS)}.")
        self.pool = pool
        num_patches = (image_size // patch_size) ** 2
        self.num_tokens = num_patches + (pool == "cls")
        # A strided convolution is the patch split + shared linear projection in one op.
        self.patch_embed = nn.Conv2d(in_channels, dim, kernel_size=patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim)) if pool == "cls" else None
        self.pos_embed = nn.Parameter(torch.randn(1, self.num_tokens, dim) * 0.02)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(dim, num_heads, attention, max_len=self.num_tokens, mlp_ratio=mlp_ratio,
                             dropout=dropout, drop_path=rate, bias=bias, norm_eps=norm_eps)
            for rate in drop_path_rates(drop_path, depth)
        )
        self.norm = nn.LayerNorm(dim, eps=norm_eps, bias=bias)
        self.head = nn.Linear(dim, num_classes)
        self.apply(_init_weights)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # (B, patches, dim)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        x = self.dropout(x + self.pos_embed)
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        pooled = x[:, 0] if self.pool == "cls" else x.mean(dim=1)
        return self.head(pooled)

    def parameter_counts(self) -> dict[str, int]:
        embedding = [self.pos_embed, *self.patch_embed.parameters()]
        if self.cls_token is not None:
            embedding.append(self.cls_token)
        return parameter_counts(self, embedding)


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
