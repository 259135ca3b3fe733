"""Forward+backward time of one attention layer for every preset, as a ratio to `standard`.

    python benchmarks/attention_layers.py                       # B=8, T=256, d=512, h=8
    python benchmarks/attention_layers.py --seq-lens 64 256 1024 --dims 256 512 768

Every variant is timed in the same run, interleaved, and reported as the median of several
repeats; the FLOP ratio next to it is docs/DESIGN.md §2's cost model, so the two columns say whether
the measured saving matches the arithmetic one. Memory is what one training step keeps for the
backward pass (activations saved by autograd, counted on any device); on a GPU the peak allocated
during the step is printed as well.
"""

from __future__ import annotations

import argparse

import torch
from timing import header, median_interleaved

from lit_attention.modeling.attention import MultiHeadAttention, list_presets
from lit_attention.modeling.costs import attention_flops


def saved_for_backward_bytes(layer: torch.nn.Module, x: torch.Tensor) -> int:
    """Bytes of the distinct tensors autograd keeps between forward and backward, leaving out the
    parameters and the input (the same for every variant): the activation memory a layer costs."""
    excluded = {p.untyped_storage().data_ptr() for p in layer.parameters()} | {x.untyped_storage().data_ptr()}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in excluded:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = layer(x)
    out.sum().backward()
    return sum(storages.values())


def peak_step_bytes(step, device: torch.device) -> int | None:
    """Peak memory allocated during one forward+backward above what was allocated before (GPU only)."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before


def benchmark(batch, seq_len, dim, heads, causal, dtype, device, warmup, steps, repeats):
    layers = {}
    for name in list_presets():
        torch.manual_seed(0)
        layers[name] = MultiHeadAttention(dim, heads, name, max_len=seq_len, causal=causal).to(device, dtype)
    x = torch.randn(batch, seq_len, dim, device=device, dtype=dtype, requires_grad=True)
    steps_by_name = {name: (lambda layer=layer: layer(x).sum().backward()) for name, layer in layers.items()}
    times = median_interleaved(steps_by_name, warmup, steps, repeats, device)
    flops = {name: attention_flops(name, seq_len, dim, num_heads=heads) for name in layers}
    saved = {name: saved_for_backward_bytes(layer, x) for name, layer in layers.items()}
    peak = {name: peak_step_bytes(step, device) for name, step in steps_by_name.items()}
    return [
        (name, times[name], times[name] / times["standard"], flops[name] / flops["standard"], saved[name], peak[name])
        for name in layers
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[256])
    parser.add_argument("--dims", type=int, nargs="+", default=[512])
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--causal", action="store_true", help="causal self-attention (decoder)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="calls per timed repeat")
    parser.add_argument("--repeats", type=int, default=7, help="timed repeats; the median is reported")
    args = parser.parse_args()
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    print(header(f"attention layer forward+backward, causal={args.causal}", device, args.dtype, args.repeats, args.steps))
    print()
    mib = 2.0**20
    gpu = device.type == "cuda"
    print(
        "| B | T | d | h | variant | ms / call | time ratio | FLOP ratio | saved for backward MiB |"
        + (" peak MiB |" if gpu else "")
    )
    print("|---|---|---|---|---|---|---|---|---|" + ("---|" if gpu else ""))
    for dim in args.dims:
        for seq_len in args.seq_lens:
            rows = benchmark(
                args.batch, seq_len, dim, args.heads, args.causal, dtype, device, args.warmup, args.steps, args.repeats
            )
            for name, seconds, ratio, flop_ratio, saved, peak in rows:
                print(
                    f"| {args.batch} | {seq_len} | {dim} | {args.heads} | {name} | "
                    f"{seconds * 1e3:.2f} | {ratio:.2f} | {flop_ratio:.2f} | {saved / mib:.1f} |"
                    + (f" {peak / mib:.1f} |" if gpu else ""),
                    flush=True,
                )


if __name__ == "__main__":
    main()
