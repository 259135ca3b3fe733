"""Tokenizers shared by the text DataModules: raw bytes, a BPE trained on the training split, or a
pretrained tokenizer from the hub.

All three expose the same small interface: ``vocab_size``, ``pad_id``, ``bos_id``, ``eos_id``,
``encode_batch(texts) -> list[np.ndarray]`` and ``decode(ids) -> str``. Tokenizers built here put the
special tokens first: pad=0, bos=1, eos=2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
from datasets import Dataset
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from lit_attention.atomic_files import replace_file
from lit_attention.errors import ConfigError
from .hub import download_hub_file

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>")
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
# A byte-level BPE always keeps its 256-symbol byte alphabet, so a smaller vocabulary is impossible.
MIN_BPE_VOCAB = 256 + len(SPECIAL_TOKENS)
# Training on more texts than this changes the merges little and costs minutes; larger splits are subsampled.
MAX_BPE_TRAINING_TEXTS = 200_000


class ByteTokenizer:
    """UTF-8 bytes as ids.

    With ``specials`` (classification, translation) ids 0/1/2 are pad/bos/eos and byte b is b + 3.
    Without (language modelling, vocabulary 256), byte b is b and the NUL byte 0, which never occurs
    in text, marks the end of a document the way GPT-2's <|endoftext|> does.
    """

    name = "bytes"

    def __init__(self, specials: bool = True) -> None:
        self.offset = len(SPECIAL_TOKENS) if specials else 0
        self.vocab_size = 256 + self.offset
        self.pad_id: int | None = PAD_ID if specials else None
        self.bos_id: int | None = BOS_ID if specials else None
        self.eos_id: int | None = EOS_ID if specials else 0

    def encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [np.frombuffer(t.encode("utf-8"), dtype=np.uint8).astype(np.int64) + self.offset for t in texts]

    def decode(self, ids: Iterable[int]) -> str:
        data = bytes(i - self.offset for i in ids if self.offset <= i < self.vocab_size)
        return data.decode("utf-8", errors="replace")


class HFTokenizer:
    """A `tokenizers.Tokenizer` (our trained BPE or a pretrained one) behind the shared interface."""

    def __init__(self, tokenizer: Tokenizer, name: str) -> None:
        self.tokenizer = tokenizer
        self.name = name
        vocab = tokenizer.get_vocab_size(with_added_tokens=True)
        self.bos_id = _first_id(tokenizer, ("<bos>", "<s>", "[CLS]", "<|startoftext|>"))
        self.eos_id = _first_id(tokenizer, ("<eos>", "</s>", "[SEP]", "<|endoftext|>"))
        pad_id = _first_id(tokenizer, ("<pad>", "[PAD]", "<|pad|>", "<|padding|>"))
        # Tokenizers without a pad token (GPT-2) get one extra id after their vocabulary.
        self.pad_id = vocab if pad_id is None else pad_id
        self.vocab_size = vocab + (pad_id is None)

    def encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [np.asarray(e.ids, dtype=np.int64) for e in self.tokenizer.encode_batch(list(texts))]

    def decode(self, ids: Iterable[int]) -> str:
        known = self.tokenizer.get_vocab_size(with_added_tokens=True)  # drops an appended pad id
        return self.tokenizer.decode([int(i) for i in ids if int(i) < known], skip_special_tokens=True)


TextTokenizer = ByteTokenizer | HFTokenizer


def _first_id(tokenizer: Tokenizer, candidates: Sequence[str]) -> int | None:
    for token in candidates:
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token_id
    return None


def check_tokenizer_args(tokenizer: str, vocab_size: int) -> None:
    if not tokenizer:
        raise ConfigError("tokenizer is empty; use 'bytes', 'bpe' or a pretrained tokenizer's hub name such as 'gpt2'.")
    if tokenizer == "bpe" and (not isinstance(vocab_size, int) or vocab_size < MIN_BPE_VOCAB):
        raise ConfigError(
            f"vocab_size={vocab_size!r} is too small for a byte-level BPE; use at least {MIN_BPE_VOCAB} "
            f"(256 bytes + {len(SPECIAL_TOKENS)} special tokens)."
        )


def pretrained_tokenizer(name: str) -> HFTokenizer:
    path = download_hub_file(name, "tokenizer.json", what="Tokenizer")
    return HFTokenizer(Tokenizer.from_file(path), name=name)


def bpe_tokenizer(path: Path, vocab_size: int, training_texts: Callable[[], Iterable[str]]) -> HFTokenizer:
    """The BPE cached at `path`, trained on `training_texts()` first if the file does not exist yet.

    Reloading the saved file gives exactly the ids of the tokenizer that was trained.
    """
    if not path.exists():
        bpe = Tokenizer(models.BPE())
        bpe.normalizer = normalizers.NFC()
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        bpe.train_from_iterator(training_texts(), trainer=trainer)
        # Whole or not at all: a concurrent reader never sees half a file.
        text = bpe.to_str(pretty=True)
        replace_file(path, lambda file: file.write(text.encode("utf-8")))
    loaded = HFTokenizer(Tokenizer.from_file(str(path)), name="bpe")
    if (loaded.pad_id, loaded.bos_id, loaded.eos_id) != (PAD_ID, BOS_ID, EOS_ID) or loaded.vocab_size > vocab_size:
        raise ConfigError(f"Cached tokenizer {str(path)!r} does not match vocab_size={vocab_size}; delete it to retrain.")
    return loaded


def training_texts(data: Dataset, columns: Sequence[str], limit: int = MAX_BPE_TRAINING_TEXTS) -> Iterator[str]:
    """The texts of `columns`, at most `limit` rows evenly spaced (IMDB's training split is sorted by label)."""
    step = -(-len(data) // limit)
    subset = data if step <= 1 else data.select(range(0, len(data), step))
    for batch in subset.select_columns(list(columns)).iter(batch_size=1000):
        for column in columns:
            yield from batch[column]
