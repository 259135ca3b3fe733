"""Making a rename durable: fsync the directory that holds it. Kept apart from checkpointing.py (which
imports Lightning) so that compare's report writer can share it without loading Lightning."""

from __future__ import annotations

import os
from pathlib import Path


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
