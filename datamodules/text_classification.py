"""Text classification from a Hugging Face hub dataset (IMDB, Amazon polarity, AG News, SST-2, ...)
or local parquet/json/csv files.

Batches are dicts: ``tokens`` int64 (B, max_len), ``padding_mask`` bool (B, max_len) with True at
padding, ``labels`` int64 (B,). Texts are tokenized in the collate function (the `tokenizers`
library is fast enough), so no tokenized copy of the corpus is stored.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import pyarrow.compute as pc
import torch
from datasets import ClassLabel, Dataset, Value
from torch.utils.data import DataLoader

from .errors import DataError, check_fraction, check_positive
from .hub import DataFiles, load_source, require_train, source_fingerprint, source_slug, train_val_test
from .loaders import make_loader
from .text_tokenizers import (
    PAD_ID,
    ByteTokenizer,
    TextTokenizer,
    bpe_tokenizer,
    check_tokenizer_args,
    pretrained_tokenizer,
    training_texts,
)


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
    """Rows of {text, label} to a padded batch; a class (not a closure) so DataLoader workers can pickle it."""

    def __init__(
        self, tokenizer: TextTokenizer, text_column: str, label_column: str, max_len: int,
        label_ids: dict[str, int] | None,
    ) -> None:
        self.tokenizer, self.text_column, self.label_column = tokenizer, text_column, label_column
        self.max_len, self.label_ids = max_len, label_ids

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        encoded = self.tokenizer.encode_batch([row[self.text_column] or "" for row in rows])
        tokens = torch.full((len(rows), self.max_len), self.tokenizer.pad_id, dtype=torch.long)
        lengths = torch.zeros(len(rows), dtype=torch.long)
        for b, ids in enumerate(encoded):
            ids = torch.from_numpy(ids[: self.max_len])
            if len(ids) == 0:  # an empty text keeps one real token so that no row is all padding
                ids = torch.tensor([self.tokenizer.pad_id if self.tokenizer.eos_id is None else self.tokenizer.eos_id])
            tokens[b, : len(ids)] = ids
            lengths[b] = len(ids)
        padding_mask = torch.arange(self.max_len)[None, :] >= lengths[:, None]
        labels = [row[self.label_column] for row in rows]
        if self.label_ids is not None:
            try:
                labels = [self.label_ids[label] for label in labels]
            except KeyError as missing:
                raise DataError(
                    f"Label {missing.args[0]!r} does not occur in the training split, whose labels are "
                    f"{sorted(self.label_ids)}."
                ) from None
        return {"tokens": tokens, "padding_mask": padding_mask, "labels": torch.tensor(labels, dtype=torch.long)}


class TextClassificationDataModule(L.LightningDataModule):
    """Text classification.

    Args:
        dataset: a hub dataset name; with ``data_files`` it may instead name their format
            (``parquet``, ``json``, ``csv``), which is otherwise taken from the file extension.
        config: the hub dataset's configuration name, if it has several.
        data_files: local files, ``{"train": ..., "validation": ..., "test": ...}`` or one path
            (the training split); they take precedence over a hub name.
        text_column, label_column: column names (``text_column`` defaults to the known column of
            the hub datasets above, else ``text``). Labels may be integers 0..K-1 or strings.
        num_classes: needed only for hub datasets outside the known ones; inferred from local files.
        tokenizer: ``bytes`` (UTF-8 bytes, vocabulary 259), ``bpe`` (trained on the training split,
            cached under ``data_dir/tokenizers``) or a pretrained tokenizer's hub name.
        vocab_size: size of the BPE vocabulary (``bpe`` only).
        max_len: every text is truncated and padded to this many tokens.
        batch_size: per device.
        num_workers: DataLoader workers; 0 works for everything here, 2-4 help for long texts.
        val_fraction: share of the training split held out for validation (and for test, with a
            fixed seed, when the dataset has no test split).
        seed: seed of the validation split.
        data_dir: where the trained BPE is cached.
        hf_cache_dir: the `datasets` cache (default: the Hugging Face default, ~/.cache/huggingface).
    """

    def __init__(
        self,
        dataset: str | None = "stanfordnlp/imdb",
        config: str | None = None,
        data_files: DataFiles | None = None,
        text_column: str | None = None,
        label_column: str = "label",
        num_classes: int | None = None,
        tokenizer: str = "bytes",
        vocab_size: int = 8000,
        max_len: int = 256,
        batch_size: int = 32,
        num_workers: int = 0,
        val_fraction: float = 0.1,
        seed: int = 0,
        data_dir: str = "data",
        hf_cache_dir: str | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        for name, value in (("max_len", max_len), ("batch_size", batch_size)):
            check_positive(name, value)
        check_positive("num_workers", num_workers, minimum=0)
        check_fraction("val_fraction", val_fraction)
        check_tokenizer_args(tokenizer, vocab_size)
        known = KNOWN_DATASETS.get((dataset or "").split("/")[-1]) if data_files is None else None
        self.dataset, self.config, self.data_files = dataset, config, data_files
        self.text_column = text_column or (known.text_column if known else "text")
        self.label_column, self.test_split = label_column, known.test_split if known else "test"
        self.tokenizer_name, self.batch_size, self.num_workers = tokenizer, batch_size, num_workers
        self.val_fraction, self.seed, self.data_dir, self.hf_cache_dir = val_fraction, seed, data_dir, hf_cache_dir

        # What the model needs, known before setup so that the CLI can link it.
        self.tokenizer: TextTokenizer | None = None
        if tokenizer == "bytes":
            self.tokenizer = ByteTokenizer(specials=True)
        elif tokenizer != "bpe":
            self.tokenizer = pretrained_tokenizer(tokenizer)
        self.vocab_size = vocab_size if self.tokenizer is None else self.tokenizer.vocab_size
        self.pad_id = PAD_ID if self.tokenizer is None else self.tokenizer.pad_id
        self.max_len = max_len
        if num_classes is not None:
            check_positive("num_classes", num_classes, minimum=2)
        elif known is not None:
            num_classes = known.num_classes
        elif data_files is not None:  # local files: reading the label column once is cheap
            num_classes, _ = describe_labels(require_train(self._load(), f"data_files={data_files!r}"), label_column)
        else:
            raise DataError(
                f"num_classes is unknown for dataset {dataset!r}; pass num_classes (known datasets: "
                f"{', '.join(sorted(KNOWN_DATASETS))})."
            )
        self.num_classes = num_classes
        self.train_set: Dataset | None = None
        self.val_set: Dataset | None = None
        self.test_set: Dataset | None = None
        self._collate: ClassificationCollate | None = None

    # ------------------------------------------------------------------ Lightning hooks

    def prepare_data(self) -> None:
        """Download (hub) and train the BPE once per node; setup then only reads caches."""
        train, _, _ = self._splits()
        self._tokenizer_for(train)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        train, val, test = self._splits()
        label_ids = self._check_labels(train, val, test)
        tokenizer = self._tokenizer_for(train)
        columns = [self.text_column, self.label_column]
        self.train_set, self.val_set, self.test_set = (d.select_columns(columns) for d in (train, val, test))
        self._collate = ClassificationCollate(tokenizer, self.text_column, self.label_column, self.max_len, label_ids)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_set)

    # ------------------------------------------------------------------ helpers

    def _load(self):
        return load_source(self.dataset, self.config, self.data_files, self.hf_cache_dir)

    def _splits(self) -> tuple[Dataset, Dataset, Dataset]:
        source = f"Dataset {self.dataset!r}" if self.data_files is None else f"data_files={self.data_files!r}"
        train, val, test = train_val_test(
            self._load(), source, val_fraction=self.val_fraction, seed=self.seed, test_split=self.test_split
        )
        if self.text_column not in train.column_names:
            raise DataError(
                f"{source} has no text column {self.text_column!r} (its columns are {train.column_names}); "
                f"set text_column."
            )
        return train, val, test

    def _check_labels(self, train: Dataset, val: Dataset, test: Dataset) -> dict[str, int] | None:
        """Every split's labels must fit num_classes (and string labels must all occur in training)."""
        train_count, label_ids = describe_labels(train, self.label_column)
        for split, data in (("training", train), ("validation", val), ("test", test)):
            count, ids = (train_count, label_ids) if data is train else describe_labels(data, self.label_column)
            unknown = sorted(set(ids or ()) - set(label_ids or ()))
            if unknown:
                raise DataError(
                    f"The {split} split has labels {unknown[:5]} that the training split lacks; fix the label column."
                )
            if count > self.num_classes:
                raise DataError(
                    f"The {split} split has {count} classes but num_classes={self.num_classes}; "
                    f"set num_classes to at least {count}."
                )
        return label_ids

    def _tokenizer_for(self, train: Dataset) -> TextTokenizer:
        if self.tokenizer is None:  # BPE: trained on exactly the rows the model trains on, then cached
            key = source_fingerprint(self.dataset, self.config, self.data_files, self.text_column,
                                     self.val_fraction, self.seed)
            name = f"{source_slug(self.dataset, self.data_files)}-bpe{self.vocab_size}-{key}.json"
            path = Path(self.data_dir) / "tokenizers" / name
            return bpe_tokenizer(path, self.vocab_size, functools.partial(training_texts, train, [self.text_column]))
        return self.tokenizer

    def _loader(self, data: Dataset | None, shuffle: bool = False) -> DataLoader:
        if data is None or self._collate is None:
            raise RuntimeError("Call setup() before asking for a DataLoader.")
        return make_loader(data, batch_size=self.batch_size, num_workers=self.num_workers, shuffle=shuffle,
                           collate_fn=self._collate)


def describe_labels(data: Dataset, column: str) -> tuple[int, dict[str, int] | None]:
    """(number of classes, mapping of string labels to ids or None for integer labels)."""
    if column not in data.column_names:
        raise DataError(f"There is no label column {column!r} (columns: {data.column_names}); set label_column.")
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
            raise DataError(
                f"Label column {column!r} has negative or missing labels; labels must be 0..K-1 or strings."
            )
        return high.as_py() + 1, None
    raise DataError(f"Label column {column!r} has type {feature}; labels must be integers 0..K-1 or strings.")
