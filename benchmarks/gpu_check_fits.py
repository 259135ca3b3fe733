"""The sections of benchmarks/gpu_check.py that train through `lit-attention fit` (the embedded GPT's recipe
in this process, with recipes/trainer/gpu_bf16.yaml on a GPU): throughput and MFU, host syncs per step,
and an exact resume; and what every section shares: the check's sizes and its printing."""

from __future__ import annotations

import collections
import json
import os
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import lightning as L
import torch

from timing import hardware

ROOT = Path(__file__).resolve().parents[1]
GPT_RECIPE = ROOT / "recipes/quickstart/gpt_stdlib.yaml"
GPU_PRESET = ROOT / "recipes/trainer/gpu_bf16.yaml"


@dataclass(frozen=True)
class Sizes:
    batch: int
    seq: int
    dim: int
    heads: int
    depth: int
    vocab: int
    new_tokens: int
    compile_steps: int
    compile_variants: tuple[str, ...]
    fit_steps: int  # the CLI fit's optimizer steps (and twice the resume's half)
    fit_overrides: tuple[str, ...]  # recipe overrides of the CLI fits


def say(line: str = "") -> None:
    print(line, flush=True)


def section(title: str) -> None:
    say()
    say(f"## {title}")


class StopAt(L.Callback):
    """For the resume check: stop the fit cleanly after optimizer step `step`."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer, *args) -> None:
        if trainer.global_step >= self.step:
            trainer.should_stop = True


def fit(where: Path, s: Sizes, device: torch.device, *extra: str) -> int:
    """`lit-attention fit` of the embedded GPT in this process (`where`: the working directory); its exit status."""
    from lit_attention.main import main

    preset = ["--config", str(GPU_PRESET)] if device.type == "cuda" else []
    args = [
        "fit",
        "--config",
        str(GPT_RECIPE),
        *preset,
        f"--trainer.max_steps={s.fit_steps}",
        "--trainer.val_check_interval=null",
        "--trainer.limit_val_batches=0",
        "--trainer.enable_progress_bar=false",
        f"--data.data_dir={where.parent / 'data'}",
        *s.fit_overrides,
        *extra,
    ]
    cwd = os.getcwd()
    os.chdir(where)
    try:
        main(args)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 1
    finally:
        os.chdir(cwd)
    return 0


def one_run(where: Path) -> Path:
    [run] = (where / "runs").glob("*/*/*/seed_*/version_*")
    return run


def tensorboard_scalars(run: Path) -> dict[str, float]:
    """The last value of every scalar the run logged to TensorBoard."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run)).Reload()
    return {tag: events.Scalars(tag)[-1].value for tag in events.Tags()["scalars"]}


def check_cli_fit(s: Sizes, device: torch.device, work: Path) -> None:
    section("CLI fit of the embedded GPT" + (" with recipes/trainer/gpu_bf16.yaml" if device.type == "cuda" else ""))
    if device.type != "cuda":
        say("gpu_bf16.yaml needs CUDA: this dry run fits on CPU in fp32 at toy size instead (no MFU)")
    where = work / "fit"
    where.mkdir()
    start = time.perf_counter()
    status = fit(where, s, device)
    say(f"exit status {status}, {time.perf_counter() - start:.1f} s in all, on {hardware(device)}")
    if status:
        return
    run = one_run(where)
    record = json.loads((run / "record.json").read_text())
    seconds = record["train_seconds"]
    tokens = f", tokens/s {record['tokens_seen'] / seconds:.0f}" if record.get("tokens_seen") and seconds else ""
    say(
        f"optimizer steps {record['optimizer_steps']}, train seconds {seconds}, "
        f"samples/s {record['train_samples_per_second']}{tokens}"
    )
    if record.get("train_flops"):
        say(f"achieved {record['train_flops'] / seconds / 1e12:.2f} TFLOP/s (torch's FLOP count of every training batch)")
    scalars = tensorboard_scalars(run)
    mfu = {tag: value for tag, value in scalars.items() if "mfu" in tag}
    say(
        f"MFU logged: {', '.join(f'{t} {v:.3f}' for t, v in mfu.items())}"
        if mfu
        else "MFU: not logged (no peak FLOP/s is known for this device and precision: training/peak_flops.py)"
    )


def check_host_syncs(s: Sizes, device: torch.device, work: Path) -> None:
    section("Host syncs per training step (torch.cuda.set_sync_debug_mode('warn'), two fits differing in length)")
    if device.type != "cuda":
        say("skipped: sync debug mode needs CUDA")
        return
    counts, steps = [], (s.fit_steps // 4, s.fit_steps // 2)
    for i, n in enumerate(steps):
        where = work / f"syncs_{i}"
        where.mkdir()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                status = fit(where, replace(s, fit_steps=n), device)
            finally:
                torch.cuda.set_sync_debug_mode(0)
        if status:
            say(f"the {n}-step fit failed with exit status {status}")
            return
        counts.append(
            collections.Counter(f"{Path(w.filename).name}:{w.lineno}" for w in caught if "synchroniz" in str(w.message))
        )
    per_step = counts[1] - counts[0]
    total = sum(per_step.values()) / (steps[1] - steps[0])
    say(f"{total:.1f} syncs per optimizer step; where, per step:")
    for place, count in per_step.most_common(10):
        say(f"  {count / (steps[1] - steps[0]):.2f}  {place}")


def check_exact_resume(s: Sizes, device: torch.device, work: Path) -> None:
    section("Exact resume with dropout: N steps, against N/2, stop, resume to N (deterministic algorithms)")
    half = s.fit_steps // 2
    # Deterministic algorithms: two bf16 fits on a GPU otherwise differ by atomics' order alone, resumed or not
    # ("warn": an op without a deterministic version warns instead of stopping the check).
    dropout = ["--model.net.dropout=0.1", f"--run.checkpoint_every_n_steps={half}", "--trainer.deterministic=warn"]
    straight, resumed = work / "straight", work / "resumed"
    straight.mkdir()
    resumed.mkdir()
    statuses = [
        fit(straight, s, device, *dropout),
        fit(resumed, s, device, *dropout, "--trainer.callbacks+=gpu_check_fits.StopAt", f"--trainer.callbacks.step={half}"),
        fit(resumed, s, device, *dropout, "--ckpt_path=last"),
    ]
    if any(statuses):
        say(f"a fit failed: exit statuses {statuses}")
        return
    a, b = (torch.load(one_run(w) / "checkpoints/last.ckpt", map_location="cpu", weights_only=True) for w in (straight, resumed))
    differences = {
        name: float((a["state_dict"][name].float() - b["state_dict"][name].float()).abs().max()) for name in a["state_dict"]
    }
    worst = max(differences, key=differences.get)
    same = all(value == 0.0 for value in differences.values())
    say(
        f"steps {a['global_step']} and {b['global_step']}; weights {'identical' if same else 'DIFFER'} "
        f"(largest difference {differences[worst]:.3e}, in {worst})"
    )
