"""A prepared token cache: each split tokenized into `<split>.bin` (`EncodeRows`, `write_token_files`), read
back memory-mapped (`token_array`), and checked before a run reads it (`read_meta`, `check_token_files`):
`meta.json` readable, and each `<split>.bin` of the size meta.json gives and with the content it had when
it was written.

The whole file's sha256 (in meta.json, what the run's data fingerprint is made from) is too slow to
recompute at every load of a corpus of gigabytes, so a cheap digest stands in for it: the sha256 of the
file's size and of 64 KiB at its start, middle and end. A file cut short or grown is caught by its size, a
file rewritten in place by the digest's blocks (a change elsewhere in a big file is not). Each failure is
one sentence naming the file, and the command that rebuilds the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
from datasets import DatasetDict

from lit_attention.errors import ConfigError

from .text_tokenizers import TextTokenizer
from .token_windows import write_token_file

BLOCK = 64 * 1024


def sample_digest(path: Path) -> str:
    """sha256 of the file's size and its first, middle and last 64 KiB."""
    digest, size = hashlib.sha256(str(path.stat().st_size).encode()), path.stat().st_size
    with open(path, "rb") as file:
        for start in sorted({0, max(0, size // 2 - BLOCK // 2), max(0, size - BLOCK)}):
            file.seek(start)
            digest.update(file.read(BLOCK))
    return digest.hexdigest()


def rebuild(cache_dir: Path) -> str:
    return (
        f"delete the folder {str(cache_dir)!r} and run `lit-attention prepare` with the run's --config and --data "
        "options (or the fit itself) to tokenize it again"
    )


def read_meta(cache_dir: Path) -> dict:
    """The cache's meta.json, or one sentence when it cannot be read."""
    path = cache_dir / "meta.json"
    try:
        meta = json.loads(path.read_text())
        if not isinstance(meta, dict) or not {"dtype", "splits", "tokens"} <= meta.keys():
            raise ValueError("fields missing")
        np.dtype(meta["dtype"])
        if not all(isinstance(meta["tokens"].get(split), int) for split in meta["splits"]):
            raise ValueError("token counts missing")
    except PermissionError as error:
        raise ConfigError(
            f"The token cache's {str(path)!r} cannot be read ({error.strerror}); make it readable, or {rebuild(cache_dir)}."
        ) from None
    except (ValueError, TypeError, AttributeError, UnicodeDecodeError) as error:
        raise ConfigError(
            f"The token cache's {str(path)!r} cannot be read ({type(error).__name__}): it was cut or "
            f"changed after it was written; {rebuild(cache_dir)}."
        ) from None
    return meta


def check_token_files(cache_dir: Path, meta: dict) -> dict | None:
    """Refuse a token file that is missing, of another size than meta.json's token count, or whose digest
    (sample_digest) differs from the one written with it. A cache from before the digests has them
    computed now; the meta with them is returned for the caller to keep (None when nothing was added)."""
    itemsize = np.dtype(meta["dtype"]).itemsize
    added = False
    for split in meta["splits"]:
        path = cache_dir / f"{split}.bin"
        expected = int(meta["tokens"][split]) * itemsize
        size = path.stat().st_size if path.is_file() else None
        if size != expected:
            found = "is missing" if size is None else f"holds {size:,} bytes"
            raise ConfigError(
                f"The token file {str(path)!r} {found}, but meta.json gives {meta['tokens'][split]:,} tokens "
                f"of {itemsize} bytes ({expected:,} bytes): it was cut or changed after it was written; "
                f"{rebuild(cache_dir)}."
            )
        digests = meta.setdefault("samples", {})
        if split not in digests:
            digests[split], added = sample_digest(path), True
        elif sample_digest(path) != digests[split]:
            raise ConfigError(
                f"The token file {str(path)!r} differs from the one written with its meta.json (its "
                f"sampled blocks' sha256): it was changed after it was written; {rebuild(cache_dir)}."
            )
    return meta if added else None


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


def token_array(path: Path, dtype) -> np.ndarray:
    """A token file's ids, memory-mapped (an empty file cannot be mapped: an empty array)."""
    if path.stat().st_size == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")


def write_token_files(
    splits: DatasetDict, out_dir: Path, encode: EncodeRows, num_proc: int | None
) -> tuple[dict[str, int], dict[str, str]]:
    """Tokenize every split with a batched, multi-process `datasets.map` and write `<split>.bin`;
    returns each split's token count and file sha256."""
    scratch = out_dir / f"scratch-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    counts, digests = {}, {}
    try:
        for name, data in splits.items():
            procs = min(num_proc or (min(8, os.cpu_count() or 1) if len(data) >= 1000 else 1), len(data))
            tokenized = data.map(
                encode,
                batched=True,
                num_proc=procs if procs > 1 else None,
                remove_columns=data.column_names,
                cache_file_name=str(scratch / f"{name}.arrow"),
                desc=f"Tokenizing {name}",
            )
            counts[name], digests[name] = write_token_file(out_dir / f"{name}.bin", tokenized.data.column("ids"), encode.dtype)
            del tokenized
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # the intermediate Arrow copy is no longer needed
    return counts, digests
