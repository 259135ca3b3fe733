"""Short content hashes of the data a run sees, one per split (record.json's ``data_fingerprints``).

A fingerprint names what a split holds, not the order a run reads it in: runs whose fingerprints
agree trained and were scored on the same data, and a changed byte changes it (ImageFolder trees
aside: see ImageDataModule). It never moves with the run seed, as no split is carved with it.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import numpy as np
import torch

FINGERPRINT_CHARS = 16  # hex characters kept: 64 bits, ample to tell datasets apart


def fingerprint(*parts: Any) -> str:
    """A short sha256 of `parts`: tensors and arrays by dtype, shape and bytes, bytes as they are,
    anything else as its JSON text; each part is framed, so no two lists of parts collide."""
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, torch.Tensor):
            part = part.detach().cpu().contiguous().numpy()
        if isinstance(part, np.ndarray):
            array = np.ascontiguousarray(part)
            digest.update(f"array {array.dtype.str} {array.shape}\0".encode())
            digest.update(array.reshape(-1).view(np.uint8) if array.size else b"")
        elif isinstance(part, bytes):
            digest.update(b"bytes %d\0" % len(part))
            digest.update(part)
        else:
            text = json.dumps(part, sort_keys=True, default=str)
            digest.update(f"json {len(text)}\0{text}".encode())
    return digest.hexdigest()[:FINGERPRINT_CHARS]


def file_sha256(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """The full sha256 of a file's bytes, read in chunks (token files may be gigabytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(chunk):
            digest.update(block)
    return digest.hexdigest()
