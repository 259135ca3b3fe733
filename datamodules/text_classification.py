"""Text classification: byte windows of the standard library labelled by package (``stdlib``, the
embedded default, see ``stdlib_text``), a Hugging Face hub dataset (IMDB, Amazon polarity, AG News,
SST-2, ...) or local parquet/json/csv files.

Batches are dicts: ``tokens`` int64 (B, max_len), ``padding_mask`` bool (B, max_len) with True at
padding, ``labels`` int64 (B,). Texts are tokenized in the collate function (the `tokenizers`
library is fast enough), so no tokenized copy of the corpus is stored.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import torch
from datasets import ClassLabel, Dataset, Value

from lit_attention.errors import ConfigError

from .base import DataModule, check_seed, check_fraction, check_positive, lines_of, predict_paths
from .hub import (
    DataFiles,
    check_local_files,
    load_source,
    normalize_data_files,
    require_train,
    source_fingerprint,
    source_fingerprints,
    source_slug,
    split_fingerprints,
    train_val_test,
)
from .text_tokenizers import (
    PAD_ID,
    ByteTokenizer,
    TextTokenizer,
    bpe_tokenizer,
    check_tokenizer_args,
    pretrained_tokenizer,
    training_texts,
)
from .stdlib_text import HELD_OUT, WINDOWS_PER_CLASS, WINDOWS_PER_FILE, WindowCollate, check_stdlib_options, stdlib_windows


@dataclass(frozen=True)
class KnownDataset:
    num_classes: int
    text_column: str
    test_split: str = "test"


# Keyed by the last part of the hub name, so "imdb" and "stanfordnlp/imdb" both match.
KNOWN_DATASETS = {
    "imdb": KnownDataset(2, "text"),
    "amazon_polarity": KnownDataset(2, "content"),
    "ag_news": KnownDataset(4, "text"),
    "sst2": KnownDataset(2, "sentence", test_split="validation"),  # its test labels are hidden (-1)
}


class ClassificationCollate:
    """Rows of {text, label} to a padded batch; a class (not a closure) so DataLoader workers can pickle
    it. Without a label column (predict) batches carry the texts instead of labels."""

    def __init__(
        self,
        tokenizer: TextTokenizer,
        text_column: str,
        label_column: str | None,
        max_len: int,
        label_ids: dict[str, int] | None,
    ) -> None:
        self.tokenizer, self.text_column, self.label_column = tokenizer, text_column, label_column
        self.max_len, self.label_ids = max_len, label_ids

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        texts = [row[self.text_column] or "" for row in rows]
        encoded = self.tokenizer.encode_batch(texts)
        tokens = torch.full((len(rows), self.max_len), self.tokenizer.pad_id, dtype=torch.long)
        lengths = torch.zeros(len(rows), dtype=torch.long)
        for b, ids in enumerate(encoded):
            ids = torch.from_numpy(ids[: self.max_len])
            if len(ids) == 0:  # an empty text keeps one real token so that no row is all padding
                ids = torch.tensor([self.tokenizer.pad_id if self.tokenizer.eos_id is None else self.tokenizer.eos_id])
            tokens[b, : len(ids)] = ids
            lengths[b] = len(ids)
        padding_mask = torch.arange(self.max_len)[None, :] >= lengths[:, None]
        if self.label_column is None:
            return {"tokens": tokens, "padding_mask": padding_mask, "texts": texts}
        labels = [row[self.label_column] for row in rows]
        if self.label_ids is not None:
            try:
                labels = [self.label_ids[label] for label in labels]
            except KeyError as missing:
                raise ConfigError(
                    f"Label {missing.args[0]!r} does not occur in the training split, whose labels are {sorted(self.label_ids)}."
                ) from None
        # `padded` is decided here on the host, so the model needs no device read to drop an empty mask.
        return {
            "tokens": tokens,
            "padding_mask": padding_mask,
            "padded": bool(padding_mask.any()),
            "labels": torch.tensor(labels, dtype=torch.long),
        }


class TextClassificationDataModule(DataModule):
    """Text classification.

    Args:
        dataset: stdlib (embedded, no download: which standard-library package a byte window comes
            from; stdlib_text), a hub dataset name, or with data_files their format (parquet, json,
            csv), which is otherwise taken from the file extension.
        config: the hub dataset's configuration name, if it has several.
        data_files: local files, {"train": ..., "validation": ..., "test": ...} or one path (the
            training split); they take precedence over a hub name.
        text_column: the text column (default: the known column of the hub datasets above, else text).
        label_column: the label column; labels may be integers 0..K-1 or strings.
        num_classes: needed only for hub datasets outside the known ones; read from local files.
        tokenizer: bytes (UTF-8 bytes, vocabulary 259), bpe (trained on the training split, cached
            under data_dir/tokenizers) or a pretrained tokenizer's hub name.
        vocab_size: size of the BPE vocabulary (bpe only).
        max_len: every text is truncated and padded to this many tokens (stdlib: the window's bytes).
        val_fraction: share of the training split held out for validation (and for test, with a
            fixed seed, when the dataset has no test split); default 0.1. stdlib: the share of files
            in validation and again in test, by path hash; default 0.2.
        split_seed: seed of the validation split; fixed, so every run seed sees the same split.
        data_dir: where the trained BPE is cached.
        hf_cache_dir: the `datasets` cache (default: the Hugging Face default, ~/.cache/huggingface).
        packages: stdlib only: the packages to tell apart (default: asyncio, email, importlib,
            multiprocessing, unittest, xml).
        windows_per_file: stdlib only: at most this many windows of one file (default 64).
        windows_per_class: stdlib only: at most this many training windows per package (default 400;
            validation and test: the same cap scaled by their share of the files).
    """

    def __init__(
        self,
        dataset: str | None = "stdlib",
        config: str | None = None,
        data_files: DataFiles | None = None,
        text_column: str | None = None,
        label_column: str = "label",
        num_classes: int | None = None,
        tokenizer: str = "bytes",
        vocab_size: int = 8000,
        max_len: int = 256,
        val_fraction: float | None = None,
        split_seed: int = 0,
        data_dir: str = "data",
        hf_cache_dir: str | None = None,
        packages: list[str] | None = None,
        windows_per_file: int | None = None,
        windows_per_class: int | None = None,
        **loading,
    ) -> None:
        super().__init__(**loading)
        check_seed("split_seed", split_seed)
        check_positive("max_len", max_len)
        self.stdlib = data_files is None and dataset == "stdlib"
        self.val_fraction = val_fraction if val_fraction is not None else HELD_OUT if self.stdlib else 0.1
        check_fraction("val_fraction", self.val_fraction)
        check_tokenizer_args(tokenizer, vocab_size)
        self.class_names: list[str] | None = None
        if self.stdlib or any(v is not None for v in (packages, windows_per_file, windows_per_class)):
            self.class_names = check_stdlib_options(
                dataset if self.stdlib else None,
                tokenizer,
                num_classes,
                packages,
                windows_per_file,
                windows_per_class,
                self.val_fraction,
            )
            self.text_column, self.tokenizer = "text", ByteTokenizer(specials=True)
            return
        if num_classes is not None:
            check_positive("num_classes", num_classes, minimum=2)
        if data_files is None and not dataset:
            raise ConfigError("No data given; set dataset to a hub name or pass data_files.")
        known = KNOWN_DATASETS.get((dataset or "").split("/")[-1]) if data_files is None else None
        if known is None and data_files is None and num_classes is None:
            raise ConfigError(
                f"{dataset!r} is not one of the hub datasets this suite knows ({', '.join(sorted(KNOWN_DATASETS))}); "
                "check its name, or for another hub dataset pass num_classes (and text_column)."
            )
        self.text_column = text_column or (known.text_column if known else "text")
        self.test_split = known.test_split if known else "test"
        self.tokenizer: TextTokenizer | None = ByteTokenizer(specials=True) if tokenizer == "bytes" else None
        self._sources: dict[str, str] = {}  # datasets' fingerprint of each loaded split

    def model_sizes(self) -> dict[str, int]:
        hp = self.hparams
        if self.stdlib:  # from the arguments alone: nothing is read
            return {
                "vocab_size": self.tokenizer.vocab_size,
                "max_len": hp.max_len,
                "num_classes": len(self.class_names),
                "pad_id": self.tokenizer.pad_id,
            }
        if hp.tokenizer not in ("bytes", "bpe") and self.tokenizer is None:
            self.tokenizer = pretrained_tokenizer(hp.tokenizer)  # one small file, cached by huggingface_hub
        vocab_size = hp.vocab_size if self.tokenizer is None else self.tokenizer.vocab_size
        pad_id = PAD_ID if self.tokenizer is None else self.tokenizer.pad_id
        return {"vocab_size": vocab_size, "max_len": hp.max_len, "num_classes": self._num_classes(), "pad_id": pad_id}

    def _num_classes(self) -> int:
        hp = self.hparams
        known = KNOWN_DATASETS.get((hp.dataset or "").split("/")[-1]) if hp.data_files is None else None
        if hp.num_classes is not None:
            return hp.num_classes
        if known is not None:
            return known.num_classes
        check_local_files(normalize_data_files(hp.data_files))  # local files: reading the label column is cheap
        num_classes, _ = describe_labels(require_train(self._load(), f"data_files={hp.data_files!r}"), hp.label_column)
        return num_classes

    # ------------------------------------------------------------------ Lightning hooks

    def prepare_data(self) -> None:
        """Download (hub) and train the BPE once per node; setup then only reads caches."""
        if self.stdlib:  # nothing to download or train: setup reads the files
            return
        train, _, _ = self._splits()
        self._tokenizer_for(train)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None and stage != "predict":
            return
        tokenizer = self._setup_stdlib() if self.stdlib else self._setup_files()
        if stage == "predict":
            texts = lines_of(predict_paths(self.hparams.predict_files))
            self.predict_set = [{self.text_column: text} for text in texts]
            self.predict_collate = ClassificationCollate(tokenizer, self.text_column, None, self.hparams.max_len, None)
            # Counted a thousand lines at a time: a large predict file is never encoded whole here.
            self.truncated = sum(
                len(ids) > self.hparams.max_len
                for start in range(0, len(texts), 1000)
                for ids in tokenizer.encode_batch(texts[start : start + 1000])
            )

    def predict_note(self) -> str | None:
        """A line saying how many `predict` inputs were cut to max_len tokens (the model reads no further)."""
        count, total, most = getattr(self, "truncated", 0), len(self.predict_set or []), self.hparams.max_len
        if not count:
            return None
        return (
            f"note: {count} of {total} input(s) are longer than max_len={most} tokens; each was classified from its "
            f"first {most} tokens only."
        )

    def _setup_stdlib(self) -> TextTokenizer:
        hp = self.hparams
        self.window_splits = stdlib_windows(
            self.class_names,
            hp.max_len,
            hp.windows_per_file or WINDOWS_PER_FILE,
            hp.windows_per_class or WINDOWS_PER_CLASS,
            self.val_fraction,
        )
        self.train_set, self.val_set, self.test_set = (
            self.window_splits[name].dataset() for name in ("train", "validation", "test")
        )
        self.collate = WindowCollate(self.tokenizer.offset)
        return self.tokenizer

    def _setup_files(self) -> TextTokenizer:
        train, val, test = self._splits()
        label_ids = self._check_labels(train, val, test)
        self.class_names = sorted(label_ids) if label_ids else _class_names(train, self.hparams.label_column, self._num_classes())
        tokenizer = self._tokenizer_for(train)
        columns = [self.text_column, self.hparams.label_column]
        self.train_set, self.val_set, self.test_set = (d.select_columns(columns) for d in (train, val, test))
        self.collate = ClassificationCollate(
            tokenizer, self.text_column, self.hparams.label_column, self.hparams.max_len, label_ids
        )
        return tokenizer

    def compute_fingerprints(self) -> dict[str, str | None]:
        """Local files: their bytes; a hub dataset: `datasets`' fingerprint of it (hub.split_fingerprints);
        with how missing splits are carved and the two columns kept. stdlib: each split's windows, labels
        and class names."""
        hp = self.hparams
        if self.stdlib:
            return {name: split.fingerprint(self.class_names) for name, split in self.window_splits.items()}
        return split_fingerprints(
            self._sources,
            hp.data_files,
            val_fraction=self.val_fraction,
            seed=hp.split_seed,
            test_split=self.test_split,
            view=[self.text_column, hp.label_column],
        )

    # ------------------------------------------------------------------ helpers

    def _load(self):
        hp = self.hparams
        return load_source(hp.dataset, hp.config, hp.data_files, hp.hf_cache_dir)

    def _splits(self) -> tuple[Dataset, Dataset, Dataset]:
        hp = self.hparams
        source = f"Dataset {hp.dataset!r}" if hp.data_files is None else f"data_files={hp.data_files!r}"
        loaded = self._load()
        self._sources = source_fingerprints(loaded)
        train, val, test = train_val_test(
            loaded, source, val_fraction=self.val_fraction, seed=hp.split_seed, test_split=self.test_split
        )
        if self.text_column not in train.column_names:
            raise ConfigError(
                f"{source} has no text column {self.text_column!r} (its columns are {train.column_names}); set text_column."
            )
        return train, val, test

    def _check_labels(self, train: Dataset, val: Dataset, test: Dataset) -> dict[str, int] | None:
        """Every split's labels must fit num_classes (and string labels must all occur in training)."""
        train_count, label_ids = describe_labels(train, self.hparams.label_column)
        for split, data in (("training", train), ("validation", val), ("test", test)):
            count, ids = (train_count, label_ids) if data is train else describe_labels(data, self.hparams.label_column)
            unknown = sorted(set(ids or ()) - set(label_ids or ()))
            if unknown:
                raise ConfigError(
                    f"The {split} split has labels {unknown[:5]} that the training split lacks; fix the label column."
                )
            if count > self._num_classes():
                raise ConfigError(
                    f"The {split} split has {count} classes but num_classes={self._num_classes()}; "
                    f"set num_classes to at least {count}."
                )
        return label_ids

    def _tokenizer_for(self, train: Dataset) -> TextTokenizer:
        hp = self.hparams
        if hp.tokenizer == "bpe":  # trained on exactly the rows the model trains on, then cached
            key = source_fingerprint(hp.dataset, hp.config, hp.data_files, self.text_column, self.val_fraction, hp.split_seed)
            name = f"{source_slug(hp.dataset, hp.data_files)}-bpe{hp.vocab_size}-{key}.json"
            path = Path(hp.data_dir) / "tokenizers" / name
            return bpe_tokenizer(path, hp.vocab_size, functools.partial(training_texts, train, [self.text_column]))
        if self.tokenizer is None:
            self.tokenizer = pretrained_tokenizer(hp.tokenizer)
        return self.tokenizer


def _class_names(train: Dataset, column: str, count: int) -> list[str]:
    feature = train.features[column]
    return list(feature.names) if isinstance(feature, ClassLabel) else [str(i) for i in range(count)]


def describe_labels(data: Dataset, column: str) -> tuple[int, dict[str, int] | None]:
    """(number of classes, mapping of string labels to ids or None for integer labels)."""
    if column not in data.column_names:
        raise ConfigError(f"There is no label column {column!r} (columns: {data.column_names}); set label_column.")
    feature = data.features[column]
    if isinstance(feature, ClassLabel):
        return feature.num_classes, None
    values = data.select_columns([column]).with_format("arrow")[:][column]
    if isinstance(feature, Value) and feature.dtype in ("string", "large_string"):
        names = sorted(str(v) for v in pc.unique(values).to_pylist() if v is not None)
        return len(names), {name: i for i, name in enumerate(names)}
    if isinstance(feature, Value) and feature.dtype.startswith(("int", "uint")):
        low, high = pc.min_max(values).values()
        if low.as_py() is None or low.as_py() < 0:
            raise ConfigError(f"Label column {column!r} has negative or missing labels; labels must be 0..K-1 or strings.")
        return high.as_py() + 1, None
    raise ConfigError(f"Label column {column!r} has type {feature}; labels must be integers 0..K-1 or strings.")
