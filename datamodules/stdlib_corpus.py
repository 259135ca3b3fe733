"""The embedded language-modelling corpus: the CPython standard library's own ``.py`` sources.

Every Python install carries about 12 MB of them, real text that needs no download. Test suites and
installed packages are left out. Each file goes to training or validation by a hash of its path
relative to the standard library, so the split is the same on every run and machine.
"""

from __future__ import annotations

import hashlib
import os
import sysconfig
from pathlib import Path

from datasets import Dataset, DatasetDict

from .errors import DataError

EXCLUDED_DIRS = frozenset({"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"})


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(root: Path | None = None, max_files: int | None = None) -> list[str]:
    """Relative paths (posix) of the standard library's sources, sorted; `max_files` keeps an evenly
    spaced subset for quick runs."""
    root = root or stdlib_root()
    files = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [d for d in subfolders if d not in EXCLUDED_DIRS]  # never descend into them
        relative = Path(folder).relative_to(root)
        files += [(relative / name).as_posix() for name in names if name.endswith(".py")]
    files.sort()
    if max_files is not None and max_files < len(files):
        step = len(files) / max_files
        files = [files[int(i * step)] for i in range(max_files)]
    return files


def is_validation_file(relative_path: str, val_fraction: float) -> bool:
    digest = hashlib.sha256(relative_path.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < val_fraction


def stdlib_corpus(val_fraction: float, max_files: int | None = None) -> DatasetDict:
    """{"train", "validation"} datasets of {"path", "text"} rows, one per source file."""
    root = stdlib_root()
    splits: dict[str, dict[str, list[str]]] = {s: {"path": [], "text": []} for s in ("train", "validation")}
    for relative in stdlib_files(root, max_files):
        split = splits["validation" if is_validation_file(relative, val_fraction) else "train"]
        split["path"].append(relative)
        # A handful of files are not UTF-8; a replacement character is harmless for a byte-level model.
        split["text"].append((root / relative).read_bytes().decode("utf-8", errors="replace"))
    for name, columns in splits.items():
        if not columns["path"]:
            raise DataError(
                f"The stdlib corpus got no {name} files (max_files={max_files}, val_fraction={val_fraction}); "
                f"raise max_files or change val_fraction."
            )
    return DatasetDict({name: Dataset.from_dict(columns) for name, columns in splits.items()})
