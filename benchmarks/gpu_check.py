"""One-shot check of the GPU paths, stopping by itself inside 8 minutes on one H100 or H200.

    python benchmarks/gpu_check.py            # on a GPU
    python benchmarks/gpu_check.py --dry      # the same sections on CPU at toy sizes, under a minute

Sections, each printing its own lines: which SDPA kernel each variant and model family runs and its
bf16 error against fp32, for every preset and for the block options that change attention's inputs
(rotary and ALiBi positions, qk_norm, grouped keys and values); bf16 generation from prompts of
different lengths; host syncs per training step; torch.compile's speed-up and recompiles (counted from
dynamo's recompile log, checked against recompiles forced on purpose); a CLI fit of the embedded GPT
with recipes/trainer/gpu_bf16.yaml (throughput, MFU); an exact single-GPU resume with dropout under
deterministic algorithms. Ratios are against a baseline measured in the same run; absolute times come
with the hardware name. What needs CUDA prints a line saying it was skipped. A section that would start
past the time budget (--budget, 450 s on a GPU) is skipped with a line saying so, and an alarm ends the
run 30 s past it whatever it is doing.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the StopAt callback's class path, gpu_check_fits.StopAt

from gpu_check_fits import Sizes, check_cli_fit, check_exact_resume, check_host_syncs, say, section  # noqa: E402
from timing import hardware, median_interleaved, synchronize  # noqa: E402

from lit_attention.modeling import (  # noqa: E402
    GPT,
    GPTConfig,
    Seq2SeqConfig,
    Seq2SeqTransformer,
    TextEncoderClassifier,
    TextEncoderConfig,
    ViTConfig,
    VisionTransformer,
)
from lit_attention.modeling.attention import list_presets  # noqa: E402
from lit_attention.modeling.block_options import family_options  # noqa: E402

# The SDPA backends as the profiler names their aten ops.
BACKENDS = {
    "_scaled_dot_product_flash_attention_for_cpu": "flash (cpu)",
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_efficient_attention": "mem-efficient",
    "_scaled_dot_product_cudnn_attention": "cudnn",
    "_scaled_dot_product_attention_math": "math",
    "_scaled_dot_product_fused_attention_overrideable": "fused",
}
KERNEL_WORDS = ("flash", "fmha", "sdpa", "attention", "cudnn")


GPU_SIZES = Sizes(
    batch=8,
    seq=256,
    dim=512,
    heads=8,
    depth=2,
    vocab=512,
    new_tokens=64,
    compile_steps=20,
    compile_variants=("standard", "super"),
    fit_steps=100,
    fit_overrides=(),
)
DRY_SIZES = Sizes(
    batch=2,
    seq=16,
    dim=32,
    heads=2,
    depth=1,
    vocab=64,
    new_tokens=4,
    compile_steps=2,
    compile_variants=("super",),
    fit_steps=4,
    fit_overrides=(
        "--data.max_files=40",
        "--data.val_fraction=0.2",
        "--data.val_windows=4",
        "--data.max_len=16",
        "--data.batch_size=4",
        "--model.net.dim=16",
        "--model.net.num_heads=2",
        "--model.net.depth=1",
    ),
)


# ---------------------------------------------------------------------------------------- models


# The block options that change what attention is handed, each with `standard`: (label, variant, config fields).
OPTION_ROWS = (
    ("standard, rope", "standard", {"position": "rope"}),
    ("standard, alibi", "standard", {"position": "alibi"}),
    ("standard, qk_norm", "standard", {"qk_norm": True}),
    ("standard,kv_heads=2", "standard,kv_heads=2", {}),
)


def families(
    s: Sizes, variant: str, device: torch.device, options: dict | None = None
) -> dict[str, tuple[torch.nn.Module, tuple]]:
    """Each model family at size `s` with the config fields `options`, with an input batch: the text encoder
    with and without padding, the encoder-decoder with padded sources and targets. A family whose config
    does not offer those options (block_options.family_options: the ViT's positions are learned or rope) is
    left out."""
    options = options or {}
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(3, s.vocab, (s.batch, s.seq), generator=g)
    lengths = torch.linspace(s.seq, max(1, s.seq // 4), s.batch).long()
    padding = torch.arange(s.seq)[None] >= lengths[:, None]
    side = int(s.seq**0.5) * 2  # patches of 2 x 2: about seq tokens
    common = dict(dim=s.dim, num_heads=s.heads, dropout=0.0, **options)
    models = {}
    if all(value in family_options(ViTConfig).get(name, ()) for name, value in options.items()):
        models["vit"] = (
            VisionTransformer(
                ViTConfig(image_size=side, patch_size=2, in_channels=3, num_classes=10, depth=s.depth, **common),
                attention=variant,
            ),
            (torch.randn(s.batch, 3, side, side, generator=g),),
        )
    text = TextEncoderClassifier(
        TextEncoderConfig(pad_id=0, vocab_size=s.vocab, max_len=s.seq, num_classes=4, depth=s.depth, **common), attention=variant
    )
    models |= {
        "text, no padding": (text, (tokens, torch.zeros_like(padding))),
        "text, padded": (text, (tokens.masked_fill(padding, 0), padding)),
        "gpt": (GPT(GPTConfig(vocab_size=s.vocab, max_len=s.seq, depth=s.depth, **common), attention=variant), (tokens,)),
        "seq2seq, padded": (
            Seq2SeqTransformer(
                Seq2SeqConfig(
                    pad_id=0,
                    bos_id=1,
                    eos_id=2,
                    vocab_size=s.vocab,
                    max_src_len=s.seq,
                    max_tgt_len=s.seq,
                    encoder_depth=s.depth,
                    decoder_depth=s.depth,
                    **common,
                ),
                attention=variant,
            ),
            (tokens.masked_fill(padding, 0), tokens.flip(0), padding, padding.flip(0)),
        ),
    }
    return {name: (model.to(device).eval(), tuple(t.to(device) for t in inputs)) for name, (model, inputs) in models.items()}


def autocast(device: torch.device):
    return torch.autocast(device.type, dtype=torch.bfloat16)


def sdpa_kernels(run, device: torch.device) -> tuple[str, str]:
    """(SDPA backends, device kernels) that `run()` used, from torch.profiler's event names."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profile:
        run()
        synchronize(device)
    names = {event.key for event in profile.key_averages()}
    backends = sorted({label for op, label in BACKENDS.items() if f"aten::{op}" in names})
    kernels = (
        sorted(
            {name[:40] for name in names if not name.startswith("aten::") and any(word in name.lower() for word in KERNEL_WORDS)}
        )
        if device.type == "cuda"
        else []
    )
    return ", ".join(backends) or "none", ", ".join(kernels) or "-"


def check_kernels(s: Sizes, device: torch.device) -> None:
    section("SDPA kernels and bf16 error per variant and family")
    say("bf16 error: max |bf16-autocast - fp32| / max |fp32| of the outputs (TF32 off for the fp32 reference)")
    say("| family | variant | SDPA backend (bf16) | device kernels | bf16 error |")
    say("|---|---|---|---|---|")
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = [(variant, variant, {}) for variant in list_presets()] + list(OPTION_ROWS)
    for label, variant, options in rows:
        if out_of_time(f"the kernel rows from {label!r} on"):
            return
        for family, (model, inputs) in families(s, variant, device, options).items():
            with torch.no_grad():
                exact = model(*inputs).float()
                with autocast(device):
                    low = model(*inputs).float()
                    backends, kernels = sdpa_kernels(lambda: model(*inputs), device)
            error = float((low - exact).abs().max() / exact.abs().max().clamp(min=1e-12))
            say(f"| {family} | {label} | {backends} | {kernels} | {error:.2e} |")


# ---------------------------------------------------------------------------------------- generation


def check_ragged_generation(s: Sizes, device: torch.device) -> None:
    section("bf16 generation from prompts of different lengths")
    say(
        f"{s.batch} left-padded prompts of {s.seq // 8}..{s.seq // 2} tokens, {s.new_tokens} greedy tokens, on {hardware(device)}"
    )
    say("| variant | fp32 s | bf16 s | bf16 / fp32 time | first token as in fp32 |")
    say("|---|---|---|---|---|")
    lengths = torch.linspace(s.seq // 2, max(1, s.seq // 8), s.batch).long()
    width = int(lengths.max())
    padding = (torch.arange(width)[None] < (width - lengths)[:, None]).to(device)
    for variant in list_presets():
        torch.manual_seed(0)
        model = (
            GPT(
                GPTConfig(vocab_size=s.vocab, max_len=width + s.new_tokens, dim=s.dim, depth=s.depth, num_heads=s.heads),
                attention=variant,
            )
            .to(device)
            .eval()
        )
        prompts = torch.randint(0, s.vocab, (s.batch, width), device=device)
        outputs, seconds = {}, {}
        for precision in ("fp32", "bf16"):
            context = autocast(device) if precision == "bf16" else contextlib.nullcontext()
            with context:
                model.generate(prompts, 2, temperature=0, padding_mask=padding)  # warm-up
                synchronize(device)
                start = time.perf_counter()
                outputs[precision] = model.generate(prompts, s.new_tokens, temperature=0, padding_mask=padding)
                synchronize(device)
                seconds[precision] = time.perf_counter() - start
        first = (outputs["bf16"][:, width] == outputs["fp32"][:, width]).float().mean()
        say(
            f"| {variant} | {seconds['fp32']:.3f} | {seconds['bf16']:.3f} | {seconds['bf16'] / seconds['fp32']:.2f} "
            f"| {first:.0%} |"
        )


# ---------------------------------------------------------------------------------------- compile


def training_step(model: GPT, optimizer: torch.optim.Optimizer, tokens: torch.Tensor, device: torch.device):
    def step():
        with autocast(device):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def check_compile(s: Sizes, device: torch.device) -> None:
    section("torch.compile: speed-up of a GPT training step and recompiles")
    backend = "inductor" if device.type == "cuda" else "eager"  # no C++ compiler assumed on a CPU machine
    say(f"backend {backend}; bf16 autocast; batch {s.batch} x {s.seq} tokens; on {hardware(device)}")
    from torch._dynamo.utils import counters

    with counting_recompiles() as forced:  # the counter, checked on recompiles made on purpose
        shapes = torch.compile(lambda x: x * 2, backend=backend, dynamic=False)
        for length in range(1, 5):
            shapes(torch.ones(length, device=device))
    say(f"recompile count check: 3 forced (a function compiled for 4 input shapes, dynamic off), {len(forced)} counted")
    say("| variant | eager ms/step | compiled ms/step | speed-up | compiles (frames) | recompiles |")
    say("|---|---|---|---|---|---|")
    for variant in s.compile_variants:
        torch.manual_seed(0)
        tokens = torch.randint(0, s.vocab, (s.batch, s.seq + 1), device=device)
        config = GPTConfig(vocab_size=s.vocab, max_len=s.seq, dim=s.dim, depth=s.depth, num_heads=s.heads)
        eager, compiled = GPT(config, variant).to(device), GPT(config, variant).to(device)
        compiled.load_state_dict(eager.state_dict())
        torch._dynamo.reset()
        counters.clear()
        compiled_forward = torch.compile(compiled, backend=backend)
        steps = {
            "eager": training_step(eager, torch.optim.AdamW(eager.parameters(), lr=1e-4), tokens, device),
            "compiled": training_step(compiled_forward, torch.optim.AdamW(compiled.parameters(), lr=1e-4), tokens, device),
        }
        with counting_recompiles() as recompiles:
            steps["compiled"]()  # compiles here, outside the timing
            times = median_interleaved(steps, warmup=2, calls=s.compile_steps, repeats=3, device=device)
        frames = counters["frames"]["ok"]
        say(
            f"| {variant} | {times['eager'] * 1e3:.2f} | {times['compiled'] * 1e3:.2f} | "
            f"{times['eager'] / times['compiled']:.2f} | {frames} | {len(recompiles)} |"
        )


@contextlib.contextmanager
def counting_recompiles():
    """The recompiles dynamo makes meanwhile, one message each, from its `recompiles` log (torch 2.14 no
    longer counts them in torch._dynamo.utils.counters["recompiles"])."""
    found: list[str] = []

    class Count(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            found.append(record.getMessage().splitlines()[0])

    logger, handler = logging.getLogger("torch._dynamo.guards.__recompiles"), Count()
    logger.addHandler(handler)
    torch._logging.set_logs(recompiles=True)
    try:
        yield found
    finally:
        torch._logging.set_logs()
        logger.removeHandler(handler)


# ---------------------------------------------------------------------------------------- main


BUDGET: dict[str, float] = {}  # "ends": the perf_counter time after which no section or kernel row starts


def out_of_time(what: str) -> bool:
    """Whether the budget is spent; if so, a line saying what is skipped."""
    if "ends" in BUDGET and time.perf_counter() > BUDGET["ends"]:
        say(f"skipped: {what}, the time budget is spent")
        return True
    return False


def over_budget(signum, frame) -> None:
    say("stopped: 30 s past the time budget, in the middle of a section")
    os._exit(3)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry", action="store_true", help="CPU, toy sizes, under a minute")
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds: no section starts past it, and an alarm ends the run 30 s later (450 on a GPU)",
    )
    args = parser.parse_args(argv)
    if not args.dry and not torch.cuda.is_available():
        parser.error("no CUDA device here; run with --dry for the CPU rehearsal")
    device = torch.device("cpu" if args.dry else "cuda")
    sizes = DRY_SIZES if args.dry else GPU_SIZES
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()
    budget = args.budget if args.budget is not None else (None if args.dry else 450.0)
    previous_alarm = signal.getsignal(signal.SIGALRM)
    if budget is not None:
        BUDGET["ends"] = started + budget
        signal.signal(signal.SIGALRM, over_budget)
        signal.alarm(int(budget) + 30)
    say(
        f"# GPU check{' (dry)' if args.dry else ''} on {hardware(device)}; torch {torch.__version__}"
        + (f"; budget {budget:.0f} s" if budget is not None else "")
    )
    try:
        with tempfile.TemporaryDirectory(prefix="gpu_check_") as work:
            work = Path(work)
            sections = [
                lambda: check_kernels(sizes, device),
                lambda: check_ragged_generation(sizes, device),
                lambda: check_compile(sizes, device),
                lambda: check_cli_fit(sizes, device, work),
                lambda: check_host_syncs(sizes, device, work),
                lambda: check_exact_resume(sizes, device, work),
            ]
            names = ["SDPA kernels", "ragged generation", "torch.compile", "CLI fit", "host syncs", "exact resume"]
            for name, run_section in zip(names, sections):
                if out_of_time(f"section {name!r}"):
                    continue
                start = time.perf_counter()
                run_section()
                say(f"({time.perf_counter() - start:.0f} s)")
    finally:  # a section that raises leaves no alarm armed behind it
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous_alarm)
        BUDGET.clear()
    say()
    say(f"# done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
