"""A run's record: one small JSON file (`record.json` in the run directory) written when `fit` ends,
from which `compare` builds its tables, so no table ever depends on a process's memory.

This module reads and writes records and needs no Lightning (compare and its `--help` import it);
the callback that collects a record while a run trains is recorder.py's RunRecorder.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

from lit_attention.modeling import CONFIG_FIELDS

RECORD = "record.json"
# Fields that measure time on this machine: never part of a result that must repeat bit for bit.
TIMING_FIELDS = ("train_seconds", "wall_seconds", "train_samples_per_second")


# Settings that say where a run is written and labelled, its seed, how it resumes and which recipe
# files it was read from, not what it computes: a run with other values of these is the same run.
NOT_COMPARED = ("run", "ckpt_path", "weights_only", "seed_everything", "config", "print_config")


def run_config(config: dict) -> dict[str, Any]:
    """A run's resolved config as flat `key: value` pairs, without NOT_COMPARED: what the record keeps
    so that a later sweep can tell whether it asked for the same run."""
    flat: dict[str, Any] = {}

    def walk(tree, prefix: str) -> None:
        if isinstance(tree, dict):
            for key, value in tree.items():
                walk(value, f"{prefix}.{key}" if prefix else str(key))
        elif not any(prefix == k or prefix.startswith(k + ".") for k in NOT_COMPARED):
            flat[prefix] = json.loads(json.dumps(tree, default=str))

    walk(config, "")
    return flat


def config_differences(recorded: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """The settings both configs have and set differently (a setting only one knows, such as an argument
    a later version added with its default, is not a difference)."""
    recorded = {_current_key(key): value for key, value in recorded.items()}
    return [f"{key} {recorded[key]!r} -> {wanted[key]!r}" for key in sorted(recorded.keys() & wanted.keys())
            if recorded[key] != wanted[key]]


def _current_key(key: str) -> str:
    """A record's key as this version names it: the architecture moved from `model.init_args.<field>` into
    the model config, `model.init_args.net.<field>` (so an older record's dim still meets the plan's)."""
    prefix, _, field = key.rpartition(".")
    return f"model.init_args.net.{field}" if prefix == "model.init_args" and field in CONFIG_FIELDS else key


def finished_record(directory: Path, checkpoint: dict[str, Any]) -> dict | None:
    """The record of the run in `directory` if it finished at `checkpoint` (the record was written at
    the checkpoint's step): resuming from there trains nothing unless the limits are raised."""
    path = Path(directory) / RECORD
    if not path.is_file():
        return None
    try:
        record = read_record(path)
    except (OSError, ValueError):
        return None
    return record if record.get("optimizer_steps") == checkpoint.get("global_step") else None


@functools.cache
def provenance() -> dict[str, Any]:
    """The code and library versions a record was produced with. Read once per process: the forkserver
    of a local sweep (sweep/preload.py) reads it before forking its runs, which run the code it imported."""
    import lightning

    return {"commit": _git_commit(), "python": platform.python_version(), "torch": torch.__version__,
            "lightning": lightning.__version__}


def _git_commit() -> str | None:
    """The project's git commit (with `+dirty` when it has uncommitted changes), if it is a checkout."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if commit.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return commit.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def write_record(directory: str | os.PathLike, record: dict) -> Path:
    """Write `record.json` atomically (a reader never sees half a file); returns its path."""
    path = Path(directory) / RECORD
    partial = path.with_name(f".{RECORD}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(record, indent=1, sort_keys=False) + "\n")
    os.replace(partial, path)
    return path


def read_record(path: str | os.PathLike) -> dict:
    return json.loads(Path(path).read_text())
