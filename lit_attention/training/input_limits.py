"""Values whose limits are known before anything is built, checked up front so that a bad one is one
sentence instead of a library's traceback later: the trainer values Lightning's constructor or the first
batch would fail on (or accept and misuse), and the length of every part of the run directory's path
(the seed's range is lit_attention/limits.py's, with the models' and tasks' limits). training/cli.py
calls these before the model or the run directory exist."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from lit_attention.errors import ConfigError

PRECISIONS = ("32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true")
DOUBLE = ("64", "64-true")  # float64: the first batch fails on a dtype mismatch of inputs and weights
CLIP_ALGORITHMS = ("norm", "value")


def check_trainer_values(trainer, on_cpu: bool) -> None:
    """Trainer values that Lightning's constructor would refuse with a traceback, or accept and misuse."""
    precision = trainer.get("precision")
    if str(precision) in DOUBLE:
        raise ConfigError(
            f"--trainer.precision {precision} is not supported; the DataModules give float32 inputs and the "
            f"suite's results are float32 or mixed precision, so choose one of {', '.join(PRECISIONS)}."
        )
    algorithm = trainer.get("gradient_clip_algorithm")
    if algorithm is not None and str(algorithm).lower() not in CLIP_ALGORITHMS:
        raise ConfigError(
            f"--trainer.gradient_clip_algorithm {algorithm!r} is invalid; valid choices are "
            f"{', '.join(CLIP_ALGORITHMS)} (with --trainer.gradient_clip_val), or null for none."
        )
    clip = trainer.get("gradient_clip_val")
    if clip is not None and not clip >= 0:  # a negative norm flips the gradients' sign; NaN clips nothing
        raise ConfigError(
            f"--trainer.gradient_clip_val {clip} is invalid; give the largest gradient norm (or value) "
            "to clip to, a number > 0, or 0 or null for no clipping."
        )
    nodes = trainer.get("num_nodes")
    if nodes is not None and not (isinstance(nodes, int) and nodes >= 1):
        raise ConfigError(
            f"--trainer.num_nodes {nodes!r} is invalid; give the number of machines, a whole number "
            "from 1 (1 for this machine alone)."
        )
    devices = trainer.get("devices")
    number = devices if isinstance(devices, int) else int(devices) if str(devices).lstrip("-").isdigit() else None
    if number is not None and (number < -1 or (number == -1 and on_cpu)):
        meaning = " (-1, every GPU, has no meaning for CPU processes)" if number == -1 else ""
        raise ConfigError(
            f"--trainer.devices {devices} is invalid{meaning}; give a number of devices from 1, a list "
            "of device indices (e.g. [0, 1]), or auto."
        )


def runs_on_cpu(trainer) -> bool:
    accelerator = str(trainer.get("accelerator") or "auto")
    return accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available())


def check_path_lengths(path: Path, option: str) -> None:
    """Each part of the run directory's path fits the file system (255 bytes on most): `option` names
    the setting that gave it."""
    try:
        longest = os.pathconf(next(p for p in [*path.parents, Path(".")] if os.path.isdir(p)), "PC_NAME_MAX")
    except (OSError, ValueError):
        longest = 255
    for part in path.parts:
        if len(os.fsencode(part)) > longest:
            raise ConfigError(
                f"{option} gives a folder name of {len(os.fsencode(part))} bytes ({part[:40]}...), "
                f"longer than the {longest} bytes this file system allows in one name; shorten it "
                "(a '/' starts a new folder)."
            )
