"""The peak FLOP/s that MFU divides by: dense (no structured sparsity) tensor-core figures per GPU from the
vendors' datasheets, used before Lightning's table, which has no entry matching "NVIDIA H200", gives the
H100 NVL a with-sparsity two-GPU figure, and takes an L40 or L40S for an L4."""

from __future__ import annotations

import re

import torch
from lightning.fabric.utilities.throughput import get_available_flops

T = 1e12
# name -> (pattern on torch.cuda.get_device_name().lower(), {dtype: FLOP/s}, source). First match wins.
# Datasheets print tensor-core figures with sparsity and mark them with an asterisk; the dense figure
# is half of it, which is what these hold.
PEAKS: dict[str, tuple[str, dict[str, float], str]] = {
    # H200 datasheet (NVIDIA H200 Tensor Core GPU, 2024): SXM TF32 989*, BF16/FP16 1,979*; NVL 835*, 1,671*.
    "H200 NVL": (
        r"\bh200 nvl\b",
        {"float32": 60 * T, "tfloat32": 417.5 * T, "bfloat16": 835.5 * T, "float16": 835.5 * T},
        "NVIDIA H200 datasheet (NVL), sparse figures halved",
    ),
    "H200 SXM": (
        r"\bh200\b",
        {"float32": 66.9 * T, "tfloat32": 494.7 * T, "bfloat16": 989.4 * T, "float16": 989.4 * T},
        "NVIDIA H200 datasheet (SXM), sparse figures halved",
    ),
    # H100 datasheet (NVIDIA H100 Tensor Core GPU): SXM TF32 989*, BF16 1,979*; PCIe 756*, 1,513*;
    # NVL (per GPU, 94 GB) 835*, 1,671*.
    "H100 NVL": (
        r"\bh100\b.*\bnvl\b",
        {"float32": 60 * T, "tfloat32": 417.5 * T, "bfloat16": 835.5 * T, "float16": 835.5 * T},
        "NVIDIA H100 datasheet (NVL), sparse figures halved",
    ),
    "H100 PCIe": (
        r"\bh100\b.*\b(pcie|hbm2e)\b",
        {"float32": 51.2 * T, "tfloat32": 378 * T, "bfloat16": 756 * T, "float16": 756 * T},
        "NVIDIA H100 datasheet (PCIe), sparse figures halved",
    ),
    "H100 SXM": (
        r"\bh100\b",
        {"float32": 66.9 * T, "tfloat32": 494.7 * T, "bfloat16": 989.4 * T, "float16": 989.4 * T},
        "NVIDIA H100 datasheet (SXM), sparse figures halved",
    ),
    # A100 datasheet: SXM4 and PCIe, 40 and 80 GB alike: TF32 156, BF16/FP16 312 (dense).
    "A100": (
        r"\ba100\b",
        {"float32": 19.5 * T, "tfloat32": 156 * T, "bfloat16": 312 * T, "float16": 312 * T},
        "NVIDIA A100 datasheet, dense figures",
    ),
    # L40S datasheet: TF32 183 | 366*, BF16/FP16 362.05 | 733*. L40 datasheet: TF32 90.5 | 181*, BF16/FP16 181 | 362*.
    "L40S": (
        r"\bl40s\b",
        {"float32": 91.6 * T, "tfloat32": 183 * T, "bfloat16": 362.05 * T, "float16": 362.05 * T},
        "NVIDIA L40S datasheet, dense figures",
    ),
    "L40": (
        r"\bl40\b",
        {"float32": 90.5 * T, "tfloat32": 90.5 * T, "bfloat16": 181 * T, "float16": 181 * T},
        "NVIDIA L40 datasheet, dense figures",
    ),
    # L4 datasheet: TF32 120*, BF16/FP16 242*.
    "L4": (
        r"\bl4\b",
        {"float32": 30.3 * T, "tfloat32": 60 * T, "bfloat16": 121 * T, "float16": 121 * T},
        "NVIDIA L4 datasheet, sparse figures halved",
    ),
    # A10 datasheet: TF32 62.5 | 125*, BF16/FP16 125 | 250*. (The A10G has no NVIDIA datasheet: Lightning's.)
    "A10": (
        r"\ba10\b",
        {"float32": 31.2 * T, "tfloat32": 62.5 * T, "bfloat16": 125 * T, "float16": 125 * T},
        "NVIDIA A10 datasheet, dense figures",
    ),
    # Ada architecture whitepaper, GeForce RTX 4090: FP16/BF16 tensor with FP32 accumulate (what PyTorch's
    # matmuls use) 165.2 | 330.4*, TF32 82.6 | 165.2*.
    "RTX 4090": (
        r"\brtx 4090\b",
        {"float32": 82.6 * T, "tfloat32": 82.6 * T, "bfloat16": 165.2 * T, "float16": 165.2 * T},
        "NVIDIA Ada GPU architecture whitepaper, dense figures",
    ),
}


def dense_peak(device_name: str, dtype: str) -> dict | None:
    """Our table's entry for a device as torch names it ("NVIDIA H100 80GB HBM3") and a compute dtype
    ("bfloat16", "float16", "tfloat32", "float32"): {"gpu", "flops_per_second", "source"}, or None."""
    name = device_name.lower()
    for gpu, (pattern, peaks, source) in PEAKS.items():
        if re.search(pattern, name):
            return {"gpu": gpu, "flops_per_second": peaks[dtype], "source": source} if dtype in peaks else None
    return None


def compute_dtype(precision: str) -> str:
    """The dtype the matmuls of a Trainer precision run in: "bf16-mixed" -> "bfloat16", ..., float32
    with TF32 allowed (torch.set_float32_matmul_precision "high" or "medium") -> "tfloat32"."""
    precision = str(precision)
    if precision.startswith("bf16"):
        return "bfloat16"
    if precision.startswith("16"):
        return "float16"
    if precision.startswith("64"):
        return "float64"
    return "float32" if torch.get_float32_matmul_precision() == "highest" else "tfloat32"


def peak_flops(device: torch.device, precision: str) -> dict | None:
    """The peak FLOP/s MFU is taken against on `device` at `precision`, and where it comes from:
    {"device", "dtype", "flops_per_second", "source"}; None where neither table knows it (CPUs)."""
    if device.type != "cuda":
        return None
    name, dtype = torch.cuda.get_device_name(device), compute_dtype(precision)
    ours = dense_peak(name, dtype)
    if ours is not None:
        return {
            "device": name,
            "dtype": dtype,
            "flops_per_second": ours["flops_per_second"],
            "source": f"lit_attention: {ours['source']}",
        }
    # Lightning picks TF32 for float32 itself, by the same matmul-precision setting.
    theirs = get_available_flops(device, torch.float32 if dtype in ("float32", "tfloat32") else getattr(torch, dtype))
    if theirs is None:
        return None
    return {"device": name, "dtype": dtype, "flops_per_second": float(theirs), "source": "lightning"}
