"""torch.compile traces every variant and model family in one graph (no graph breaks).

Models are traced several at a time, as one module that calls each (`Together`): fullgraph=True still
turns a graph break in any of them into an error, and each output is still checked against its eager
model, but each torch.compile's fixed cost (guards, bytecode, a fresh dynamo) is paid once per group."""

import pytest
import torch
from torch import nn

from lit_attention.modeling.attention import MultiHeadAttention, list_presets
from lit_attention.modeling import GPT, Seq2SeqTransformer, TextEncoderClassifier, VisionTransformer
from lit_attention.modeling import GPTConfig, Seq2SeqConfig, TextEncoderConfig, ViTConfig
from option_cases import option_cases  # tests/ is on sys.path under pytest

SMALL = dict(dim=32, num_heads=4, mlp_ratio=2.0, dropout=0.0, drop_path=0.0)  # deterministic in train mode


class Together(nn.Module):
    """Calls each model on its own inputs: one frame for dynamo to trace them all in."""

    def __init__(self, models: list[nn.Module]) -> None:
        super().__init__()
        self.models = nn.ModuleList(models)

    def forward(self, inputs: list[tuple]) -> list:
        return [model(*args) for model, args in zip(self.models, inputs)]


def assert_compiles_in_one_graph(models: list[nn.Module], inputs: list[tuple], names: list[str]) -> list:
    """Trace `models` together in one graph and check each output against its eager model's; the compiled outputs."""
    together = Together(models)
    # fullgraph=True turns any graph break into an error; the eager backend skips code generation.
    compiled = torch.compile(together, backend="eager", fullgraph=True)(inputs)
    for name, got, expected in zip(names, compiled, together(inputs)):
        torch.testing.assert_close(got, expected, msg=lambda m: f"{name}: {m}")
    return compiled


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.slow
def test_attention_compiles_in_one_graph(causal):
    """Every preset's layer, with a padding mask and without one, forward and backward."""
    torch.manual_seed(0)
    presets = list_presets()
    layers = [MultiHeadAttention(32, 4, variant, max_len=16, causal=causal) for variant in presets]
    x = torch.randn(2, 12, 32)
    padding = torch.arange(12)[None] >= torch.tensor([12, 7])[:, None]
    inputs = [(x, padding)] * len(layers) + [(x,)] * len(layers)
    names = [f"{variant}, {kind}" for kind in ("padded", "no padding") for variant in presets]
    outputs = assert_compiles_in_one_graph([*layers, *layers], inputs, names)
    sum(output.sum() for output in outputs).backward()
    for variant, layer in zip(presets, layers):
        assert layer.out_proj.weight.grad is not None, variant


@pytest.mark.slow  # four models traced each
@pytest.mark.parametrize("variant", ["standard", "super", "nonlinear_query"])
def test_model_families_compile_in_one_graph(variant):
    torch.manual_seed(0)
    tokens = torch.randint(1, 50, (2, 12))
    cases = [
        (GPT(GPTConfig(vocab_size=50, max_len=12, depth=2, **SMALL), attention=variant), (tokens,)),
        (TextEncoderClassifier(TextEncoderConfig(pad_id=0, vocab_size=50, max_len=12, num_classes=3, depth=2, **SMALL), attention=variant), (tokens, tokens == 0)),
        (VisionTransformer(ViTConfig(image_size=8, patch_size=2, in_channels=1, num_classes=5, depth=2, **SMALL), attention=variant),
         (torch.randn(2, 1, 8, 8),)),
        (Seq2SeqTransformer(Seq2SeqConfig(pad_id=0, bos_id=1, eos_id=2, vocab_size=50, max_src_len=12, max_tgt_len=12, encoder_depth=1, decoder_depth=1, **SMALL), attention=variant),
         (tokens, tokens[:, :10], tokens == 0)),
    ]
    assert_compiles_in_one_graph([model for model, _ in cases], [inputs for _, inputs in cases],
                                 [type(model).__name__ for model, _ in cases])


@pytest.mark.slow  # some 28 one-block models traced
def test_every_block_option_value_compiles_in_one_graph_with_every_preset():
    """Each value of position, norm, mlp, qk_norm (read from the configs) and kv_heads meets each preset in
    one of the models (option_cases.py): no graph break in its forward. A preset's models are traced together."""
    cases = option_cases()
    for preset in list_presets():
        mine = [case for case in cases if case.variant.partition(",")[0] == preset]
        torch._dynamo.reset()
        assert_compiles_in_one_graph([case.build() for case in mine], [case.inputs() for case in mine],
                                     [str(case) for case in mine])
