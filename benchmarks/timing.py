"""Shared timing helpers: warm-up, median of repeats, and the hardware a number came from."""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable

import torch


def hardware(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {torch.get_num_threads()} threads"


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds_per_call(step: Callable[[], object], calls: int, device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        step()
    synchronize(device)
    return (time.perf_counter() - start) / calls


def median_interleaved(
    steps: dict[str, Callable[[], object]], warmup: int, calls: int, repeats: int, device: torch.device
) -> dict[str, float]:
    """Median seconds per call of each step; repeats alternate between steps so that drift in
    machine load (a shared CPU, GPU clocks) hits all of them alike."""
    for step in steps.values():
        if warmup:  # 0: the caller warmed up (a shorter run, say)
            seconds_per_call(step, warmup, device)
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            samples[name].append(seconds_per_call(step, calls, device))
    return {name: statistics.median(values) for name, values in samples.items()}


def header(title: str, device: torch.device, dtype: str, repeats: int, calls: int) -> str:
    return (
        f"# {title}, {dtype}, on {hardware(device)}\n"
        f"# torch {torch.__version__}; median of {repeats} interleaved repeats x {calls} calls"
    )
