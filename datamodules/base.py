"""What every DataModule of the suite shares: batches per device, loader workers, the seed of the
training order, the files `predict` reads, the four loaders, and the sizes the model must match.

A DataModule's `__init__` only checks its arguments: reading, downloading and tokenizing happen in
`prepare_data` / `setup`, and the few facts the model needs before that (classes, vocabulary,
lengths, image shape) come from `model_sizes()`, which reads at most metadata (a folder listing,
a tokenizer file, a label column). So `--help` never touches data, and a run builds its DataModule once.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
from torch.utils.data import DataLoader, Dataset

from lit_attention.errors import ConfigError
from lit_attention.limits import SEED_MAX  # the run's seed's range, kept for every seed of the data too

from .loaders import make_loader


class DataModule(L.LightningDataModule):
    """Base of the suite's DataModules.

    Args:
        batch_size: sequences or images per batch, per device.
        num_workers: DataLoader worker processes (0 loads in the main process).
        data_seed: seed of the training order (shuffling, sampled windows). None, the default, follows
            the run's seed (`seed_everything`), so every seed of a comparison sees its own order; set it
            to keep one order across seeds.
        predict_files: what `lit-attention predict` reads: image files or folders for images, text
            files with one text (prompt, source sentence) per line for text.
    """

    def __init__(
        self,
        *,
        batch_size: int = 32,
        num_workers: int = 0,
        data_seed: int | None = None,
        predict_files: str | list[str] | None = None,
    ) -> None:
        super().__init__()
        check_positive("batch_size", batch_size)
        check_positive("num_workers", num_workers, minimum=0)
        check_seed("data_seed", data_seed)
        # The arguments of every __init__ of the subclass chain; the run's logger shows them under "data/"
        # (logged as they are, they would clash with the model's image_size, max_len...).
        self.save_hyperparameters(logger=False)
        self.train_set: Dataset | None = None
        self.val_set: Dataset | None = None
        self.test_set: Dataset | None = None
        self.predict_set: Dataset | None = None
        self.collate: Callable | None = None  # batches of training, validation and test rows
        self.predict_collate: Callable | None = None
        self._fingerprints: dict[str, str | None] | None = None

    def model_sizes(self) -> dict[str, Any]:
        """The sizes the model must match, by the model's argument names (num_classes, vocab_size, ...).
        Cheap: reads no more than metadata, and raises ConfigError in one sentence when it cannot."""
        raise NotImplementedError

    def unprepared(self) -> str | None:
        """What `prepare_data` would still make that takes long (tokenizing a corpus), in words; None
        when nothing. A multi-device run refuses to start while it is not None (cli_input.py)."""
        return None

    def prepared_at(self) -> str | None:
        """Where this DataModule keeps what `prepare_data` made (None: nothing kept on disk)."""
        return None

    def fingerprints(self) -> dict[str, str | None]:
        """{"train", "validation", "test"}: a short content hash of each split as the run sees it (what
        it holds, not its order; None for a split that does not exist); fingerprints.py. Computed once."""
        if self.train_set is None:
            raise RuntimeError("Call setup() before asking for the data's fingerprints.")
        if self._fingerprints is None:
            self._fingerprints = self.compute_fingerprints()
        return dict(self._fingerprints)

    def compute_fingerprints(self) -> dict[str, str | None]:
        raise NotImplementedError

    # ------------------------------------------------------------------ loaders

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, "training", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, "validation")

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_set, "test")

    def predict_dataloader(self) -> DataLoader:
        if not self.hparams.predict_files:
            raise ConfigError(f"{type(self).__name__} has nothing to predict on; pass files with --data.predict_files.")
        return self._loader(self.predict_set, "predict", collate=self.predict_collate or self.collate)

    def training_sampler(self):
        """The training order; None shuffles the training set anew every epoch (with data_seed)."""
        return None

    def _loader(self, data: Dataset | None, split: str, shuffle: bool = False, collate: Callable | None = None) -> DataLoader:
        if data is None:
            raise RuntimeError(f"Call setup() before asking for the {split} DataLoader.")
        sampler = self.training_sampler() if shuffle else None
        return make_loader(
            data,
            batch_size=self.hparams.batch_size,
            num_workers=self.hparams.num_workers,
            shuffle=shuffle and sampler is None,
            sampler=sampler,
            collate_fn=collate or self.collate,
            seed=self.hparams.data_seed,
        )


def predict_paths(patterns: str | list[str], extensions: tuple[str, ...] | None = None) -> list[str]:
    """The files `predict_files` names (paths, globs, or folders searched for `extensions`), sorted
    within each pattern; a pattern that matches nothing is an error."""
    found: list[str] = []
    for pattern in [patterns] if isinstance(patterns, str) else list(patterns):
        pattern = os.path.expanduser(pattern)
        if os.path.isdir(pattern) and extensions:
            matches = [
                os.path.join(folder, name)
                for folder, _, names in os.walk(pattern)
                for name in names
                if name.lower().endswith(extensions)
            ]
        else:
            matches = [path for path in glob.glob(pattern) if os.path.isfile(path)]
        if not matches:
            what = f" (no {', '.join(extensions)} file inside)" if extensions and os.path.isdir(pattern) else ""
            raise ConfigError(f"predict_files {pattern!r} matches no file{what}; give files, globs or folders that exist.")
        found += sorted(matches)
    return found


def lines_of(paths: list[str]) -> list[str]:
    """The non-empty lines of text files, in order (one prompt, text or source sentence per line). A file
    that is not UTF-8 text (an image, an archive) is refused: decoded anyway, it would be predicted on
    as garbage without a word."""
    lines = []
    for path in paths:
        data = Path(path).read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            line = data[: error.start].count(b"\n") + 1
            raise ConfigError(
                f"predict_files {path!r} is not UTF-8 text (byte 0x{data[error.start]:02x} at line {line}); "
                "give text files with one input per line."
            ) from None
        if "\x00" in text:
            raise ConfigError(
                f"predict_files {path!r} holds NUL bytes, so it is a binary file, not text; "
                "give text files with one input per line."
            )
        # the lines a file opened as text gives (universal newlines: \n, \r\n and \r end a line)
        lines += [line for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n") if line.strip()]
    if not lines:
        raise ConfigError(f"predict_files {paths} hold no text; put one input per line.")
    return lines


def check_positive(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{name}={value!r} is invalid; it must be an integer >= {minimum}.")


def check_seed(name: str, value: int | None) -> None:
    """A seed of the data (its order, a split) is a whole number from 0 to 2**32 - 1, like the run's."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= SEED_MAX):
        raise ConfigError(f"{name}={value!r} is invalid; a seed is a whole number from 0 to {SEED_MAX}.")


def check_fraction(name: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise ConfigError(f"{name}={value!r} is invalid; it must be a fraction strictly between 0 and 1.")


def check_choice(name: str, value: object, choices) -> None:
    choices = list(choices)
    if value not in choices:
        raise ConfigError(f"{name}={value!r} is not supported; choose one of {', '.join(map(repr, choices))}.")
