"""Training-step throughput of our models next to the implementations users would pick instead.

    pip install -e ".[bench]"                      # transformers and timm
    python benchmarks/reference_models.py          # GPT vs GPT2LMHeadModel, ViT vs timm
    python benchmarks/reference_models.py --models llama   # the Llama-style GPT vs LlamaForCausalLM
    python benchmarks/reference_models.py --device cuda --dtype bfloat16 --gpt-dim 768 --gpt-depth 12

Both sides compute the same function: our GPT (bias, tanh GELU) gets GPT2LMHeadModel's weights through
GPT.from_gpt2, our ViT (LayerNorm eps 1e-6) gets timm's through models/ports.py, and the script checks
that the logits agree before timing (float32: to 1e-4). The Llama-style GPT (RoPE, RMSNorm, SwiGLU,
grouped heads, untied head as Llama's) gets a LlamaForCausalLM's weights through GPT.from_llama, at the
GPT's sizes (--gpt-*, --context, --vocab) with --llama-kv-heads key/value heads. Identical sizes, no dropout, the same dtype,
threads and optimizer (AdamW); every step is forward + cross-entropy + backward + optimizer step. Both
use scaled_dot_product_attention. Steps are interleaved and the median is reported with the ratio
ours / reference.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from timing import header, median_interleaved

from lit_attention.modeling import GPT, VisionTransformer
from lit_attention.modeling.ports import timm_vit_state_dict
from lit_attention.modeling import ViTConfig


def train_step(model, optimizer, forward):
    def step():
        loss = forward(model)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def same_function(ours, reference, ours_forward, ref_forward, device) -> None:
    """Both models give the same loss on the benchmark's batch before either is trained."""
    with torch.no_grad():
        ours_loss = ours_forward(ours.to(device).eval()).item()
        ref_loss = ref_forward(reference.to(device).eval()).item()
    if abs(ours_loss - ref_loss) > 1e-4 * max(1.0, abs(ref_loss)):
        raise SystemExit(f"the models compute different functions: loss {ours_loss} vs {ref_loss}")


def count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def language_model_losses(args, device, dtype):
    """The next-token loss of one random batch, as our GPT and as a transformers causal LM compute it."""
    tokens = torch.randint(0, args.vocab, (args.batch, args.context + 1), device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    def loss(logits):
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())

    def ours_forward(model):
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            return loss(model(inputs))

    def reference_forward(model):
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            return loss(model(input_ids=inputs).logits)

    return ours_forward, reference_forward


def gpt_pair(args, device, dtype):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=args.vocab,
        n_positions=args.context,
        n_embd=args.gpt_dim,
        n_layer=args.gpt_depth,
        n_head=args.gpt_heads,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="sdpa",
    )
    reference = GPT2LMHeadModel(config)
    assert reference.config._attn_implementation == "sdpa"
    ours = GPT.from_gpt2(reference.state_dict(), num_heads=args.gpt_heads)
    ours_forward, reference_forward = language_model_losses(args, device, dtype)
    return (
        "GPT",
        "transformers GPT2LMHeadModel",
        ours,
        reference,
        ours_forward,
        reference_forward,
        args.batch * args.context,
        "tokens/s",
    )


def llama_pair(args, device, dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    from lit_attention.modeling.blocks import mlp_hidden_width

    config = LlamaConfig(
        vocab_size=args.vocab,
        hidden_size=args.gpt_dim,
        num_hidden_layers=args.gpt_depth,
        intermediate_size=mlp_hidden_width(args.gpt_dim, 4.0, "swiglu"),
        num_attention_heads=args.gpt_heads,
        num_key_value_heads=args.llama_kv_heads,
        max_position_embeddings=args.context,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="sdpa",
    )
    reference = LlamaForCausalLM(config)
    assert reference.config._attn_implementation == "sdpa"
    ours = GPT.from_llama(reference)
    ours_forward, reference_forward = language_model_losses(args, device, dtype)
    return (
        "Llama-style GPT",
        "transformers LlamaForCausalLM",
        ours,
        reference,
        ours_forward,
        reference_forward,
        args.batch * args.context,
        "tokens/s",
    )


def vit_pair(args, device, dtype):
    from timm.models.vision_transformer import VisionTransformer as TimmViT

    reference = TimmViT(
        img_size=32,
        patch_size=4,
        in_chans=3,
        num_classes=args.classes,
        embed_dim=args.vit_dim,
        depth=args.vit_depth,
        num_heads=args.vit_heads,
        mlp_ratio=4.0,
        qkv_bias=True,
        class_token=True,
        global_pool="token",
    )
    ours = VisionTransformer(
        ViTConfig(
            image_size=32,
            patch_size=4,
            in_channels=3,
            num_classes=args.classes,
            dim=args.vit_dim,
            depth=args.vit_depth,
            num_heads=args.vit_heads,
            drop_path=0.0,
            norm_eps=1e-6,
        )
    )
    ours.load_state_dict(timm_vit_state_dict(reference.state_dict()))
    images = torch.randn(args.batch, 3, 32, 32, device=device)
    labels = torch.randint(0, args.classes, (args.batch,), device=device)

    def forward(model):
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            logits = model(images)
        return F.cross_entropy(logits.float(), labels)

    return "ViT", "timm VisionTransformer", ours, reference, forward, forward, args.batch, "images/s"


PAIRS = {"gpt": gpt_pair, "vit": vit_pair, "llama": llama_pair}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--gpt-dim", type=int, default=256)
    parser.add_argument("--gpt-depth", type=int, default=4)
    parser.add_argument("--gpt-heads", type=int, default=4)
    parser.add_argument("--models", nargs="+", default=["gpt", "vit"], choices=list(PAIRS))
    parser.add_argument("--llama-kv-heads", type=int, default=2)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--vit-dim", type=int, default=192)
    parser.add_argument("--vit-depth", type=int, default=6)
    parser.add_argument("--vit-heads", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    print(header("training step (forward + loss + backward + AdamW)", device, args.dtype, args.repeats, args.calls))
    print()
    print("| model | ours params | reference params | ours | reference | ratio ours / reference |")
    print("|---|---|---|---|---|---|")
    for make_pair in (PAIRS[name] for name in args.models):
        torch.manual_seed(0)
        name, ref_name, ours, reference, ours_forward, ref_forward, items, unit = make_pair(args, device, dtype)
        same_function(ours, reference, ours_forward, ref_forward, device)
        steps = {}
        for key, model, forward in (("ours", ours, ours_forward), ("reference", reference, ref_forward)):
            model.to(device).train()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
            steps[key] = train_step(model, optimizer, forward)
        times = median_interleaved(steps, args.warmup, args.calls, args.repeats, device)
        ours_rate, ref_rate = items / times["ours"], items / times["reference"]
        print(
            f"| {name} vs {ref_name} | {count(ours):,} | {count(reference):,} | {ours_rate:,.0f} {unit} | "
            f"{ref_rate:,.0f} {unit} | {ours_rate / ref_rate:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
