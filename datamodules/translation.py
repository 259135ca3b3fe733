"""Translation from a hub dataset (``Helsinki-NLP/opus_books`` en-es by default, the Super-attention
paper's English-Spanish task) or local parallel files, with one BPE shared by both languages.

Batches are dicts: ``src`` (B, S) ending with eos, ``src_padding_mask`` (B, S), ``tgt_in`` (B, T)
starting with bos, ``tgt_out`` (B, T) ending with eos, ``tgt_padding_mask`` (B, T); True marks
padding (pad_id). S and T are the longest lengths in the batch, at most max_src_len / max_tgt_len.
"""

from __future__ import annotations

import functools
from pathlib import Path

from typing import Literal

import torch
from datasets import Dataset, DatasetDict

from lit_attention.errors import ConfigError

from .base import DataModule, check_seed, check_choice, check_fraction, check_positive, lines_of, predict_paths
from .hub import (
    DataFiles,
    check_local_files,
    load_source,
    normalize_data_files,
    source_fingerprint,
    source_fingerprints,
    source_slug,
    split_fingerprints,
    train_val_test,
)
from .text_tokenizers import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    ByteTokenizer,
    TextTokenizer,
    bpe_tokenizer,
    check_tokenizer_args,
    training_texts,
)


def _pad(sequences: list[torch.Tensor], before: int | None = None, after: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Each sequence between the optional `before` and `after` ids, right-padded to the longest; returns
    (ids, padding mask with True at padding). One concatenation and one masked write for the whole batch
    (a batch is built for every step, so a Python loop over its rows is a cost of every run)."""
    start = int(before is not None)
    lengths = torch.tensor([len(s) for s in sequences])
    ends = lengths + start + int(after is not None)
    ids = torch.full((len(sequences), int(ends.max())), PAD_ID, dtype=torch.long)
    positions = torch.arange(ids.shape[1])[None, :]
    # A boolean mask fills row by row, in the order the sequences are concatenated.
    ids[(positions >= start) & (positions < start + lengths[:, None])] = torch.cat(list(sequences)).long()
    if before is not None:
        ids[:, 0] = before
    if after is not None:
        ids[torch.arange(len(sequences)), ends - 1] = after
    return ids, positions >= ends[:, None]


def translation_batch(sources: list[torch.Tensor], targets: list[torch.Tensor]) -> dict:
    """The batch of (source, target) id sequences given without specials: `src` ending with eos, `tgt_in`
    starting with bos, `tgt_out` ending with eos, each right-padded, with their padding masks."""
    src_ids, src_mask = _pad(sources, after=EOS_ID)
    tgt_in, tgt_mask = _pad(targets, before=BOS_ID)
    tgt_out, _ = _pad(targets, after=EOS_ID)
    # Whether each side has padding, decided here on the host: the model then needs no device read
    # to drop a mask that marks nothing (modeling/attention.py padding_or_none).
    return {
        "src": src_ids,
        "src_padding_mask": src_mask,
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_padding_mask": tgt_mask,
        "src_padded": bool(src_mask.any()),
        "tgt_padded": bool(tgt_mask.any()),
    }


class TranslationCollate:
    """Rows of {source, target} texts to a padded batch (a class so that DataLoader workers can pickle it);
    `with_texts` adds the source texts (predict)."""

    def __init__(self, tokenizer: TextTokenizer, max_src_len: int, max_tgt_len: int, with_texts: bool = False) -> None:
        self.tokenizer, self.max_src_len, self.max_tgt_len = tokenizer, max_src_len, max_tgt_len
        self.with_texts = with_texts

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        sources = self.tokenizer.encode_batch([row["source"] or "" for row in rows])
        targets = self.tokenizer.encode_batch([row["target"] or "" for row in rows])
        batch = translation_batch(
            [torch.from_numpy(ids[: self.max_src_len - 1]) for ids in sources],
            [torch.from_numpy(ids[: self.max_tgt_len - 1]) for ids in targets],
        )
        if self.with_texts:
            batch["texts"] = [row["source"] for row in rows]
        return batch


class TranslationDataModule(DataModule):
    """Sequence-to-sequence translation.

    Args:
        dataset: a hub dataset name; with data_files it may instead name their format.
        config: the hub configuration (language pair), e.g. en-es.
        source_lang: source language code; rows are {"translation": {src: ..., tgt: ...}} (the hub
            layout) or have one text column named after each language.
        target_lang: target language code.
        data_files: local json/parquet/csv files, one path or {"train": ..., "validation": ..., "test": ...}.
        tokenizer: bpe (one vocabulary for both languages, trained on the training split and cached
            under data_dir/tokenizers) or bytes.
        vocab_size: BPE vocabulary size.
        max_src_len: longest source in tokens (with eos).
        max_tgt_len: longest target in tokens (with bos or eos).
        val_fraction: share of the training split held out for validation, and for test (fixed seed)
            when the dataset has no test split (opus_books has only train).
        split_seed: seed of the validation split; fixed, so every run seed sees the same split.
        data_dir: where the BPE is cached.
        hf_cache_dir: the `datasets` cache (default: the Hugging Face default).

    Special ids: pad 0, bos 1, eos 2.
    """

    def __init__(
        self,
        dataset: str | None = "Helsinki-NLP/opus_books",
        config: str | None = "en-es",
        source_lang: str = "en",
        target_lang: str = "es",
        data_files: DataFiles | None = None,
        tokenizer: Literal["bpe", "bytes"] = "bpe",
        vocab_size: int = 8000,
        max_src_len: int = 64,
        max_tgt_len: int = 64,
        val_fraction: float = 0.05,
        split_seed: int = 0,
        data_dir: str = "data",
        hf_cache_dir: str | None = None,
        **loading,
    ) -> None:
        super().__init__(**loading)
        check_seed("split_seed", split_seed)
        check_choice("tokenizer", tokenizer, ("bpe", "bytes"))
        check_tokenizer_args(tokenizer, vocab_size)
        for name, value in (("max_src_len", max_src_len), ("max_tgt_len", max_tgt_len)):
            check_positive(name, value, minimum=2)  # room for one token and eos
        check_fraction("val_fraction", val_fraction)
        if source_lang == target_lang:
            raise ConfigError(f"source_lang and target_lang are both {source_lang!r}; give two different languages.")
        self.tokenizer: TextTokenizer | None = ByteTokenizer(specials=True) if tokenizer == "bytes" else None
        self._sources: dict[str, str] = {}  # datasets' fingerprint of each loaded split

    def model_sizes(self) -> dict[str, int]:
        hp = self.hparams
        if hp.data_files is not None:
            check_local_files(normalize_data_files(hp.data_files))  # a missing or empty file fails now
        vocab_size = hp.vocab_size if self.tokenizer is None else self.tokenizer.vocab_size
        return {
            "vocab_size": vocab_size,
            "max_src_len": hp.max_src_len,
            "max_tgt_len": hp.max_tgt_len,
            "pad_id": PAD_ID,
            "bos_id": BOS_ID,
            "eos_id": EOS_ID,
        }

    # ------------------------------------------------------------------ Lightning hooks

    def prepare_data(self) -> None:
        """Download (hub) and train the BPE once per node; setup then only reads caches."""
        self._tokenizer_for(self._splits()[0])

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None and stage != "predict":
            return
        self.train_set, self.val_set, self.test_set = self._splits()
        self.tokenizer = self._tokenizer_for(self.train_set)
        self.collate = TranslationCollate(self.tokenizer, self.hparams.max_src_len, self.hparams.max_tgt_len)
        if stage == "predict":
            self.predict_set = [{"source": text, "target": ""} for text in lines_of(predict_paths(self.hparams.predict_files))]
            self.predict_collate = TranslationCollate(
                self.tokenizer, self.hparams.max_src_len, self.hparams.max_tgt_len, with_texts=True
            )

    def decode(self, ids: list[int]) -> str:
        """Text of a generated id sequence, stopping at the first eos and dropping bos/pad (for BLEU)."""
        if self.tokenizer is None:
            raise RuntimeError("Call setup() before decode(); the BPE is loaded there.")
        ids = [int(i) for i in ids]
        if EOS_ID in ids:
            ids = ids[: ids.index(EOS_ID)]
        return self.tokenizer.decode([i for i in ids if i not in (PAD_ID, BOS_ID)])

    def compute_fingerprints(self) -> dict[str, str | None]:
        """Local files: their bytes; a hub dataset: `datasets`' fingerprint of it (hub.split_fingerprints);
        with how missing splits are carved and the language pair kept."""
        hp = self.hparams
        return split_fingerprints(
            self._sources, hp.data_files, val_fraction=hp.val_fraction, seed=hp.split_seed, view=[hp.source_lang, hp.target_lang]
        )

    # ------------------------------------------------------------------ helpers

    def _splits(self) -> tuple[Dataset, Dataset, Dataset]:
        hp = self.hparams
        source = f"Dataset {hp.dataset!r}" if hp.data_files is None else f"data_files={hp.data_files!r}"
        loaded = load_source(hp.dataset, hp.config, hp.data_files, hp.hf_cache_dir)
        self._sources = source_fingerprints(loaded)
        pairs = DatasetDict({name: self._to_pairs(data, source) for name, data in loaded.items()})
        return train_val_test(pairs, source, val_fraction=hp.val_fraction, seed=hp.split_seed)

    def _to_pairs(self, data: Dataset, source: str) -> Dataset:
        """Rows reduced to {"source", "target"} texts, from either supported layout."""
        src, tgt = self.hparams.source_lang, self.hparams.target_lang
        if "translation" in data.column_names:
            feature = data.features["translation"]
            # The hub's Translation feature lists its languages; plain JSON gives a dict of columns.
            languages = set(feature.languages if hasattr(feature, "languages") else feature)
            if not {src, tgt} <= languages:
                raise ConfigError(
                    f"{source} translates between {sorted(languages)}, not {src!r} and {tgt!r}; "
                    f"set source_lang / target_lang (and config)."
                )
            columns = {f"translation.{src}": "source", f"translation.{tgt}": "target"}
            return data.flatten().select_columns(list(columns)).rename_columns(columns)
        if {src, tgt} <= set(data.column_names):
            return data.select_columns([src, tgt]).rename_columns({src: "source", tgt: "target"})
        raise ConfigError(
            f"{source} has neither a 'translation' column nor columns {src!r} and {tgt!r} "
            f"(its columns are {data.column_names}); give rows in one of those layouts."
        )

    def _tokenizer_for(self, train: Dataset) -> TextTokenizer:
        hp = self.hparams
        if hp.tokenizer == "bytes":
            return ByteTokenizer(specials=True)
        key = source_fingerprint(
            hp.dataset, hp.config, hp.data_files, hp.source_lang, hp.target_lang, hp.val_fraction, hp.split_seed
        )
        pair = f"{hp.source_lang}-{hp.target_lang}"
        name = f"{source_slug(hp.dataset, hp.data_files)}-{pair}-bpe{hp.vocab_size}-{key}.json"
        return bpe_tokenizer(
            Path(hp.data_dir) / "tokenizers" / name, hp.vocab_size, functools.partial(training_texts, train, ["source", "target"])
        )
