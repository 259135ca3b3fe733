"""Language modelling: a corpus tokenized once into memory-mapped token files, sampled as windows.

Sources: ``stdlib`` (the embedded default, see ``stdlib_corpus``), a hub dataset
(``Salesforce/wikitext``, ``roneneldan/TinyStories``, ``Skylion007/openwebtext``, ...) or local
text/json/parquet/csv files. Batches are ``(inputs int64 (B, T), targets int64 (B, T))`` with
targets = inputs shifted by one token.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from datasets import DatasetDict

from lit_attention.atomic_files import replace_file
from lit_attention.errors import ConfigError

from .base import DataModule, check_seed, check_choice, check_fraction, check_positive, lines_of, predict_paths
from .fingerprints import file_sha256, fingerprint
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
from .loaders import global_seed
from .token_cache import EncodeRows, check_token_files, read_meta, sample_digest, token_array, write_token_files
from .ngram_floors import ngram_floors
from .stdlib_corpus import STDLIB_LAYOUT, stdlib_corpus
from .text_tokenizers import (
    ByteTokenizer,
    TextTokenizer,
    bpe_tokenizer,
    check_tokenizer_args,
    pretrained_tokenizer,
    training_texts,
)
from .token_windows import EpochSampler, EvalWindows, TokenFile, TrainWindows, token_dtype

SPLITS = ("train", "validation", "test")
# Part of the token cache's key: sources without a test split get one carved (older caches had none).
CARVED_LAYOUT = "missing validation and test splits carved from train"


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


def smallest_splittable(fraction: float, carves: int) -> int:
    """The fewest rows from which `carves` held-out splits of `fraction` each (rounded up, as `datasets`
    splits) leave every split, training too, at least one row."""
    rows = 1
    while True:
        left = rows
        for _ in range(carves):
            left -= max(1, math.ceil(fraction * left))
        if left >= 1:
            return rows
        rows += 1


class LanguageModelingDataModule(DataModule):
    """Causal language modelling on windows of ``max_len + 1`` tokens.

    Args:
        dataset: stdlib (embedded, no download), a hub dataset name, or with data_files the files'
            format (text, json, parquet, csv; else taken from the extension).
        config: hub configuration (default wikitext-103-raw-v1 for WikiText).
        data_files: local files, one path or {"train": ..., "validation": ..., "test": ...}.
        text_column: the column holding text (.txt files and stdlib always have text).
        tokenizer: bytes (vocabulary 256, NUL ends a document), bpe (trained on the training split,
            cached) or a pretrained tokenizer's hub name such as gpt2.
        vocab_size: BPE vocabulary size (bpe only).
        max_len: tokens per training sequence.
        train_windows_per_epoch: windows in one training epoch (new random windows every epoch).
        val_windows: fixed validation (and test) windows, evenly spaced; None evaluates every
            non-overlapping one.
        val_fraction: share held out for validation when the source has no validation split, and as
            much again for a test split when it has none (stdlib: by file).
        val_split: how that share is chosen from a source without a validation split: last (the
            last rows, so neighbouring lines of one text stay on one side) or random (documents
            drawn with split_seed, as nanoGPT and the nonlinear-query authors do).
        split_seed: seed of a random validation split (nanoGPT's 2357).
        num_proc: processes for tokenizing (default: all cores up to 8; one for small corpora).
        max_files: stdlib only: use an evenly spaced subset of this many files (quick runs).
        data_dir: where token files and tokenizers are cached (data_dir/tokens, data_dir/tokenizers).
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
        train_windows_per_epoch: int = 10_000,
        val_windows: int | None = 256,
        val_fraction: float = 0.05,
        val_split: Literal["last", "random"] = "last",
        split_seed: int = 2357,
        num_proc: int | None = None,
        max_files: int | None = None,
        data_dir: str = "data",
        hf_cache_dir: str | None = None,
        **loading,
    ) -> None:
        super().__init__(**loading)
        check_seed("split_seed", split_seed)
        for name, value in (("max_len", max_len), ("train_windows_per_epoch", train_windows_per_epoch)):
            check_positive(name, value)
        for name, value in (("val_windows", val_windows), ("num_proc", num_proc), ("max_files", max_files)):
            if value is not None:
                check_positive(name, value)
        check_fraction("val_fraction", val_fraction)
        check_choice("val_split", val_split, ("last", "random"))
        check_tokenizer_args(tokenizer, vocab_size)
        if os.path.exists(data_dir) and not os.path.isdir(data_dir):  # the token files go in a folder under it
            raise ConfigError(
                f"data_dir={data_dir!r} is a file, not a folder; give the folder the token files are "
                "kept in (it is made if it does not exist)."
            )
        if data_files is None and not dataset:
            raise ConfigError("No corpus given; set dataset ('stdlib' or a hub name) or data_files.")
        if max_files is not None and (data_files is not None or dataset != "stdlib"):
            raise ConfigError("max_files applies only to dataset='stdlib'; remove it for other corpora.")
        self.known = KNOWN_CORPORA.get((dataset or "").split("/")[-1]) if data_files is None else None
        self.config = config if config is not None or self.known is None else self.known.config
        self.tokenizer: TextTokenizer | None = ByteTokenizer(specials=False) if tokenizer == "bytes" else None
        self.token_files: dict[str, TokenFile] = {}

    @functools.cached_property
    def file_format(self) -> str | None:
        """The `datasets` builder of local data_files (None for the stdlib and hub corpora)."""
        files = self.hparams.data_files
        return None if files is None else local_format(normalize_data_files(files), self.hparams.dataset)

    @property
    def rows_are_documents(self) -> bool:
        """.txt rows are lines that keep their own line breaks; other rows are whole documents."""
        return self.known.rows_are_documents if self.known else self.file_format != "text"

    def model_sizes(self) -> dict[str, int]:
        if self.hparams.data_files is not None:
            check_local_files(normalize_data_files(self.hparams.data_files))  # a missing or empty file fails now
        return {"vocab_size": self._text_tokenizer_size(), "max_len": self.hparams.max_len}

    def _text_tokenizer_size(self) -> int:
        name = self.hparams.tokenizer
        if name == "bpe":
            return self.hparams.vocab_size
        if self.tokenizer is None:
            self.tokenizer = pretrained_tokenizer(name)  # one small file, cached by huggingface_hub
        return self.tokenizer.vocab_size

    # ------------------------------------------------------------------ Lightning hooks

    def prepare_data(self) -> None:
        """Tokenize once per node; later runs (and the other ranks) find the token files cached, checked."""
        if not self._meta_path.exists():
            self._build_token_files()
        else:
            self._checked_meta()

    def unprepared(self) -> str | None:
        if not self._meta_path.exists():
            return f"The token files of {self.hparams.dataset or 'data_files'}"
        self._checked_meta()  # a damaged cache is said here, before the processes start
        return None

    def prepared_at(self) -> str:
        return str(self.cache_dir)

    def setup(self, stage: str | None = None) -> None:
        if stage == "predict":
            self.tokenizer = self.text_tokenizer()
            self.predict_set = lines_of(predict_paths(self.hparams.predict_files))
            self.predict_collate = PromptCollate(self.tokenizer, self.hparams.max_len)
            return
        if self.train_set is not None:
            return
        if not self._meta_path.exists():
            self._build_token_files()
        meta = self._checked_meta()
        vocab_size = self.model_sizes()["vocab_size"]
        if meta["vocab_size"] > vocab_size:
            # The model is sized from model_sizes(); ids past it would crash the embedding mid-run.
            raise ConfigError(
                f"The token cache {str(self.cache_dir)!r} holds ids up to {meta['vocab_size'] - 1}, out of range "
                f"for vocab_size={vocab_size}; delete that cache to re-tokenize, or raise vocab_size."
            )
        max_len, windows = self.hparams.max_len, self.hparams.val_windows
        self.token_files = {s: TokenFile(self.cache_dir / f"{s}.bin", meta["dtype"]) for s in meta["splits"]}
        seed = global_seed() if self.hparams.data_seed is None else self.hparams.data_seed
        self.train_set = TrainWindows(self.token_files["train"], max_len, self.hparams.train_windows_per_epoch, seed)
        self.val_set = EvalWindows(self.token_files["validation"], max_len, windows, "validation")
        self.test_set = EvalWindows(self.token_files["test"], max_len, windows, "test")

    def training_sampler(self) -> EpochSampler:
        return EpochSampler(self.train_set)

    def compute_fingerprints(self) -> dict[str, str | None]:
        """The tokens the run reads: each split's token file (its sha256, kept in the cache's meta.json),
        and for validation and test also where their windows start. The stdlib corpus's byte tokens are
        its files' bytes, in the order of their sorted paths, so this hashes its file list and bytes as
        far as the model can see them (a renamed file that keeps its place does not count)."""
        digests, dtype = self._token_digests(), self.token_files["train"].dtype.name
        evaluated = {"validation": self.val_set, "test": self.test_set}
        return {
            "train": fingerprint(digests["train"], dtype),
            **{
                name: fingerprint(digests[name], dtype, self.hparams.max_len, windows.starts)
                for name, windows in evaluated.items()
            },
        }

    def ngram_floors(self) -> dict:
        """The cross-entropy of a unigram and a bigram count model of the training split on validation and
        test (ngram_floors.py), in the units of val/loss: {"unit", "unigram": {split: value}, "bigram": ...,
        "train_tokens"}. Kept in the cache's meta.json; a cache from before that has them computed now,
        once, and added."""
        if not self.token_files:
            raise RuntimeError("Call setup() before asking for the data's n-gram floors.")
        meta = read_meta(self.cache_dir)
        if "ngram_floors" not in meta:
            meta["ngram_floors"] = self._count_floors(meta["dtype"], meta["vocab_size"])
            try:
                self._write_meta(meta)
            except OSError:  # a read-only cache: counted again by the next run
                pass
        unit = "nats/byte" if self.hparams.tokenizer == "bytes" else "nats/token"
        return {"unit": unit, **meta["ngram_floors"]}

    def _count_floors(self, dtype, vocab_size: int) -> dict:
        tokens = {split: token_array(self.cache_dir / f"{split}.bin", dtype) for split in ("train", "validation", "test")}
        return ngram_floors(tokens.pop("train"), tokens, vocab_size)

    def decode(self, ids: list[int]) -> str:
        return self.text_tokenizer().decode(ids)

    # ------------------------------------------------------------------ token files

    @property
    def cache_dir(self) -> Path:
        hp = self.hparams
        extra = [self.config, hp.text_column, hp.tokenizer, hp.vocab_size, hp.val_fraction]
        if hp.val_split != "last":
            extra += [hp.val_split, hp.split_seed]
        if hp.data_files is None and hp.dataset == "stdlib":
            # The corpus is this interpreter's own library; the layout names the split scheme.
            extra += [sys.version, str(hp.max_files), STDLIB_LAYOUT]
        else:
            extra.append(CARVED_LAYOUT)
        key = source_fingerprint(hp.dataset, None, hp.data_files, *extra)
        slug = source_slug(hp.dataset, hp.data_files)
        return Path(hp.data_dir) / "tokens" / f"{slug}-{hp.tokenizer.replace('/', '__')}-{key}"

    @property
    def _meta_path(self) -> Path:
        return self.cache_dir / "meta.json"

    def _bpe_path(self) -> Path:
        return Path(self.hparams.data_dir) / "tokenizers" / f"{self.cache_dir.name}-bpe{self.hparams.vocab_size}.json"

    def _token_digests(self) -> dict[str, str]:
        """Each token file's sha256, written into meta.json with the files. A cache from before that has
        them computed now, once, and added to its meta.json, so that later runs only read them."""
        meta = read_meta(self.cache_dir)
        if "sha256" not in meta:
            meta["sha256"] = {split: file_sha256(self.cache_dir / f"{split}.bin") for split in meta["splits"]}
            try:
                self._write_meta(meta)
            except OSError:  # a read-only cache: hashed again by the next run
                pass
        return meta["sha256"]

    def _checked_meta(self) -> dict:
        """meta.json, its token files checked against it (token_cache.py); digests it lacked are added."""
        meta = read_meta(self.cache_dir)
        added = check_token_files(self.cache_dir, meta)
        if added is not None:
            try:
                self._write_meta(added)
            except OSError:  # a read-only cache: sampled again by the next run
                pass
        return meta

    def _write_meta(self, meta: dict) -> None:
        text = json.dumps(meta, indent=1)
        replace_file(self._meta_path, lambda file: file.write(text.encode()))  # the meta file marks a complete cache

    def text_tokenizer(self) -> TextTokenizer:
        """The tokenizer of the token files (a BPE must have been trained by an earlier fit); a run keeps it
        (training/run_config.py)."""
        if self.tokenizer is None and self.hparams.tokenizer == "bpe":
            path = self._bpe_path()
            if not path.is_file():
                raise ConfigError(f"The BPE tokenizer {str(path)!r} does not exist yet; a fit on this data trains it.")
            self.tokenizer = bpe_tokenizer(path, self.hparams.vocab_size, lambda: [])
        elif self.tokenizer is None:
            self.tokenizer = pretrained_tokenizer(self.hparams.tokenizer)
        return self.tokenizer

    def _build_token_files(self) -> None:
        splits = self._load_splits()
        tokenizer = self.tokenizer
        if tokenizer is None and self.hparams.tokenizer != "bpe":
            tokenizer = self.text_tokenizer()
        elif tokenizer is None:
            texts = functools.partial(training_texts, splits["train"], [self.hparams.text_column])
            tokenizer = bpe_tokenizer(self._bpe_path(), self.hparams.vocab_size, texts)
        dtype = token_dtype(tokenizer.vocab_size)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        encode = EncodeRows(tokenizer, self.hparams.text_column, dtype, self.rows_are_documents)
        counts, digests = write_token_files(splits, self.cache_dir, encode, self.hparams.num_proc)
        meta = {
            "dtype": dtype.name,
            "vocab_size": tokenizer.vocab_size,
            "splits": list(splits),
            "tokens": counts,
            "samples": {name: sample_digest(self.cache_dir / f"{name}.bin") for name in splits},
            "sha256": digests,
        }
        meta["ngram_floors"] = self._count_floors(dtype, tokenizer.vocab_size)
        self._write_meta(meta)

    def _load_splits(self) -> DatasetDict:
        """{train, validation[, test]} with a text column, carving validation when the source has none."""
        hp = self.hparams
        if hp.data_files is None and hp.dataset == "stdlib":
            return stdlib_corpus(hp.val_fraction, hp.max_files)
        if hp.data_files is not None:
            kwargs = {"keep_linebreaks": True} if self.file_format == "text" else {}
            loaded = load_local_dataset(normalize_data_files(hp.data_files), self.file_format, hp.hf_cache_dir, **kwargs)
            source = f"data_files={hp.data_files!r}"
        else:
            loaded = load_hub_dataset(hp.dataset, self.config, hp.hf_cache_dir)
            source = f"Dataset {hp.dataset!r}"
        if hp.text_column not in require_train(loaded, source).column_names:
            raise ConfigError(
                f"{source} has no text column {hp.text_column!r} (its columns are "
                f"{loaded['train'].column_names}); set text_column."
            )
        splits = {name: loaded[name] for name in SPLITS if name in loaded}
        carves = sum(name not in splits for name in ("validation", "test"))
        smallest = smallest_splittable(hp.val_fraction, carves)
        if len(splits["train"]) < smallest:
            unit = "lines" if self.file_format == "text" else "rows"
            rows = len(splits["train"])
            raise ConfigError(
                f"{source} holds {rows} {unit if rows != 1 else unit[:-1]}, too few to carve validation and test "
                f"from (val_fraction={hp.val_fraction} each, at least one {unit[:-1]} per split): the "
                f"smallest corpus that splits has {smallest} {unit}; give more text, or give the splits "
                "as data_files={train: ..., validation: ..., test: ...}."
            )
        # Missing held-out splits are carved from training, validation first and then test, the same
        # share each: a test split is never the validation split, whatever the source ships.
        for held_out, offset in (("validation", 0), ("test", 1)):
            if held_out not in splits:
                splits["train"], splits[held_out] = self._carve(splits["train"], offset)
        return DatasetDict(splits)

    def _carve(self, train, offset: int):
        hp = self.hparams
        if hp.val_split == "random":  # documents drawn at random, as nanoGPT's prepare.py does
            parts = train.train_test_split(test_size=hp.val_fraction, seed=hp.split_seed + offset, shuffle=True)
        else:  # the last rows: neighbouring lines of one text stay on one side
            parts = train.train_test_split(test_size=hp.val_fraction, shuffle=False)
        return parts["train"], parts["test"]


class PromptCollate:
    """Prompts (one text each) to a left-padded batch: {"tokens", "padding_mask" (True at padding),
    "texts"}; left padding puts every prompt's last token in the last column, where generation goes on.
    A prompt longer than max_len keeps its last max_len tokens."""

    def __init__(self, tokenizer: TextTokenizer, max_len: int) -> None:
        self.tokenizer, self.max_len = tokenizer, max_len

    def __call__(self, texts: list[str]) -> dict:
        encoded = [ids[-self.max_len :] for ids in self.tokenizer.encode_batch(texts)]
        longest = max(1, max(len(ids) for ids in encoded))
        tokens = torch.zeros(len(texts), longest, dtype=torch.long)
        padding = torch.ones(len(texts), longest, dtype=torch.bool)
        for row, ids in enumerate(encoded):
            if len(ids):
                tokens[row, longest - len(ids) :] = torch.from_numpy(ids)
                padding[row, longest - len(ids) :] = False
        return {"tokens": tokens, "padding_mask": padding, "texts": list(texts)}
