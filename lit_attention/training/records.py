"""A run's record: one small JSON file (`record.json` in the run directory) written when `fit` ends,
from which `compare` builds its tables, so no table ever depends on a process's memory.

This module reads and writes records and needs no Lightning (compare and its `--help` import it);
the callback that collects a record while a run trains is recorder.py's RunRecorder.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

from lit_attention.modeling import CONFIG_FIELDS
from lit_attention.atomic_files import replace_file

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
    return [
        f"{key} {recorded[key]!r} -> {wanted[key]!r}"
        for key in sorted(recorded.keys() & wanted.keys())
        if recorded[key] != wanted[key]
    ]


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


def provenance(devices: list[str] | None = None) -> dict[str, Any]:
    """Where a record was produced: the code (its version, commit, whether the tree had uncommitted changes
    and a hash of them), the library versions and torch's build, the CPU, torch's thread count and the `devices`
    the run used. Records written before these fields have fewer (and "commit" may end in "+dirty")."""
    return {**_static_provenance(), "threads": torch.get_num_threads(), "devices": devices}


@functools.cache
def _static_provenance() -> dict[str, Any]:
    """What cannot change within a process, read once: the forkserver of a local sweep (sweep/preload.py)
    reads it before forking its runs, which run the code it imported. The thread count is not among
    them: each forked run sets its own."""
    import lightning

    import lit_attention

    return {
        **_git_state(),
        "lit_attention": lit_attention.__version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_build": _torch_build(),
        "lightning": lightning.__version__,
        "cpu": _cpu_model(),
    }


def _git_state() -> dict[str, Any]:
    """The project's git commit, whether tracked files differ from it, and the sha256 of `git diff HEAD`
    when they do (None values outside a checkout)."""
    root = Path(__file__).resolve().parents[2]

    def git(*words: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *words], cwd=root, capture_output=True, timeout=30)

    try:
        commit = git("rev-parse", "HEAD")
        if commit.returncode != 0:
            return {"commit": None, "dirty": None, "diff_sha256": None}
        diff = git("diff", "HEAD", "--no-color", "--no-ext-diff", "--binary")
        dirty = diff.returncode != 0 or bool(diff.stdout)
        return {
            "commit": commit.stdout.decode().strip(),
            "dirty": dirty,
            "diff_sha256": hashlib.sha256(diff.stdout).hexdigest() if dirty and diff.returncode == 0 else None,
        }
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None, "diff_sha256": None}


def _torch_build() -> str:
    """ "cpu", "cuda <version>" or "rocm <version>": what this torch was built for."""
    if torch.version.cuda:
        return f"cuda {torch.version.cuda}"
    if getattr(torch.version, "hip", None):
        return f"rocm {torch.version.hip}"
    return "cpu"


def _cpu_model() -> str | None:
    """The CPU's model name (/proc/cpuinfo on Linux, else what the platform reports)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


def write_record(directory: str | os.PathLike, record: dict) -> Path:
    """Write `record.json` atomically (a reader never sees half a file); returns its path."""
    text = json.dumps(record, indent=1, sort_keys=False) + "\n"
    return replace_file(Path(directory) / RECORD, lambda file: file.write(text.encode()))


def read_record(path: str | os.PathLike) -> dict:
    return json.loads(Path(path).read_text())
