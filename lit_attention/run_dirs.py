"""Versioned run directories `<root>/<recipe>/<variant>/seed_<n>/version_<k>/` that never collide.

A new run claims its version with `os.mkdir`, which fails when the directory exists, so two runs
started at the same moment into the same root get different versions (TensorBoard's own choice,
"one more than the largest existing", would give both the same one). A resumed run reuses the
version its checkpoint lives in.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_VERSION = re.compile(r"version_(\d+)$")


def versions(base: str | os.PathLike) -> list[int]:
    """Existing version numbers under `base`, ascending."""
    base = Path(base)
    if not base.is_dir():
        return []
    found = (_VERSION.match(entry.name) for entry in os.scandir(base) if entry.is_dir())
    return sorted(int(match.group(1)) for match in found if match)


def version_dir(base: str | os.PathLike, version: int) -> Path:
    return Path(base) / f"version_{version}"


def claim_new_version(base: str | os.PathLike) -> int:
    """Create the next free `version_<k>` directory under `base` and return k; safe against races."""
    Path(base).mkdir(parents=True, exist_ok=True)
    existing = versions(base)
    version = existing[-1] + 1 if existing else 0
    while True:
        try:
            os.mkdir(version_dir(base, version))
            return version
        except FileExistsError:  # another run took it between the listing and now
            version += 1


def version_of_checkpoint(base: str | os.PathLike, checkpoint: str | os.PathLike) -> int | None:
    """k when `checkpoint` lies in `<base>/version_<k>/checkpoints/`, else None."""
    parent = Path(checkpoint).resolve().parent
    if parent.name != "checkpoints" or parent.parent.parent != Path(base).resolve():
        return None
    match = _VERSION.match(parent.parent.name)
    return int(match.group(1)) if match else None


def launched_as_rank_zero() -> bool:
    """Whether this process is (or will become) global rank 0; only it creates run directories.

    Read from the launchers' environment variables, because the trainer does not exist yet when
    the run directory is chosen: torchrun (RANK), SLURM (SLURM_PROCID), Lightning's own process
    launcher (LOCAL_RANK, NODE_RANK for the processes it starts).
    """
    names = ("RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK")
    return all(int(os.environ.get(name) or 0) == 0 for name in names)
