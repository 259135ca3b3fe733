"""The block's norm and MLP options (blocks.py, block_options.py): what SwiGLU computes, its hidden width,
which norms each family builds, and what the parameter and FLOP counts make of them."""

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from lit_attention.errors import ConfigError
from lit_attention.modeling import GPT, GPTConfig, Seq2SeqConfig, Seq2SeqTransformer, TextEncoderClassifier
from lit_attention.modeling import TextEncoderConfig, ViTConfig, VisionTransformer
from lit_attention.modeling.attention import MultiHeadAttention
from lit_attention.modeling.block_options import FAMILIES, family_options
from lit_attention.modeling.blocks import MLP, SwiGLU, TransformerBlock, mlp_hidden_width
from lit_attention.modeling.attention import list_presets
from lit_attention.modeling.variants import resolve_spec
from lit_attention.training.tasks import CausalLanguageModel
from option_cases import option_cases, options_met  # tests/ is on sys.path under pytest

TINY = dict(dim=16, num_heads=2)
VOCAB, LENGTH = 11, 6


def build(config_class, **options):
    """A two-block model of the family whose config is `config_class`, with the data's sizes set."""
    if config_class is GPTConfig:
        return GPT(GPTConfig(vocab_size=VOCAB, max_len=LENGTH, depth=2, **TINY, **options))
    if config_class is TextEncoderConfig:
        return TextEncoderClassifier(
            TextEncoderConfig(vocab_size=VOCAB, max_len=LENGTH, num_classes=3, pad_id=0, depth=2, **TINY, **options)
        )
    if config_class is Seq2SeqConfig:
        return Seq2SeqTransformer(
            Seq2SeqConfig(
                vocab_size=VOCAB,
                max_src_len=LENGTH,
                max_tgt_len=LENGTH,
                pad_id=0,
                bos_id=1,
                eos_id=2,
                encoder_depth=1,
                decoder_depth=1,
                **TINY,
                **options,
            )
        )
    return VisionTransformer(ViTConfig(num_classes=3, image_size=4, in_channels=1, patch_size=2, depth=2, **TINY, **options))


def block_norms(model: nn.Module) -> dict[str, nn.Module]:
    """The model's norms outside attention layers (the blocks' and the final ones), by name."""
    inside = [name for name, m in model.named_modules() if isinstance(m, MultiHeadAttention)]
    return {
        name: m
        for name, m in model.named_modules()
        if isinstance(m, (nn.LayerNorm, nn.RMSNorm)) and not any(name.startswith(f"{prefix}.") for prefix in inside)
    }


def test_swiglu_is_the_down_projection_of_silu_gate_times_up_with_the_gate_first():
    torch.manual_seed(0)
    mlp = SwiGLU(8, 12, bias=True).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    weight, bias = mlp.fc1.weight, mlp.fc1.bias
    gate, up = x @ weight[:12].T + bias[:12], x @ weight[12:].T + bias[12:]  # rows [gate; up]
    expected = (gate * torch.sigmoid(gate) * up) @ mlp.fc2.weight.T + mlp.fc2.bias
    torch.testing.assert_close(mlp(x), expected, rtol=0, atol=1e-12)


def test_hidden_width_is_mlp_hidden_or_derived_from_mlp_ratio_as_llama_does():
    cases = [  # (dim, mlp_ratio, mlp, mlp_hidden) -> width
        ((384, 4.0, "gelu", None), 1536),
        ((384, 4.0, "swiglu", None), 1024),  # 2/3 of 1536, a multiple of 8
        ((64, 4.0, "swiglu", None), 170),  # int(2 * 256 / 3)
        ((16, 2.0, "swiglu", None), 21),  # int(2 * 32 / 3)
        ((4096, 4.0, "swiglu", None), 10922),  # Llama 7B's before its rounding up to 11008
        ((8, 0.125, "swiglu", None), 1),  # int(2 * 1 / 3) = 0 is no width: at least 1
        ((64, 4.0, "gelu", 100), 100),
        ((64, 4.0, "swiglu", 100), 100),
        ((64, 0.001, "gelu", 3), 3),
    ]
    for (dim, ratio, mlp, hidden), width in cases:
        assert mlp_hidden_width(dim, ratio, mlp, hidden) == width, (dim, ratio, mlp, hidden)
        with torch.device("meta"):  # shapes only (Llama's width is large)
            block = TransformerBlock(dim, 2, mlp_ratio=ratio, mlp=mlp, mlp_hidden=hidden)
        assert isinstance(block.mlp, SwiGLU if mlp == "swiglu" else MLP)
        assert (block.mlp.fc1.out_features, block.mlp.fc2.in_features) == ((2 if mlp == "swiglu" else 1) * width, width)
    # mlp_hidden frees the config from mlp_ratio's lower bound (it sets no width then).
    assert GPTConfig(dim=16, mlp_ratio=0.01, mlp_hidden=4).mlp_hidden == 4
    with pytest.raises(ConfigError, match="mlp_ratio=0.01 gives an MLP hidden width"):
        GPTConfig(dim=16, mlp_ratio=0.01)


def test_every_norm_of_every_family_is_the_configs_and_each_option_runs():
    for config_class in FAMILIES.values():
        options = family_options(config_class)
        assert set(options["norm"]) == {"layernorm", "rmsnorm"} and set(options["mlp"]) == {"gelu", "swiglu"}
        default = block_norms(build(config_class))
        assert default and all(type(m) is nn.LayerNorm for m in default.values())  # today's block, unchanged
        for norm in options["norm"]:
            for mlp in options["mlp"]:
                model = build(config_class, norm=norm, mlp=mlp)
                norms = block_norms(model)
                assert list(norms) == list(default), config_class  # the same norms, of the chosen kind
                kind = nn.RMSNorm if norm == "rmsnorm" else nn.LayerNorm
                assert all(type(m) is kind and m.eps == 1e-5 for m in norms.values()), (config_class, norm)
                mlps = [m for m in model.modules() if isinstance(m, (MLP, SwiGLU))]
                assert mlps and all(type(m) is (SwiGLU if mlp == "swiglu" else MLP) for m in mlps)
    # Where the config has norm_eps, every norm takes it.
    for config_class in (GPTConfig, ViTConfig):
        norms = block_norms(build(config_class, norm="rmsnorm", norm_eps=1e-6))
        assert {m.eps for m in norms.values()} == {1e-6} and all(m.weight is not None for m in norms.values())


def test_swiglus_down_projection_gets_gpts_scaled_residual_init():
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=VOCAB, max_len=LENGTH, dim=64, num_heads=2, depth=2, mlp="swiglu", init_std=0.5))
    for block in gpt.blocks:
        assert block.mlp.fc1.weight.std().item() == pytest.approx(0.5, rel=0.05)
        assert block.mlp.fc2.weight.std().item() == pytest.approx(0.5 / 2, rel=0.05)  # 1 / sqrt(2 * depth)


def test_parameter_counts_follow_the_hand_formula():
    d, depth = TINY["dim"], 2
    for norm in ("layernorm", "rmsnorm"):
        for mlp, hidden in (("gelu", None), ("swiglu", None), ("gelu", 20), ("swiglu", 20)):
            gpt = build(GPTConfig, norm=norm, mlp=mlp, mlp_hidden=hidden)  # bias=False: one weight per norm
            h = hidden or {"gelu": 4 * d, "swiglu": 42}[mlp]  # swiglu: int(2 * 64 / 3)
            per_block = 4 * d * d + (3 if mlp == "swiglu" else 2) * d * h + 2 * d
            counts = gpt.parameter_counts()
            assert counts["non_embedding"] == depth * per_block + d, (norm, mlp, hidden)
            assert counts["attention"] == depth * 4 * d * d  # the MLP and norms are no attention parameters


def test_training_flops_follow_the_hand_formula():
    """A step on B sequences of T tokens: 6·B·T per weight of every Linear (forward, and the backward's two
    products), 12·B·T²·d per layer for the scores and the weighted sum (SDPA counted as full, not causal)."""
    d, depth, batch, length = TINY["dim"], 2, 4, 5
    tokens = torch.arange(batch * (length + 1)).remainder(VOCAB).view(batch, length + 1)
    for mlp, hidden in (("gelu", None), ("swiglu", None), ("swiglu", 20)):
        module = CausalLanguageModel(
            net=dict(vocab_size=VOCAB, max_len=LENGTH, depth=depth, **TINY, norm="rmsnorm", mlp=mlp, mlp_hidden=hidden)
        )
        h = hidden or {"gelu": 4 * d, "swiglu": 42}[mlp]
        weights = depth * (4 * d * d + (3 if mlp == "swiglu" else 2) * d * h) + d * VOCAB  # blocks and the head
        expected = 6 * batch * length * weights + 12 * batch * length * length * d * depth
        assert module.flops_of((tokens[:, :-1], tokens[:, 1:])) == expected, (mlp, hidden)


@pytest.mark.slow  # builds eleven tasks and counts a step of each: about 1 s of CPU
def test_flops_are_counted_with_every_position_of_every_family():
    """A task counts a step's FLOPs on a meta-device copy of its model (tasks/base.py, flops_of), at the first
    training batch of every fit: each position option must run there. ALiBi's float mask asked autocast about the
    meta device, which torch refuses, so every fit with ALiBi failed at its first batch (the ALiBi reference card
    found it). Positions add no matrix products: the GPT's count is the hand formula's for each."""
    from lit_attention.training.tasks import Seq2SeqTranslator, TextClassifier

    d, depth, batch, length = TINY["dim"], 2, 4, 5
    tokens = torch.arange(batch * (length + 1)).remainder(VOCAB - 3).add(3).view(batch, length + 1)
    padding = torch.zeros(batch, length, dtype=torch.bool)
    padding[0, -2:] = True  # one padded row: the masks of the encoders are built, as on real text
    weights = depth * 6 * d * d * 2 + d * VOCAB  # 4 d² of attention and 8 d² of the GELU MLP, and the head
    for position in family_options(GPTConfig)["position"]:
        module = CausalLanguageModel(net=dict(vocab_size=VOCAB, max_len=LENGTH, depth=depth, **TINY, position=position))
        expected = 6 * batch * length * weights + 12 * batch * length * length * d * depth
        assert module.flops_of((tokens[:, :-1], tokens[:, 1:])) == expected, position
    for position in family_options(TextEncoderConfig)["position"]:
        net = dict(vocab_size=VOCAB, max_len=LENGTH, num_classes=3, pad_id=0, depth=depth, **TINY, position=position)
        text = {"tokens": tokens[:, :-1], "padding_mask": padding, "padded": True, "labels": torch.zeros(batch).long()}
        assert TextClassifier(net=net).flops_of(text) > 0, position
    for position in family_options(Seq2SeqConfig)["position"]:
        net = dict(vocab_size=VOCAB, max_src_len=LENGTH, max_tgt_len=LENGTH, pad_id=0, bos_id=1, eos_id=2, **TINY)
        pair = {"src": tokens[:, :-1], "tgt_in": tokens[:, :-1], "src_padding_mask": padding, "tgt_padding_mask": padding}
        translator = Seq2SeqTranslator(net=dict(net, encoder_depth=1, decoder_depth=1, position=position))
        assert translator.flops_of(pair) > 0, position


def test_the_option_cases_meet_every_value_with_every_preset():
    """What the compile, DDP and inspect guarantees rely on: read from the configs, none written out here."""
    met = options_met(option_cases())
    assert set(met) == set(list_presets())
    for preset, pairs in met.items():
        for config_class in FAMILIES.values():
            for name, values in family_options(config_class).items():
                assert {(name, v) for v in values} <= pairs, (preset, name)
        spec = resolve_spec(preset)
        assert (("kv_heads", 1) in pairs) == (spec.key == spec.value == "linear"), preset


@pytest.mark.slow  # DDP's first wrap takes seconds, then some 28 models take two steps each
def test_every_parameter_gets_a_gradient_under_ddp_for_every_option_value_and_preset(tmp_path):
    """DDP (Lightning's default, find_unused_parameters=False) needs every parameter to take part in the loss.
    A real gloo process group of one process: its reducer refuses the second step when the first left a
    parameter without a gradient. Beyond it, no parameter's gradient is all zeros."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        for case in option_cases():
            model = case.build()
            wrapped = DistributedDataParallel(model)
            for _ in range(2):
                case.loss(wrapped).backward()
            silent = [name for name, p in model.named_parameters() if p.grad is None or not p.grad.any()]
            assert not silent, f"{case}: {silent}"
    finally:
        dist.destroy_process_group()
