"""torch.compile traces every variant and model family in one graph (no graph breaks)."""

import pytest
import torch

from lit_attention.modeling.attention import MultiHeadAttention, list_presets
from lit_attention.modeling import GPT, Seq2SeqTransformer, TextEncoderClassifier, VisionTransformer
from lit_attention.modeling import GPTConfig, Seq2SeqConfig, TextEncoderConfig, ViTConfig
from option_cases import option_cases  # tests/ is on sys.path under pytest

SMALL = dict(dim=32, num_heads=4, mlp_ratio=2.0, dropout=0.0, drop_path=0.0)  # deterministic in train mode


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("variant", list_presets())
@pytest.mark.slow
def test_attention_compiles_in_one_graph(variant, causal):
    torch.manual_seed(0)
    layer = MultiHeadAttention(32, 4, variant, max_len=16, causal=causal)
    x = torch.randn(2, 12, 32)
    padding = torch.arange(12)[None] >= torch.tensor([12, 7])[:, None]
    # fullgraph=True turns any graph break into an error; the eager backend skips code generation.
    compiled = torch.compile(layer, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(x, key_padding_mask=padding), layer(x, key_padding_mask=padding))
    compiled(x).sum().backward()
    assert layer.out_proj.weight.grad is not None


@pytest.mark.slow  # four models traced each
@pytest.mark.parametrize("variant", ["standard", "super", "nonlinear_query"])
def test_model_families_compile_in_one_graph(variant):
    torch.manual_seed(0)
    tokens = torch.randint(1, 50, (2, 12))
    cases = [
        (GPT(GPTConfig(vocab_size=50, max_len=12, depth=2, **SMALL), attention=variant), (tokens,)),
        (
            TextEncoderClassifier(
                TextEncoderConfig(pad_id=0, vocab_size=50, max_len=12, num_classes=3, depth=2, **SMALL), attention=variant
            ),
            (tokens, tokens == 0),
        ),
        (
            VisionTransformer(
                ViTConfig(image_size=8, patch_size=2, in_channels=1, num_classes=5, depth=2, **SMALL), attention=variant
            ),
            (torch.randn(2, 1, 8, 8),),
        ),
        (
            Seq2SeqTransformer(
                Seq2SeqConfig(
                    pad_id=0,
                    bos_id=1,
                    eos_id=2,
                    vocab_size=50,
                    max_src_len=12,
                    max_tgt_len=12,
                    encoder_depth=1,
                    decoder_depth=1,
                    **SMALL,
                ),
                attention=variant,
            ),
            (tokens, tokens[:, :10], tokens == 0),
        ),
    ]
    for model, inputs in cases:
        compiled = torch.compile(model, backend="eager", fullgraph=True)
        torch.testing.assert_close(compiled(*inputs), model(*inputs))


@pytest.mark.slow  # some 28 one-block models traced
def test_every_block_option_value_compiles_in_one_graph_with_every_preset():
    """Each value of position, norm, mlp, qk_norm (read from the configs) and kv_heads meets each preset in
    one of the models (option_cases.py): no graph break in its forward."""
    for case in option_cases():
        torch._dynamo.reset()
        model = case.build()
        compiled = torch.compile(model, backend="eager", fullgraph=True)
        torch.testing.assert_close(compiled(*case.inputs()), model(*case.inputs()), msg=lambda m: f"{case}: {m}")
