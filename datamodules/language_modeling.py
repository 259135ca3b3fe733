"""Language modelling: a corpus tokenized once into memory-mapped token files, sampled as windows.

Sources: ``stdlib`` (the embedded default, see ``stdlib_corpus``), a hub dataset
(``Salesforce/wikitext``, ``roneneldan/TinyStories``, ``Skylion007/openwebtext``, ...) or local
text/json/parquet/csv files. Batches are ``(inputs int64 (B, T), targets int64 (B, T))`` with
targets = inputs shifted by one token.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import numpy as np
from datasets import DatasetDict
from torch.utils.data import DataLoader

from .errors import DataError, check_fraction, check_positive
from .hub import (
    DataFiles,
    check_local_files,
    load_hub_dataset,
    load_local_dataset,
    local_format,
    normalize_data_files,
    require_train,
    source_fingerprint,
    source_slug,
)
from .loaders import make_loader
from .stdlib_corpus import stdlib_corpus
from .text_tokenizers import (
    ByteTokenizer,
    TextTokenizer,
    bpe_tokenizer,
    check_tokenizer_args,
    pretrained_tokenizer,
    training_texts,
)
from .token_windows import EpochSampler, EvalWindows, TokenFile, TrainWindows, token_dtype, write_token_file

SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class KnownCorpus:
    config: str | None
    rows_are_documents: bool  # False when rows are lines of running text (WikiText)


# Keyed by the last part of the hub name.
KNOWN_CORPORA = {
    "wikitext": KnownCorpus("wikitext-103-raw-v1", rows_are_documents=False),
    "TinyStories": KnownCorpus(None, rows_are_documents=True),
    "openwebtext": KnownCorpus(None, rows_are_documents=True),
}


class EncodeRows:
    """The batched `datasets.map` function: texts to token-id arrays in the token file's dtype.

    Documents end with the tokenizer's end-of-document id, so the model sees where one ends; rows
    that are lines of one running text (WikiText, .txt files) keep their own line breaks instead.
    """

    def __init__(self, tokenizer: TextTokenizer, text_column: str, dtype: np.dtype, end_documents: bool) -> None:
        self.tokenizer, self.text_column, self.dtype = tokenizer, text_column, dtype
        self.end_id = tokenizer.eos_id if end_documents else None

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        encoded = self.tokenizer.encode_batch([text or "" for text in batch[self.text_column]])
        if self.end_id is not None:
            encoded = [np.append(ids, self.end_id) for ids in encoded]
        return {"ids": [ids.astype(self.dtype) for ids in encoded]}


class LanguageModelingDataModule(L.LightningDataModule):
    """Causal language modelling on windows of ``max_len + 1`` tokens.

    Args:
        dataset: ``stdlib`` (embedded, no download), a hub dataset name, or with ``data_files`` the
            files' format (``text``, ``json``, ``parquet``, ``csv``; else taken from the extension).
        config: hub configuration (default ``wikitext-103-raw-v1`` for WikiText).
        data_files: local files, one path or ``{"train": ..., "validation": ..., "test": ...}``.
        text_column: the column holding text (``.txt`` files and ``stdlib`` always have ``text``).
        tokenizer: ``bytes`` (vocabulary 256, NUL ends a document), ``bpe`` (trained on the
            training split, cached) or a pretrained tokenizer's hub name such as ``gpt2``.
        vocab_size: BPE vocabulary size (``bpe`` only).
        max_len: tokens per training sequence.
        batch_size: per device.
        num_workers: DataLoader workers; 0 is fine, reading windows from the memory map is cheap.
        train_windows_per_epoch: windows in one training epoch (new random windows every epoch).
        val_windows: fixed validation windows, evenly spaced; None evaluates every non-overlapping one.
        val_fraction: share held out for validation when the source has no validation split
            (stdlib: by file; others: the last rows).
        seed: seed of the training windows.
        num_proc: processes for tokenizing (default: all cores up to 8; one for small corpora).
        max_files: ``stdlib`` only: use an evenly spaced subset of this many files (quick runs).
        data_dir: where token files and tokenizers are cached (``data_dir/tokens``, ``data_dir/tokenizers``).
        hf_cache_dir: the `datasets` cache (default: the Hugging Face default).
    """

    def __init__(
        self,
        dataset: str | None = "stdlib",
        config: str | None = None,
        data_files: DataFiles | None = None,
        text_column: str = "text",
        tokenizer: str = "bytes",
        vocab_size: int = 8000,
        max_len: int = 256,
        batch_size: int = 32,
        num_workers: int = 0,
        train_windows_per_epoch: int = 10_000,
        val_windows: int | None = 256,
        val_fraction: float = 0.05,
        seed: int = 0,
        num_proc: int | None = None,
        max_files: int | None = None,
        data_dir: str = "data",
        hf_cache_dir: str | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        for name, value in (("max_len", max_len), ("batch_size", batch_size),
                            ("train_windows_per_epoch", train_windows_per_epoch)):
            check_positive(name, value)
        for name, value in (("val_windows", val_windows), ("num_proc", num_proc), ("max_files", max_files)):
            if value is not None:
                check_positive(name, value)
        check_positive("num_workers", num_workers, minimum=0)
        check_fraction("val_fraction", val_fraction)
        check_tokenizer_args(tokenizer, vocab_size)
        if data_files is None and not dataset:
            raise DataError("No corpus given; set dataset ('stdlib' or a hub name) or data_files.")
        if max_files is not None and (data_files is not None or dataset != "stdlib"):
            raise DataError("max_files applies only to dataset='stdlib'; remove it for other corpora.")
        if data_files is not None:
            check_local_files(normalize_data_files(data_files))  # a missing or empty file fails now, not after setup
        known = KNOWN_CORPORA.get((dataset or "").split("/")[-1]) if data_files is None else None
        self.dataset, self.data_files, self.text_column = dataset, data_files, text_column
        self.config = config if config is not None or known is None else known.config
        self.file_format = None if data_files is None else local_format(normalize_data_files(data_files), dataset)
        # .txt rows are lines that keep their own line breaks; other local rows are whole documents.
        self.rows_are_documents = known.rows_are_documents if known else self.file_format != "text"
        self.tokenizer_name, self.batch_size, self.num_workers = tokenizer, batch_size, num_workers
        self.train_windows_per_epoch, self.val_windows = train_windows_per_epoch, val_windows
        self.val_fraction, self.seed, self.num_proc, self.max_files = val_fraction, seed, num_proc, max_files
        self.data_dir, self.hf_cache_dir = data_dir, hf_cache_dir

        # What the model needs, known before setup so that the CLI can link it.
        self.tokenizer: TextTokenizer | None = None
        if tokenizer == "bytes":
            self.tokenizer = ByteTokenizer(specials=False)
        elif tokenizer != "bpe":
            self.tokenizer = pretrained_tokenizer(tokenizer)
        self.vocab_size = vocab_size if self.tokenizer is None else self.tokenizer.vocab_size
        self.max_len = max_len
        self.token_files: dict[str, TokenFile] = {}
        self.train_set: TrainWindows | None = None
        self.val_set: EvalWindows | None = None
        self.test_set: EvalWindows | None = None

    # ------------------------------------------------------------------ Lightning hooks

    def prepare_data(self) -> None:
        """Tokenize once per node; later runs (and the other ranks) find the token files cached."""
        if not self._meta_path.exists():
            self._build_token_files()

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        if not self._meta_path.exists():
            self._build_token_files()
        meta = json.loads(self._meta_path.read_text())
        if meta["vocab_size"] > self.vocab_size:
            # The model is sized from self.vocab_size; ids past it would crash the embedding mid-run.
            raise DataError(
                f"The token cache {str(self.cache_dir)!r} holds ids up to {meta['vocab_size'] - 1}, out of range "
                f"for vocab_size={self.vocab_size}; delete that cache to re-tokenize, or raise vocab_size."
            )
        self.token_files = {s: TokenFile(self.cache_dir / f"{s}.bin", meta["dtype"]) for s in meta["splits"]}
        self.train_set = TrainWindows(self.token_files["train"], self.max_len, self.train_windows_per_epoch, self.seed)
        self.val_set = EvalWindows(self.token_files["validation"], self.max_len, self.val_windows, "validation")
        if "test" in self.token_files:
            self.test_set = EvalWindows(self.token_files["test"], self.max_len, self.val_windows, "test")
        else:
            self.test_set = self.val_set

    def train_dataloader(self) -> DataLoader:
        self._require_setup()
        return make_loader(self.train_set, batch_size=self.batch_size, num_workers=self.num_workers,
                           sampler=EpochSampler(self.train_set))

    def val_dataloader(self) -> DataLoader:
        self._require_setup()
        return make_loader(self.val_set, batch_size=self.batch_size, num_workers=self.num_workers)

    def test_dataloader(self) -> DataLoader:
        self._require_setup()
        return make_loader(self.test_set, batch_size=self.batch_size, num_workers=self.num_workers)

    # ------------------------------------------------------------------ token files

    @property
    def cache_dir(self) -> Path:
        extra = [self.config, self.text_column, self.tokenizer_name, self.vocab_size, self.val_fraction]
        if self.data_files is None and self.dataset == "stdlib":
            extra += [sys.version, str(self.max_files)]  # the corpus is this interpreter's own library
        key = source_fingerprint(self.dataset, None, self.data_files, *extra)
        slug = source_slug(self.dataset, self.data_files)
        return Path(self.data_dir) / "tokens" / f"{slug}-{self.tokenizer_name.replace('/', '__')}-{key}"

    @property
    def _meta_path(self) -> Path:
        return self.cache_dir / "meta.json"

    def _build_token_files(self) -> None:
        splits = self._load_splits()
        tokenizer = self.tokenizer
        if tokenizer is None:
            path = Path(self.data_dir) / "tokenizers" / f"{self.cache_dir.name}-bpe{self.vocab_size}.json"
            texts = functools.partial(training_texts, splits["train"], [self.text_column])
            tokenizer = bpe_tokenizer(path, self.vocab_size, texts)
        dtype = token_dtype(tokenizer.vocab_size)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        encode = EncodeRows(tokenizer, self.text_column, dtype, self.rows_are_documents)
        counts = write_token_files(splits, self.cache_dir, encode, self.num_proc)
        meta = {"dtype": dtype.name, "vocab_size": tokenizer.vocab_size, "splits": list(splits), "tokens": counts}
        partial = self._meta_path.with_name(f"meta.json.{os.getpid()}.tmp")
        partial.write_text(json.dumps(meta, indent=1))
        os.replace(partial, self._meta_path)  # the meta file marks a complete cache

    def _load_splits(self) -> DatasetDict:
        """{train, validation[, test]} with a text column, carving validation when the source has none."""
        if self.data_files is None and self.dataset == "stdlib":
            return stdlib_corpus(self.val_fraction, self.max_files)
        if self.data_files is not None:
            kwargs = {"keep_linebreaks": True} if self.file_format == "text" else {}
            loaded = load_local_dataset(normalize_data_files(self.data_files), self.file_format, self.hf_cache_dir,
                                        **kwargs)
            source = f"data_files={self.data_files!r}"
        else:
            loaded = load_hub_dataset(self.dataset, self.config, self.hf_cache_dir)
            source = f"Dataset {self.dataset!r}"
        if self.text_column not in require_train(loaded, source).column_names:
            raise DataError(f"{source} has no text column {self.text_column!r} (its columns are "
                            f"{loaded['train'].column_names}); set text_column.")
        splits = {name: loaded[name] for name in SPLITS if name in loaded}
        if "validation" not in splits:
            # The last rows, not a random sample: neighbouring lines of one text stay on one side.
            parts = splits["train"].train_test_split(test_size=self.val_fraction, shuffle=False)
            splits["train"], splits["validation"] = parts["train"], parts["test"]
        return DatasetDict(splits)

    def _require_setup(self) -> None:
        if self.train_set is None:
            raise RuntimeError("Call setup() before asking for a DataLoader.")


def write_token_files(splits: DatasetDict, out_dir: Path, encode: EncodeRows, num_proc: int | None) -> dict[str, int]:
    """Tokenize every split with a batched, multi-process `datasets.map` and write `<split>.bin`."""
    scratch = out_dir / f"scratch-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    counts = {}
    try:
        for name, data in splits.items():
            procs = min(num_proc or (min(8, os.cpu_count() or 1) if len(data) >= 1000 else 1), len(data))
            tokenized = data.map(
                encode, batched=True, num_proc=procs if procs > 1 else None, remove_columns=data.column_names,
                cache_file_name=str(scratch / f"{name}.arrow"), desc=f"Tokenizing {name}",
            )
            counts[name] = write_token_file(out_dir / f"{name}.bin", tokenized.data.column("ids"), encode.dtype)
            del tokenized
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # the intermediate Arrow copy is no longer needed
    return counts
