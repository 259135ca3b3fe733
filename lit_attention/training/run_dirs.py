"""Where a command writes: `<root>/<recipe>/<variant>/seed_<n>/version_<k>/` for a training run, and
`.../evaluations/<command>_<k>/` for validate, test and predict, which never create a `version_<k>`
(so `fit --ckpt_path last` always finds the newest *training* run).

A new run claims its version with `os.mkdir`, which fails when the directory exists, so two runs
started at the same moment into the same root get different versions (TensorBoard's own choice, "one
more than the largest existing", would give both the same one). A resumed run reuses the version its
checkpoint lives in, and holds a lock on it for as long as it runs: a second process resuming the same
run (a scheduler relaunching a job whose first copy still runs) is refused, naming the holder.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lit_attention.errors import ConfigError, brief
from lit_attention.training.file_locks import FileLock

_VERSION = re.compile(r"version_(\d+)$")
LOCK = ".lock"
CHECKPOINTS = "checkpoints"
LAST = "last.ckpt"  # in CHECKPOINTS: what `--ckpt_path last` resumes


@dataclass
class RunPlace:
    """Where one command writes. `directory` is None on ranks other than 0 (they never write)."""

    base: Path  # <root>/<recipe>/<variant>/seed_<n>
    directory: Path | None
    resumed: bool = False  # fit continues the training run in `directory`
    created: bool = False  # this process made `directory`: it may remove it again if the start fails

    @property
    def version(self) -> int | None:
        match = _VERSION.match(self.directory.name) if self.directory is not None else None
        return int(match.group(1)) if match else None


def versions(base: str | os.PathLike) -> list[int]:
    """Existing version numbers under `base`, ascending."""
    base = Path(base)
    if not base.is_dir():
        return []
    found = (_VERSION.match(entry.name) for entry in os.scandir(base) if entry.is_dir())
    return sorted(int(match.group(1)) for match in found if match)


def version_dir(base: str | os.PathLike, version: int) -> Path:
    return Path(base) / f"version_{version}"


def newest_version(base: str | os.PathLike) -> Path | None:
    existing = versions(base)
    return version_dir(base, existing[-1]) if existing else None


def claim_new_version(base: str | os.PathLike) -> int:
    """Create the next free `version_<k>` directory under `base` and return k; safe against races."""
    return int(_claim(Path(base), "version_").name.removeprefix("version_"))


def claim_evaluation_dir(parent: str | os.PathLike, command: str) -> Path:
    """A new `evaluations/<command>_<k>` directory under `parent` (a training run, or the seed's folder)."""
    return _claim(Path(parent) / "evaluations", f"{command}_")


def _claim(folder: Path, prefix: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pattern = re.compile(rf"{re.escape(prefix)}(\d+)$")
    taken = [int(m.group(1)) for m in (pattern.match(e.name) for e in os.scandir(folder)) if m]
    number = max(taken) + 1 if taken else 0
    while True:
        try:
            os.mkdir(folder / f"{prefix}{number}")
            return folder / f"{prefix}{number}"
        except FileExistsError:  # another process took it between the listing and now
            number += 1


def version_of_checkpoint(base: str | os.PathLike, checkpoint: str | os.PathLike) -> Path | None:
    """The `version_<k>` directory of `base` that `checkpoint` lies in (in its checkpoints/), else None."""
    parent = Path(checkpoint).resolve().parent
    if parent.name != CHECKPOINTS or not _VERSION.match(parent.parent.name):
        return None
    return parent.parent if parent.parent.parent == Path(base).resolve() else None


def training_run_of(checkpoint: str | os.PathLike) -> Path | None:
    """The training run directory (`.../version_<k>`) a checkpoint belongs to, whatever its base."""
    parent = Path(checkpoint).resolve().parent
    return parent.parent if parent.name == CHECKPOINTS and _VERSION.match(parent.parent.name) else None


def recipe_name(config_paths) -> str:
    """The recipe is the last --config file outside recipes/trainer/, e.g. `quickstart/vit_digits`."""
    for path in reversed(config_paths or []):
        path = Path(str(path))
        if path.parent.name == "trainer":
            continue
        parts = path.with_suffix("").parts
        if "recipes" not in parts:
            return path.stem
        last = len(parts) - 1 - parts[::-1].index("recipes")  # a shipped recipe's path may hold another `recipes`
        return "/".join(parts[last + 1 :])
    return "default"


def check_run_name(name: str) -> str:
    """A run name is a relative path inside the run root (`quickstart/vit_digits`): no `..`, no absolute
    path and no empty component, so that no run is written outside the root."""
    parts = name.split("/")
    if name.startswith(("/", "~")) or any(part in ("", ".", "..") for part in parts) or "\\" in name:
        raise ConfigError(
            f"--run.name {name!r} is invalid; give a relative path inside --run.root, such as "
            "quickstart/vit_digits, without '..', '.', empty parts or a leading '/'."
        )
    return name


def check_writable(root: str | os.PathLike) -> None:
    """The run root can hold new directories; a one-sentence error now beats four chained tracebacks later."""
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        # A name no other process, on this node or another sharing the file system, can be using.
        Path(tempfile.mkdtemp(prefix=".write-test-", dir=root)).rmdir()
    except OSError as error:
        raise ConfigError(
            f"Cannot write runs into {str(root)!r} ({brief(error)}); choose a writable --run.root (or --output for compare)."
        ) from None


def remove_if_unused(place: RunPlace, trained: bool) -> None:
    """After a failed start, remove the directory this process created if the run never `trained` a
    batch and holds no checkpoint: an empty `version_<k>` would otherwise be what `--ckpt_path last`
    finds next time. A run that trained and then failed (a NaN loss, Ctrl-C) keeps its logs."""
    directory = place.directory
    if trained or not place.created or directory is None or not directory.is_dir():
        return
    if any((directory / CHECKPOINTS).glob("*.ckpt")):
        return
    shutil.rmtree(directory, ignore_errors=True)


class RunLock:
    """An exclusive lock on a run directory for the life of this process (file_locks.FileLock: `flock`,
    released by the kernel when the process dies, so a killed run never leaves a stale lock); a finished
    or stopped run keeps no `.lock`."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK
        self._lock = FileLock(self.path)

    def acquire(self) -> RunLock:
        holder = self._lock.acquire()
        if holder is not None:
            raise ConfigError(
                f"Run {str(self.path.parent)!r} is in use by {holder}; wait for it to end (or stop it) "
                "before resuming it, or start a new run without --ckpt_path."
            )
        return self

    def release(self) -> None:
        self._lock.release()


def place_run(command: str, base: Path, checkpoint: str | None) -> RunPlace:
    """Where `command` writes: fit from a checkpoint of a run under `base` continues that run; any other
    fit claims a new version; validate, test and predict claim `evaluations/<command>_<k>` inside the
    training run their checkpoint belongs to (or under `base` without one)."""
    rank_zero = launched_as_rank_zero()
    if command == "fit":
        resumed = version_of_checkpoint(base, checkpoint) if checkpoint else None
        if resumed is not None and Path(checkpoint).name != LAST:
            raise ConfigError(
                f"fit --ckpt_path {str(checkpoint)!r} would restart {str(resumed)!r} from an earlier point of that run "
                f"and overwrite what it wrote after it; resume it with --ckpt_path last, or copy the checkpoint out of "
                "the run's folder to start a new run from it."
            )
        if resumed is not None:  # written as the first run wrote it (the checkpoint callback compares paths)
            return RunPlace(base, Path(base) / resumed.name if rank_zero else None, resumed=True)
        return RunPlace(base, version_dir(base, claim_new_version(base)) if rank_zero else None, created=True)
    parent = (training_run_of(checkpoint) if checkpoint else None) or base
    return RunPlace(base, claim_evaluation_dir(parent, command) if rank_zero else None, created=True)


def run_logger(place: RunPlace, facts: dict, details: dict, metrics: dict[str, str], resume_step: int | None):
    """The run's TensorBoard logger, writing into `place.directory` (other ranks never write). A resumed
    fit hides what the killed run logged after its checkpoint (`purge_step`): the resumed run logs it again."""
    from lit_attention.training.run_logger import RunLogger  # Lightning: not for compare's planning or --help

    purge = {"purge_step": resume_step + 1} if place.resumed and resume_step is not None else {}
    described = {"facts": facts, "details": details, "metrics": metrics, "resumed": place.resumed}
    if place.directory is None:
        return RunLogger(save_dir=str(place.base), name="", **described)
    return RunLogger(save_dir=str(place.directory.parent), name="", version=place.directory.name, **described, **purge)


def launched_as_rank_zero() -> bool:
    """Whether this process is (or will become) global rank 0; only it creates run directories.

    Read from the launchers' environment variables, because the trainer does not exist yet when
    the run directory is chosen: torchrun (RANK), SLURM (SLURM_PROCID), Lightning's own process
    launcher (LOCAL_RANK, NODE_RANK for the processes it starts).
    """
    names = ("RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK")
    return all(int(os.environ.get(name) or 0) == 0 for name in names)
