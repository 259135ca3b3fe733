"""The one way this suite writes a file that must never be seen half-written (checkpoints, records,
per-example outcomes, compare's reports, the token cache's files, the help cache): `replace_file`. Below
every layer (as errors.py is), so that the data modules and the command line use it without loading
Lightning."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def temporary_name(path: Path) -> Path:
    """The hidden file beside `path` that `replace_file` writes first (one a killed process may leave)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def replace_file(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> Path:
    """Write `path` whole or not at all: `write(file)` fills a hidden temporary file beside it, which is
    flushed, synced and renamed over `path` (atomic on POSIX within one file system), then the folder is
    synced so that the rename survives a power loss. A failure removes the temporary file and leaves
    `path` as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = temporary_name(path)
    try:
        with open(partial, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)
    return path


def fsync_directory(directory: Path) -> None:
    """fsync `directory`, so that a rename inside it survives a power loss; a no-op where a platform
    cannot open or sync a directory."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
