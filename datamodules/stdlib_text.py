"""The embedded text-classification task: which standard-library package does this code come from?

Every Python install carries the CPython standard library's ``.py`` sources (the files that
``stdlib_corpus`` walks), so this task needs no download. An example is a window of ``max_len``
consecutive bytes of one file, and its label is the file's top-level package: ``asyncio/events.py``
and ``email/mime/text.py`` are ``asyncio`` and ``email``; a top-level module (``os.py``) belongs to
no package and is not used.

Why it is a fair test of attention. A window is a short, arbitrary cut through real code: often
mid-line, sometimes all comment, with no file name and usually no import line. What tells the
packages apart is vocabulary (``await``, ``loop``, ``header``, ``node``, ``assert``, ``spec``) and
how it is used, which a model must assemble from bytes: a byte's identity alone is weak evidence, a
pair of bytes better, a whole identifier in context better still. The two baselines of
``stdlib_text_baselines`` measure exactly the first two rungs of that ladder (byte counts, byte-pair
counts), so a Transformer's score above them is what its attention and depth add over local statistics.

The classes (``STDLIB_PACKAGES``), by a stated rule: the packages that every CPython 3.10-3.13
carries (including Debian's, which ships tkinter, idlelib and turtledemo apart) and that have at
least two files with a full 128-byte window in each of the three splits; minus ``encodings``,
whose files are generated codec tables rather than code (a class any byte count recognises). That
leaves six: asyncio, email, importlib, multiprocessing, unittest and xml, so chance is 1/6.

Splits. Each file goes to train, validation or test by a hash of its path (``stdlib_corpus.split_of``,
as the language-modelling corpus does, with ``held_out`` = 20% each here, as the packages have few
files), so no file is in two splits and the splits never move with the run's seed. The standard
library is small: the held-out splits hold 2 to 9 files per class, and windows of one file are
correlated, so a held-out score rests on fewer independent samples than its window count suggests.

Windows. A file of n bytes holds n // max_len non-overlapping full windows; at most
``windows_per_file`` of them are used, evenly spaced through the file, so a long file does not
dominate its class. A class takes at most ``windows_per_class`` training windows (and the same cap
scaled by the held-out share, ``windows_per_class * held_out / (1 - 2 * held_out)``, in validation
and test), spread as evenly over its files as their lengths allow. The cap balances training, so a
prior cannot win; it balances the held-out splits as far as their few files allow, so accuracy
weighs classes about equally and macro-F1 (which weighs them exactly equally) stays close to it.
Everything is fixed by the files alone; the run's seed only orders the training windows.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import TensorDataset

from lit_attention.errors import ConfigError

from .fingerprints import fingerprint
from .stdlib_corpus import SPLITS, split_of, stdlib_files, stdlib_root

STDLIB_PACKAGES = ("asyncio", "email", "importlib", "multiprocessing", "unittest", "xml")
HELD_OUT = 0.2  # share of files in validation, and as much again in test
WINDOWS_PER_FILE = 64
WINDOWS_PER_CLASS = 400


@dataclass(frozen=True)
class WindowSplit:
    """One split's windows: bytes (N, max_len) uint8, labels (N,) int64, and where each window is from."""

    windows: np.ndarray
    labels: np.ndarray
    paths: tuple[str, ...]
    starts: np.ndarray

    def fingerprint(self, class_names: list[str]) -> str:
        """What the split holds: its windows' bytes, their labels and the labels' names."""
        return fingerprint(self.windows, self.labels, class_names)

    def dataset(self) -> TensorDataset:
        return TensorDataset(torch.from_numpy(self.windows), torch.from_numpy(self.labels))


def package_of(relative_path: str, root: Path | None = None) -> str | None:
    """The top-level package of a standard-library file (a folder with an __init__.py), or None."""
    first, _, rest = relative_path.partition("/")
    if not rest:
        return None
    return first if ((root or stdlib_root()) / first / "__init__.py").is_file() else None


@functools.lru_cache(maxsize=4)
def package_files(root: Path) -> dict[str, tuple[str, ...]]:
    """{package: its .py files' relative paths, sorted}, for every top-level package of the library at `root`."""
    found: dict[str, list[str]] = {}
    for relative in stdlib_files(root):
        package = package_of(relative, root)
        if package is not None:
            found.setdefault(package, []).append(relative)
    return {package: tuple(paths) for package, paths in sorted(found.items())}


def check_packages(packages: list[str] | tuple[str, ...], root: Path | None = None) -> list[str]:
    """The class names, sorted; an unknown or repeated package, or fewer than two, is one sentence."""
    available = package_files(root or stdlib_root())
    unknown = [p for p in packages if p not in available]
    if unknown:
        raise ConfigError(
            f"packages {unknown} are not packages of this Python's standard library; choose from {', '.join(available)}."
        )
    if len(set(packages)) != len(packages) or len(packages) < 2:
        raise ConfigError(f"packages={list(packages)} must name at least two different standard-library packages.")
    return sorted(packages)


def check_stdlib_options(
    dataset: str | None,
    tokenizer: str,
    num_classes: int | None,
    packages: list[str] | None,
    windows_per_file: int | None,
    windows_per_class: int | None,
    held_out: float,
) -> list[str]:
    """The class names of the stdlib task from TextClassificationDataModule's options (dataset None: another
    dataset, for which the stdlib's own options are an error), or one sentence on what is wrong."""
    if dataset != "stdlib":
        raise ConfigError(
            "packages, windows_per_file and windows_per_class apply to dataset='stdlib' only; leave them unset for other data."
        )
    if tokenizer != "bytes":
        raise ConfigError(
            f"tokenizer={tokenizer!r} does not apply to dataset='stdlib', whose windows are bytes; use tokenizer='bytes'."
        )
    for name, value in (("windows_per_file", windows_per_file), ("windows_per_class", windows_per_class)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ConfigError(f"{name}={value!r} is invalid; it must be an integer >= 1.")
    if held_out >= 0.5:
        raise ConfigError(
            f"val_fraction={held_out!r} leaves no training files for dataset='stdlib' (validation and "
            "test take that share each); use a value below 0.5."
        )
    names = check_packages(list(STDLIB_PACKAGES) if packages is None else list(packages))
    if num_classes is not None and num_classes != len(names):
        raise ConfigError(
            f"num_classes={num_classes} disagrees with the {len(names)} packages of dataset='stdlib'; leave num_classes unset."
        )
    return names


def held_out_cap(windows_per_class: int, held_out: float) -> int:
    """The validation and test cap per class: the training cap, scaled by their share of the files."""
    return max(1, round(windows_per_class * held_out / (1 - 2 * held_out)))


def spread(quota: int, available: list[int]) -> list[int]:
    """How many windows each file gives so that `quota` is met as evenly over the files as their
    `available` windows allow (each gets the same number, except those that run out)."""
    take = [0] * len(available)
    open_files = [i for i, n in enumerate(available) if n > 0]
    while quota > 0 and open_files:
        share = max(1, quota // len(open_files))
        for i in list(open_files):
            given = min(share, available[i] - take[i], quota)
            take[i] += given
            quota -= given
            if take[i] == available[i]:
                open_files.remove(i)
            if quota == 0:
                break
    return take


def window_starts(size: int, max_len: int, count: int) -> np.ndarray:
    """Byte offsets of `count` non-overlapping windows evenly spaced through a file of `size` bytes."""
    full = size // max_len
    slots = (np.arange(count) * full + full // 2) // max(count, 1) if count < full else np.arange(full)
    return slots.astype(np.int64)[:count] * max_len


def stdlib_windows(
    packages: list[str],
    max_len: int,
    windows_per_file: int = WINDOWS_PER_FILE,
    windows_per_class: int = WINDOWS_PER_CLASS,
    held_out: float = HELD_OUT,
    root: Path | None = None,
) -> dict[str, WindowSplit]:
    """{"train", "validation", "test"}: the windows of each split, labelled by the index of their
    package in sorted `packages` (check_packages); a class without windows in a split is one sentence."""
    root = root or stdlib_root()
    names = check_packages(packages, root)
    caps = {"train": windows_per_class, **dict.fromkeys(("validation", "test"), held_out_cap(windows_per_class, held_out))}
    parts: dict[str, list[tuple[np.ndarray, list[str], np.ndarray, int]]] = {s: [] for s in SPLITS}
    for label, package in enumerate(names):
        by_split: dict[str, list[str]] = {s: [] for s in SPLITS}
        for relative in package_files(root)[package]:
            by_split[split_of(relative, held_out)].append(relative)
        for split, paths in by_split.items():
            data = [(root / p).read_bytes() for p in paths]
            available = [min(windows_per_file, len(d) // max_len) for d in data]
            windows, sources, starts = [], [], []
            for path, blob, count in zip(paths, data, spread(min(caps[split], sum(available)), available)):
                for start in window_starts(len(blob), max_len, count):
                    windows.append(np.frombuffer(blob, np.uint8, max_len, int(start)))
                    sources.append(path)
                    starts.append(start)
            if not windows:
                raise ConfigError(
                    f"Package {package!r} has no {split} file of at least max_len={max_len} bytes "
                    f"(held_out={held_out}); choose other packages or a smaller max_len."
                )
            parts[split].append((np.stack(windows), sources, np.asarray(starts, np.int64), label))
    return {
        split: WindowSplit(
            windows=np.concatenate([w for w, _, _, _ in chunks]),
            labels=np.concatenate([np.full(len(w), label, np.int64) for w, _, _, label in chunks]),
            paths=tuple(p for _, sources, _, _ in chunks for p in sources),
            starts=np.concatenate([s for _, _, s, _ in chunks]),
        )
        for split, chunks in parts.items()
    }


class WindowCollate:
    """Rows of (window bytes, label) to the text classifier's batch: byte b is token b + `offset` (the
    byte tokenizer's ids, after its pad/bos/eos), every position real (windows are full)."""

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def __call__(self, rows: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
        windows = torch.stack([window for window, _ in rows]).long() + self.offset
        labels = torch.stack([label for _, label in rows])
        return {"tokens": windows, "padding_mask": torch.zeros_like(windows, dtype=torch.bool), "padded": False, "labels": labels}
