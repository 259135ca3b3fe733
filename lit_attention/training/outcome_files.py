"""A run's per-example outcomes on disk: one small `.npz` file beside its record.json, named by its
content hash, which the record keeps (`"per_example": {"file": ..., "sha256": ...}`).

This module needs no Lightning (compare reads these files); the callback that collects the outcomes
while a run validates and tests is per_example.py's PerExampleOutcomes.

The file holds, per split ("val", "test"), arrays of one row per item in dataset order:
`<split>_index` (the item's position in its dataset, the same in every run on the same data) and the
task's outcomes: classification `<split>_correct` (0 or 1) and `<split>_loss`; language models
`<split>_loss` (the mean over the window's scored targets), `<split>_correct` (how many of them were
predicted) and `<split>_tokens` (how many were scored), so that token-weighted means can be rebuilt.
The zip is written with fixed timestamps, so the same outcomes always make the same bytes and hash.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from pathlib import Path

import numpy as np

from lit_attention.atomic_files import replace_file

PREFIX = "per_example-"
HASH_CHARACTERS = 16  # of the sha256 in the file name; the record keeps all of it
FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say


def outcome_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An .npz (numpy.load reads it) of `arrays`, by sorted name, compressed, with fixed timestamps."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.save(member, np.ascontiguousarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, member.getvalue())
    return buffer.getvalue()


def write_outcomes(directory: str | os.PathLike, arrays: dict[str, np.ndarray]) -> dict[str, str]:
    """Write `arrays` as `per_example-<hash prefix>.npz` in `directory` (atomically) and return what the
    record keeps of it: {"file": its name, "sha256": the hash of its bytes}."""
    data = outcome_bytes(arrays)
    digest = hashlib.sha256(data).hexdigest()
    path = replace_file(Path(directory) / f"{PREFIX}{digest[:HASH_CHARACTERS]}.npz", lambda file: file.write(data))
    return {"file": path.name, "sha256": digest}


class OutcomeFileError(ValueError):
    """A record names a per-example file that is missing or whose bytes do not match its hash."""


def read_outcomes(directory: str | os.PathLike, entry: dict) -> dict[str, np.ndarray]:
    """The arrays of the file a record's `per_example` entry names, in `directory`, after checking its
    bytes against the recorded hash (OutcomeFileError names the file otherwise)."""
    path = Path(directory) / entry["file"]
    try:
        data = path.read_bytes()
    except OSError as error:
        raise OutcomeFileError(f"{str(path)!r}, named in its record, cannot be read ({error.strerror}).") from None
    if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        raise OutcomeFileError(f"{str(path)!r} does not match the sha256 its record keeps: it was changed after the run.")
    with np.load(io.BytesIO(data), allow_pickle=False) as loaded:
        return {name: loaded[name] for name in loaded.files}
