"""Our GPT and ViT compute exactly what transformers' GPT-2 and timm's ViT compute, given their weights."""

import pytest
import torch

from lit_attention.modeling import GPT, VisionTransformer
from lit_attention.modeling.ports import timm_rope_vit_state_dict, timm_vit_state_dict
from lit_attention.modeling import GPTConfig, ViTConfig

transformers = pytest.importorskip("transformers", reason="transformers is in the dev extra")  # always installed in CI
timm = pytest.importorskip("timm", reason="timm is in the dev extra")


def random_gpt2(vocab=97, positions=24, dim=32, layers=2, heads=4, n_inner=None):
    config = transformers.GPT2Config(
        vocab_size=vocab,
        n_positions=positions,
        n_embd=dim,
        n_layer=layers,
        n_head=heads,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        n_inner=n_inner,
    )
    torch.manual_seed(0)
    reference = transformers.GPT2LMHeadModel(config).double().eval()
    with torch.no_grad():  # every weight random, biases and norms included: nothing hides behind zeros and ones
        for p in reference.parameters():
            p.copy_(torch.randn_like(p) * 0.2 + (1.0 if p.dim() == 1 else 0.0) * 0.5)
    return reference


@pytest.mark.slow
def test_from_gpt2_computes_gpt2_lm_head_model_logits():
    reference = random_gpt2()
    ours = GPT.from_gpt2(reference.state_dict(), num_heads=4).double().eval()
    tokens = torch.randint(0, 97, (3, 24))
    expected = reference(tokens).logits
    torch.testing.assert_close(ours(tokens), expected, rtol=0, atol=1e-10)
    # The same weights with exact GELU are measurably another function: the activation is not a detail.
    exact = GPT(GPTConfig(vocab_size=97, max_len=24, dim=32, depth=2, num_heads=4, bias=True)).double().eval()
    exact.load_state_dict(ours.state_dict())
    assert (exact(tokens) - expected).abs().max() > 1e-6


def test_from_gpt2_accepts_the_base_model_and_a_larger_vocabulary():
    reference = random_gpt2()
    base = {k.removeprefix("transformer."): v for k, v in reference.state_dict().items() if k != "lm_head.weight"}
    ours = GPT.from_gpt2(base, num_heads=4, vocab_size=100).double().eval()
    assert ours.token_embed.weight.shape == (100, 32) and ours.lm_head.weight is ours.token_embed.weight
    tokens = torch.randint(0, 97, (2, 10))
    torch.testing.assert_close(ours(tokens)[..., :97], reference(tokens).logits, rtol=0, atol=1e-10)


def test_from_gpt2_reads_the_heads_from_the_model_or_its_config():
    """48 wide with 2 heads of 24: dim / 64 would be wrong (and is not even an integer), n_head is right."""
    reference = random_gpt2(dim=48, heads=2)
    tokens = torch.randint(0, 97, (2, 12))
    expected = reference(tokens).logits
    from_model = GPT.from_gpt2(reference).double().eval()
    from_config = GPT.from_gpt2(reference.state_dict(), gpt2_config=reference.config).double().eval()
    for ours in (from_model, from_config):
        assert ours.config.num_heads == 2
        torch.testing.assert_close(ours(tokens), expected, rtol=0, atol=1e-10)


def test_from_gpt2_refuses_to_guess_the_heads_of_a_width_not_a_multiple_of_64():
    state_dict = random_gpt2(dim=48, heads=2).state_dict()
    with pytest.raises(ValueError, match="48 wide, not a multiple of 64, so the number of heads cannot be inferred"):
        GPT.from_gpt2(state_dict)
    assert GPT.from_gpt2(state_dict, num_heads=2).config.num_heads == 2
    with pytest.raises(ValueError, match="num_heads=4 contradicts the GPT-2 config's n_head=2"):
        GPT.from_gpt2(random_gpt2(dim=48, heads=2), num_heads=4)


def test_from_gpt2_refuses_an_attention_scale_it_does_not_compute():
    reference = random_gpt2()
    reference.config.scale_attn_by_inverse_layer_idx = True
    with pytest.raises(ValueError, match="scales attention other than by 1/sqrt"):
        GPT.from_gpt2(reference)


def test_from_gpt2_rejects_a_foreign_state_dict():
    with pytest.raises(ValueError, match="Unexpected GPT-2 weight 'h.0.mlp.w3.weight'"):
        GPT.from_gpt2({"wte.weight": torch.zeros(4, 8), "wpe.weight": torch.zeros(4, 8), "h.0.mlp.w3.weight": torch.zeros(1)})


def test_vit_with_timm_eps_computes_timm_vision_transformer_logits():
    torch.manual_seed(0)
    reference = (
        timm.models.vision_transformer.VisionTransformer(
            img_size=8,
            patch_size=2,
            in_chans=1,
            num_classes=10,
            embed_dim=32,
            depth=2,
            num_heads=4,
            mlp_ratio=2.0,
            qkv_bias=True,
            class_token=True,
            global_pool="token",
        )
        .double()
        .eval()
    )
    with torch.no_grad():
        for p in reference.parameters():
            p.copy_(torch.randn_like(p) * 0.2 + (1.0 if p.dim() == 1 else 0.0) * 0.5)
    ours = (
        VisionTransformer(
            ViTConfig(
                image_size=8,
                patch_size=2,
                in_channels=1,
                num_classes=10,
                dim=32,
                depth=2,
                num_heads=4,
                mlp_ratio=2.0,
                norm_eps=1e-6,
            )
        )
        .double()
        .eval()
    )
    ours.load_state_dict(timm_vit_state_dict(reference.state_dict()))
    images = torch.randn(4, 1, 8, 8, dtype=torch.float64)
    expected = reference(images)
    torch.testing.assert_close(ours(images), expected, rtol=0, atol=1e-10)
    # timm's LayerNorm eps (1e-6) differs from torch's default (1e-5): with 1e-5 the logits move.
    default_eps = (
        VisionTransformer(
            ViTConfig(image_size=8, patch_size=2, in_channels=1, num_classes=10, dim=32, depth=2, num_heads=4, mlp_ratio=2.0)
        )
        .double()
        .eval()
    )
    default_eps.load_state_dict(ours.state_dict())
    assert (default_eps(images) - expected).abs().max() > 1e-9


def random_timm_rope_vit(indexing="xy"):
    """timm's axial RoPE ViT as `vit_*_patch16_rope_224` builds it (class token, no absolute positions,
    temperature 100), tiny and without layer scale, every weight random. timm computes its rotary table in
    float32 even in a float64 model (about 2e-9 on these logits), so it is rebuilt in float64 with timm's
    own function and timm's frequencies, 100^(-i/(d_h/4)), computed in float64."""
    torch.manual_seed(0)
    reference = (
        timm.models.eva.Eva(
            img_size=8,
            patch_size=2,
            in_chans=1,
            num_classes=10,
            embed_dim=32,
            depth=2,
            num_heads=2,
            mlp_ratio=2.0,
            attn_type="rope",
            qkv_bias=True,
            class_token=True,
            global_pool="token",
            use_abs_pos_emb=False,
            use_rot_pos_emb=True,
            rope_grid_indexing=indexing,
            rope_temperature=100.0,
        )
        .double()
        .eval()
    )
    with torch.no_grad():
        for p in reference.parameters():
            p.copy_(torch.randn_like(p) * 0.2 + (1.0 if p.dim() == 1 else 0.0) * 0.5)
    bands = 1.0 / 100.0 ** (torch.arange(4, dtype=torch.float64) / 4)  # d_h / 4 = 4 per axis
    sin, cos = timm.layers.pos_embed_sincos.build_rotary_pos_embed(
        [4, 4], bands=bands, in_pixels=False, grid_indexing=indexing, dtype=torch.float64
    )
    reference.rope.pos_embed = torch.cat([sin, cos], dim=-1)
    return reference


def test_vit_with_rope_computes_timm_axial_rope_vit_logits():
    reference = random_timm_rope_vit()
    config = ViTConfig(
        image_size=8,
        patch_size=2,
        in_channels=1,
        num_classes=10,
        dim=32,
        depth=2,
        num_heads=2,
        mlp_ratio=2.0,
        norm_eps=1e-6,
        position="rope",
        rope_base=100.0,
    )
    ours = VisionTransformer(config).double().eval()
    ours.load_state_dict(timm_rope_vit_state_dict(reference.state_dict(), num_heads=2))
    images = torch.randn(4, 1, 8, 8, dtype=torch.float64)
    expected = reference(images)
    torch.testing.assert_close(ours(images), expected, rtol=0, atol=1e-10)
    # Without the permutation to rotate-half order the pairs rotate other columns: another function.
    unpermuted = VisionTransformer(config).double().eval()
    unpermuted.load_state_dict(timm_vit_state_dict(reference.state_dict()))
    assert (unpermuted(images) - expected).abs().max() > 1e-6
    # Columns first, then rows, is timm's "xy" order (RoPE-ViT's); its "ij" order is another layout.
    rows_first = random_timm_rope_vit(indexing="ij")
    assert (ours(images) - rows_first(images)).abs().max() > 1e-6


def test_from_gpt2_ports_an_mlp_of_another_width_than_4d():
    """GPT-2's n_inner (None: 4 x n_embd) is the MLP's width, read from the weights (a state dict alone too)."""
    reference = random_gpt2(n_inner=100)
    tokens = torch.randint(0, 97, (2, 10))
    for source in (reference, reference.state_dict()):
        ours = GPT.from_gpt2(source, num_heads=4).double().eval()
        assert ours.config.mlp_hidden == 100
        torch.testing.assert_close(ours(tokens), reference(tokens).logits, rtol=1e-10, atol=1e-10)
