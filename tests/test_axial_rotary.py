"""The ViT's 2-D axial RoPE: scores depend on the patches' row and column offsets, the CLS token is not
rotated, and the config refuses what it cannot build."""

import pytest
import torch

from lit_attention.errors import ConfigError
from lit_attention.modeling import ViTConfig, VisionTransformer
from lit_attention.modeling.axial_rotary import axial_rotary_tables
from lit_attention.modeling.positions import apply_rotary


def test_scores_depend_on_row_and_column_offsets_only():
    grid, head_dim = 3, 8
    cos, sin = axial_rotary_tables(grid, head_dim, base=100.0, prefix_tokens=1, dtype=torch.float64)
    assert cos.shape == sin.shape == (1 + grid * grid, head_dim)
    assert torch.equal(cos[0], torch.ones(head_dim)) and torch.equal(sin[0], torch.zeros(head_dim))  # CLS kept
    torch.manual_seed(0)
    q, k = torch.randn(head_dim, dtype=torch.float64), torch.randn(head_dim, dtype=torch.float64)
    # The same query and key at every token: any change of score comes from the positions alone.
    scores = apply_rotary(q.expand(10, -1), (cos, sin)) @ apply_rotary(k.expand(10, -1), (cos, sin)).T
    by_offset: dict[tuple[int, int], list[float]] = {}
    for a in range(grid * grid):
        for b in range(grid * grid):
            by_offset.setdefault((a // grid - b // grid, a % grid - b % grid), []).append(scores[1 + a, 1 + b].item())
    assert len(by_offset) == (2 * grid - 1) ** 2
    for offset, values in by_offset.items():
        assert max(values) - min(values) < 1e-12, offset
    # Rows and columns are both seen: moving one row or one column changes the score differently.
    assert abs(by_offset[(1, 0)][0] - by_offset[(0, 1)][0]) > 1e-3
    assert abs(by_offset[(0, 0)][0] - by_offset[(1, 0)][0]) > 1e-3


def test_vit_with_rope_has_no_position_embedding_and_uses_the_grid():
    config = ViTConfig(
        image_size=8, patch_size=2, in_channels=1, num_classes=3, dim=16, depth=1, num_heads=2, position="rope", drop_path=0.0
    )
    model = VisionTransformer(config).double().eval()
    learned = VisionTransformer(ViTConfig(**{**config.to_dict(), "position": "learned"}))
    assert model.pos_embed is None
    assert learned.parameter_counts()["total"] - model.parameter_counts()["total"] == 17 * 16
    torch.manual_seed(0)
    with torch.no_grad():  # weights large enough for attention to be far from uniform
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    images = torch.randn(2, 1, 8, 8, dtype=torch.float64)
    # Without positions, CLS pooling would not see the patches' order: rolling them changes the logits
    # only through the rotations.
    shifted = torch.roll(images, shifts=2, dims=3)
    assert (model(images) - model(shifted)).abs().max() > 1e-6


def test_vit_config_refuses_an_unknown_position_and_a_head_width_rope_cannot_split():
    with pytest.raises(ConfigError, match="Unknown position 'alibi'; valid choices are learned, rope."):
        ViTConfig(position="alibi")
    with pytest.raises(ConfigError, match="head width divisible by 4.*got d_h = dim / num_heads = 6"):
        ViTConfig(dim=12, num_heads=2, position="rope")
    ViTConfig(dim=12, num_heads=2)  # learned positions take any head width
