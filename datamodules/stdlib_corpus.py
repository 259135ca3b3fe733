"""The embedded language-modelling corpus: the CPython standard library's own ``.py`` sources.

Every Python install carries about 12 MB of them, real text that needs no download. Test suites and
installed packages are left out. Each file goes to training, validation or test by a hash of its
path relative to the standard library (a share of `val_fraction` each for validation and test), so the
splits are the same on every run and machine and never move with the run's seed.
"""

from __future__ import annotations

import hashlib
import os
import sysconfig
from pathlib import Path

from datasets import Dataset, DatasetDict

from lit_attention.errors import ConfigError

# Part of the token cache's key: a change of the split scheme must not reuse old token files.
STDLIB_LAYOUT = "splits: train / validation / test by path hash"
SPLITS = ("train", "validation", "test")
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


def split_of(relative_path: str, val_fraction: float) -> str:
    """train, validation or test, from a hash of the file's path: fixed for every run and machine."""
    digest = hashlib.sha256(relative_path.encode()).digest()
    position = int.from_bytes(digest[:8], "big") / 2**64
    return "validation" if position < val_fraction else "test" if position < 2 * val_fraction else "train"


def stdlib_corpus(val_fraction: float, max_files: int | None = None) -> DatasetDict:
    """{"train", "validation", "test"} datasets of {"path", "text"} rows, one per source file."""
    root = stdlib_root()
    splits: dict[str, dict[str, list[str]]] = {s: {"path": [], "text": []} for s in SPLITS}
    for relative in stdlib_files(root, max_files):
        split = splits[split_of(relative, val_fraction)]
        split["path"].append(relative)
        # A handful of files are not UTF-8; a replacement character is harmless for a byte-level model.
        split["text"].append((root / relative).read_bytes().decode("utf-8", errors="replace"))
    for name, columns in splits.items():
        if not columns["path"]:
            raise ConfigError(
                f"The stdlib corpus got no {name} files (max_files={max_files}, val_fraction={val_fraction}); "
                f"raise max_files or val_fraction."
            )
    return DatasetDict({name: Dataset.from_dict(columns) for name, columns in splits.items()})
