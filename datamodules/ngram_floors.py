"""How far a language model is above counting: the cross-entropy of a unigram and a bigram model of the
token files, fitted on the training split and scored on validation and test, in nats per token (the
units of the task's val/loss and test/loss; nats per byte for the byte tokenizer).

* unigram: p(b) = (c(b) + 1) / (N + V), add-one over the vocabulary of V tokens, so no token costs
  infinitely much;
* bigram: p(b | a) = (c(a, b) + p(b)) / (c(a) + 1), the pair counts with one pseudo-count spread by the
  unigram above: a frequent context is its own counts, a context never seen in training is the unigram.

Each held-out split is scored as one stream: its first token by the unigram, every later one by the
bigram given the token before it. Nothing is tuned; the numbers are a function of the token files only,
so the LM DataModule computes them once, when it writes the files (meta.json's ``ngram_floors``).
"""

from __future__ import annotations

import math

import numpy as np

BIGRAM_PRIOR = 1.0  # pseudo-counts per context, spread by the unigram
DENSE_PAIRS = 1 << 22  # up to this many possible pairs (a 2048-token vocabulary), count them in one array
CHUNK = 1 << 24  # tokens counted at a time, so a large token file is never copied whole


def ngram_floors(train: np.ndarray, held_out: dict[str, np.ndarray], vocab_size: int) -> dict:
    """{"unigram": {split: nats per token}, "bigram": {split: ...}, "train_tokens": N} for each split
    of `held_out` (token-id arrays, memory-mapped files welcome)."""
    unigram = unigram_probabilities(train, vocab_size)
    pairs = PairCounts(train, vocab_size)
    floors = {"unigram": {}, "bigram": {}, "train_tokens": int(len(train))}
    for split, tokens in held_out.items():
        if len(tokens) == 0:
            continue
        floors["unigram"][split] = -float(sum(np.log(unigram[chunk]).sum() for chunk in chunks(tokens))) / len(tokens)
        total = -math.log(unigram[int(tokens[0])])
        for start in range(0, len(tokens) - 1, CHUNK):
            before = np.asarray(tokens[start : start + CHUNK], dtype=np.int64)
            after = np.asarray(tokens[start + 1 : start + 1 + CHUNK], dtype=np.int64)
            before = before[: len(after)]
            p = (pairs.count(before, after) + BIGRAM_PRIOR * unigram[after]) / (pairs.contexts[before] + BIGRAM_PRIOR)
            total -= float(np.log(p).sum())
        floors["bigram"][split] = total / len(tokens)
    return floors


def chunks(tokens: np.ndarray):
    for start in range(0, len(tokens), CHUNK):
        yield np.asarray(tokens[start : start + CHUNK], dtype=np.int64)


def unigram_probabilities(train: np.ndarray, vocab_size: int) -> np.ndarray:
    counts = np.zeros(vocab_size, dtype=np.float64)
    for chunk in chunks(train):
        counts += np.bincount(chunk, minlength=vocab_size)
    return (counts + 1.0) / (len(train) + vocab_size)


class PairCounts:
    """c(a, b) of neighbouring training tokens and c(a) of each token as a context (every token but the
    last); dense for small vocabularies, the distinct pairs only for large ones."""

    def __init__(self, train: np.ndarray, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self.contexts = np.zeros(vocab_size, dtype=np.float64)
        dense = vocab_size * vocab_size <= DENSE_PAIRS
        self.table = np.zeros(vocab_size * vocab_size if dense else 0, dtype=np.float64)
        codes, counts = [], []
        for start in range(0, len(train) - 1, CHUNK):
            before = np.asarray(train[start : start + CHUNK], dtype=np.int64)
            after = np.asarray(train[start + 1 : start + 1 + CHUNK], dtype=np.int64)
            code = before[: len(after)] * vocab_size + after
            self.contexts += np.bincount(before[: len(after)], minlength=vocab_size)
            if dense:
                self.table += np.bincount(code, minlength=len(self.table))
            else:
                found, found_counts = np.unique(code, return_counts=True)
                codes.append(found)
                counts.append(found_counts)
        if not dense:
            merged, where = np.unique(np.concatenate(codes or [np.zeros(0, np.int64)]), return_inverse=True)
            self.codes = merged
            self.counts = np.bincount(where, weights=np.concatenate(counts or [np.zeros(0)]), minlength=len(merged))

    def count(self, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        code = before * self.vocab_size + after
        if len(self.table):
            return self.table[code]
        if not len(self.codes):
            return np.zeros(len(code))
        at = np.minimum(np.searchsorted(self.codes, code), len(self.codes) - 1)
        return np.where(self.codes[at] == code, self.counts[at], 0.0)
