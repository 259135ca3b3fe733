"""A prepared token cache checked before a run reads it: `meta.json` readable, and each `<split>.bin` of
the size meta.json gives and with the content it had when it was written.

The whole file's sha256 (in meta.json, what the run's data fingerprint is made from) is too slow to
recompute at every load of a corpus of gigabytes, so a cheap digest stands in for it: the sha256 of the
file's size and of 64 KiB at its start, middle and end. A file cut short or grown is caught by its size, a
file rewritten in place by the digest's blocks (a change elsewhere in a big file is not). Each failure is
one sentence naming the file, and the command that rebuilds the cache.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from lit_attention.errors import ConfigError

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
    return (f"delete the folder {str(cache_dir)!r} and run `lit-attention prepare` with the run's --config and --data "
            "options (or the fit itself) to tokenize it again")


def read_meta(cache_dir: Path) -> dict:
    """The cache's meta.json, or one sentence when it cannot be read."""
    path = cache_dir / "meta.json"
    try:
        meta = json.loads(path.read_text())
        if not isinstance(meta, dict) or not {"dtype", "splits", "tokens"} <= meta.keys():
            raise ValueError("fields missing")
    except (ValueError, UnicodeDecodeError) as error:
        raise ConfigError(f"The token cache's {str(path)!r} cannot be read ({type(error).__name__}): it was cut or "
                          f"changed after it was written; {rebuild(cache_dir)}.") from None
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
            raise ConfigError(f"The token file {str(path)!r} {found}, but meta.json gives {meta['tokens'][split]:,} tokens "
                              f"of {itemsize} bytes ({expected:,} bytes): it was cut or changed after it was written; "
                              f"{rebuild(cache_dir)}.")
        digests = meta.setdefault("samples", {})
        if split not in digests:
            digests[split], added = sample_digest(path), True
        elif sample_digest(path) != digests[split]:
            raise ConfigError(f"The token file {str(path)!r} differs from the one written with its meta.json (its "
                              f"sampled blocks' sha256): it was changed after it was written; {rebuild(cache_dir)}.")
    return meta if added else None
