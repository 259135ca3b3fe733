"""Training steps per second of the quickstart models: torch.compile against eager, bf16 autocast
against float32, on this machine's CPU (or a GPU with --device cuda).

    python benchmarks/compiled_training.py

Models at the quickstart recipes' sizes: the ViT of vit_digits.yaml (image 8x8, 1 channel, patch 2,
d=64, depth 4, 4 heads, mlp_ratio 2, 10 classes, batch 64) and the GPT of gpt_stdlib.yaml (vocab 256,
context 128, d=128, depth 4, 4 heads, batch 32). A step is forward, cross-entropy, backward and AdamW,
in a plain loop (the models are plain nn.Modules). `compiled` is torch.compile(model) with the
default (inductor) backend; its first steps, which compile forward and backward, are timed apart
and excluded from the steps/s (inductor's on-disk cache starts empty unless --warm-compile-cache). Every configuration trains its own copy of the same initial weights,
and repeats alternate between configurations.

One thread by default: on a CPU shared with other jobs, two OpenMP threads on two busy cores made
each of the ViT's many small parallel regions wait for a descheduled thread (70x slower steps,
eager included, in a first run); one thread measures the code rather than the neighbours.
"""

from __future__ import annotations

import argparse
import copy
import os
import tempfile
import time

import torch
import torch.nn.functional as F
from timing import hardware, median_interleaved, synchronize

from lit_attention.modeling import GPT, VisionTransformer
from lit_attention.modeling import GPTConfig, ViTConfig

CONFIGURATIONS = (("eager", "float32"), ("compiled", "float32"), ("eager", "bfloat16"), ("compiled", "bfloat16"))


def vit_task(args, device):
    model = VisionTransformer(
        ViTConfig(
            image_size=8, patch_size=2, in_channels=1, num_classes=10, dim=args.vit_dim, depth=4, num_heads=4, mlp_ratio=2.0
        )
    )
    images = torch.randn(args.vit_batch, 1, 8, 8, device=device)
    labels = torch.randint(0, 10, (args.vit_batch,), device=device)
    return "ViT (quickstart vit_digits)", model, lambda m: F.cross_entropy(m(images).float(), labels)


def gpt_task(args, device):
    model = GPT(GPTConfig(vocab_size=256, max_len=args.context, dim=args.gpt_dim, depth=4, num_heads=4))
    tokens = torch.randint(0, 256, (args.gpt_batch, args.context + 1), device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    return "GPT (quickstart gpt_stdlib)", model, lambda m: F.cross_entropy(m(inputs).float().flatten(0, 1), targets.flatten())


def train_step(model, loss_of, dtype, device):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = loss_of(model)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--vit-dim", type=int, default=64)
    parser.add_argument("--vit-batch", type=int, default=64)
    parser.add_argument("--gpt-dim", type=int, default=128)
    parser.add_argument("--gpt-batch", type=int, default=32)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--compile-steps", type=int, default=2, help="steps timed as compilation (excluded)")
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend (the smoke test uses eager)")
    parser.add_argument(
        "--warm-compile-cache",
        action="store_true",
        help="keep inductor's on-disk cache (default: an empty one, so compilation costs what a first run pays)",
    )
    args = parser.parse_args()
    if not args.warm_compile_cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-")
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"# training steps (forward + loss + backward + AdamW), on {hardware(device)}")
    print(
        f"# torch {torch.__version__}, torch.compile backend {args.backend}; median of {args.repeats} interleaved "
        f"repeats x {args.calls} steps; compilation = the first {args.compile_steps} compiled steps, excluded"
    )
    print()
    print("| model | configuration | steps/s | vs eager float32 | compilation s |")
    print("|---|---|---|---|---|")
    for make_task in (vit_task, gpt_task):
        torch.manual_seed(0)
        name, model, loss_of = make_task(args, device)
        model.to(device).train()
        steps, compile_seconds = {}, {}
        for mode, dtype_name in CONFIGURATIONS:
            copy_ = copy.deepcopy(model)
            runnable = torch.compile(copy_, backend=args.backend) if mode == "compiled" else copy_
            key = f"{mode} {dtype_name}"
            steps[key] = train_step(runnable, loss_of, getattr(torch, dtype_name), device)
            if mode == "compiled":
                synchronize(device)
                start = time.perf_counter()
                for _ in range(args.compile_steps):
                    steps[key]()
                synchronize(device)
                compile_seconds[key] = time.perf_counter() - start
        seconds = median_interleaved(steps, warmup=2, calls=args.calls, repeats=args.repeats, device=device)
        base = 1.0 / seconds["eager float32"]
        for key, value in seconds.items():
            rate = 1.0 / value
            compiled = f"{compile_seconds[key]:.1f}" if key in compile_seconds else ""
            print(f"| {name} | {key} | {rate:.1f} | {rate / base:.2f} | {compiled} |", flush=True)
        torch._dynamo.reset()


if __name__ == "__main__":
    main()
