"""Writing a report file whole or not at all: the new bytes go to a hidden temporary file beside it,
which is synced and renamed over the old one, so a sweep killed while it writes leaves the previous
results.md, results.csv, timings.csv, comparisons.csv or results.png, never a truncated one. A file that cannot be
written is one sentence (a ConfigError), not a traceback."""

from __future__ import annotations

import os
import re
from pathlib import Path

from lit_attention.errors import ConfigError, brief
from lit_attention.atomic_files import replace_file

REPORT_FILES = ("results.md", "results.csv", "timings.csv", "comparisons.csv", "results.png")
TEMPORARY = re.compile(r"\.(" + "|".join(map(re.escape, REPORT_FILES)) + r")\.\d+\.tmp")


def is_temporary(name: str) -> bool:
    """Whether `name` is one of these temporary files (one a killed sweep may have left behind)."""
    return TEMPORARY.fullmatch(name) is not None


def write_atomically(path: str | os.PathLike, data: str | bytes) -> None:
    """Replace `path` by `data` (text is written as UTF-8) in one rename; a failure leaves it as it was."""
    path = Path(path)
    refuse_unwritable(path)
    try:
        replace_file(path, lambda file: file.write(data.encode() if isinstance(data, str) else data))
    except OSError as error:
        why = f"{type(error).__name__}: {error.strerror}" if error.strerror else brief(error)  # not the temporary's name
        raise ConfigError(
            f"Cannot write the report {str(path)!r} ({why}); make it and its folder writable, or choose another --output."
        ) from None


def refuse_unwritable(path: Path) -> None:
    """A report file this user may not write (read-only, or a directory in its place) is refused, as an
    in-place write would have been: the rename alone would replace a read-only file."""
    if path.is_dir() or (path.exists() and not os.access(path, os.W_OK)):
        what = "a directory" if path.is_dir() else "read-only"
        raise ConfigError(
            f"Cannot write the report {str(path)!r} ({what}); make it writable (or remove it), or choose another --output."
        )


def check_reports_writable(output: Path) -> None:
    """Before any run trains: every report file already in `output` can be replaced."""
    for name in REPORT_FILES:
        refuse_unwritable(Path(output) / name)
