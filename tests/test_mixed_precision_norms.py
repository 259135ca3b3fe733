"""bf16 training as on a GPU, where autocast runs LayerNorm and RMSNorm in float32 and returns float32: CPU
autocast keeps them in bf16, so a CPU run alone would never meet a float32 norm output feeding bf16 work
(qk_norm's queries and keys beside bf16 values, the nonlinear query's norms, a final norm before the
head). Here the norms follow CUDA's policy, and every family, with every norm option, every position and
the variants with norms of their own, trains a step in bf16: the loss and every gradient are finite, the
logits are those of float32 within bf16's precision, and the GPT decodes ragged prompts from its cache."""

import pytest
import torch
import torch.nn.functional as F

from lit_attention.modeling.gpt import GPT, GPTConfig
from lit_attention.modeling.seq2seq import Seq2SeqConfig, Seq2SeqTransformer
from lit_attention.modeling.text_encoder import TextEncoderClassifier, TextEncoderConfig
from lit_attention.modeling.vit import ViTConfig, VisionTransformer

BF16 = dict(device_type="cpu", dtype=torch.bfloat16)


@pytest.fixture
def cuda_norm_policy(monkeypatch) -> list[torch.dtype]:
    """F.layer_norm and F.rms_norm in float32 under autocast, returning float32, as CUDA's autocast runs them;
    the dtypes of the inputs they were given under autocast (to show the policy was applied at all)."""
    layer_norm, rms_norm = F.layer_norm, F.rms_norm
    given: list[torch.dtype] = []

    def in_float32(norm):
        def run(input, normalized_shape, weight=None, *args, **kwargs):
            if not torch.is_autocast_enabled("cpu"):
                return norm(input, normalized_shape, weight, *args, **kwargs)
            given.append(input.dtype)
            with torch.autocast("cpu", enabled=False):
                rest = [a.float() if torch.is_tensor(a) else a for a in args]  # layer_norm's bias, the eps
                return norm(input.float(), normalized_shape, None if weight is None else weight.float(), *rest, **kwargs)

        return run

    monkeypatch.setattr(F, "layer_norm", in_float32(layer_norm))
    monkeypatch.setattr(F, "rms_norm", in_float32(rms_norm))
    return given


def families():
    """(name, build(attention, options), inputs, labels' size): tiny models of every family."""
    tokens = torch.randint(3, 30, (2, 8))
    images = torch.randn(2, 1, 8, 8)
    return [
        ("gpt", lambda a, o: GPT(GPTConfig(vocab_size=30, max_len=8, dim=32, depth=2, num_heads=4, **o), attention=a), (tokens,)),
        (
            "text",
            lambda a, o: TextEncoderClassifier(
                TextEncoderConfig(vocab_size=30, max_len=9, num_classes=3, pad_id=0, dim=32, depth=2, num_heads=4, **o),
                attention=a,
            ),
            (tokens, tokens == 3),
        ),
        (
            "seq2seq",
            lambda a, o: Seq2SeqTransformer(
                Seq2SeqConfig(
                    pad_id=0,
                    bos_id=1,
                    eos_id=2,
                    vocab_size=30,
                    max_src_len=8,
                    max_tgt_len=8,
                    dim=32,
                    encoder_depth=1,
                    decoder_depth=1,
                    num_heads=4,
                    **o,
                ),
                attention=a,
            ),
            (tokens, tokens),
        ),
        (
            "vit",
            lambda a, o: VisionTransformer(
                ViTConfig(
                    num_classes=3,
                    image_size=8,
                    in_channels=1,
                    patch_size=2,
                    dim=32,
                    depth=2,
                    num_heads=4,
                    **{k: v for k, v in o.items() if k != "position"},
                ),
                attention=a,
            ),
            (images,),
        ),
    ]


OPTIONS = [
    {"norm": "layernorm"},
    {"norm": "rmsnorm", "qk_norm": True},
    {"qk_norm": True, "position": "rope"},
    {"norm": "rmsnorm", "position": "alibi"},
]
VARIANTS = ["standard", "nonlinear_query", "super", "standard,kv_heads=2"]


@pytest.mark.slow  # 4 families x 4 option sets x 4 variants, each a bf16 step and a float32 forward
@pytest.mark.parametrize("family", families(), ids=lambda f: f[0])
def test_every_family_trains_a_bf16_step_with_norms_in_float32(family, cuda_norm_policy, monkeypatch):
    name, build, inputs = family
    sdpa, seen = F.scaled_dot_product_attention, []

    def spy(q, k, v, *args, **kwargs):
        seen.append((q.dtype, k.dtype, v.dtype))
        return sdpa(q, k, v, *args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    for options in OPTIONS:
        if name == "vit" and options.get("position") == "alibi":
            continue  # the ViT's positions are learned or rope
        for variant in VARIANTS:
            torch.manual_seed(0)
            model = build(variant, options).eval()  # no dropout: the two forwards see the same network
            reference = model(*inputs).float().detach()
            seen.clear()
            cuda_norm_policy.clear()
            with torch.autocast(**BF16):
                logits = model(*inputs)
            # The norms ran under the policy: the residual stream's in float32 (it stays float32 under autocast),
            # qk_norm's and the nonlinear query's on bf16 projections, which CPU autocast would keep in bf16.
            assert cuda_norm_policy, (name, variant, options)
            if options.get("qk_norm") or variant == "nonlinear_query":
                assert torch.bfloat16 in cuda_norm_policy, (name, variant, options, cuda_norm_policy)
            loss = logits.float().square().mean()
            loss.backward()
            where = f"{name} {variant} {options}"
            assert seen, where
            assert torch.isfinite(loss), where
            assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None), where
            torch.testing.assert_close(logits.float(), reference, rtol=0.1, atol=0.1, msg=where)
            if name == "gpt":  # and decoding from its cache, prompts of two lengths (a masked path)
                prompts, padding = inputs[0][:, :4], torch.tensor([[True, False, False, False], [False] * 4])
                with torch.no_grad(), torch.autocast(**BF16):
                    assert model.generate(prompts, 3, padding_mask=padding).shape == (2, 7), where
