"""Loading Hugging Face datasets (hub names or local files) without ever hanging offline.

Two facts drive this file:

* ``datasets`` and ``huggingface_hub`` read ``HF_HUB_OFFLINE`` once, at import time; set later
  (in a notebook, a test, a launcher), it would be ignored.
* Without offline mode and without a network, ``load_dataset`` retries for about 25 seconds and then
  raises a stack of connection errors.

So before touching the hub we decide whether it is usable (offline requested now, or its host
unreachable within a few seconds) and, if not, run the call with both libraries' offline flags set:
a cached dataset still loads, and a missing one fails at once with a one-sentence ``ConfigError``.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import os
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import datasets
import huggingface_hub
from datasets import Dataset, DatasetDict
from huggingface_hub.errors import EntryNotFoundError

from lit_attention.errors import ConfigError, brief

DataFiles = Mapping[str, str | list[str]] | str | list[str]

# Builder names of the `datasets` library for local files, and the extensions that select them.
LOCAL_FORMATS = ("parquet", "json", "csv", "text", "arrow")
_EXTENSION_FORMATS = {
    ".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv",
    ".txt": "text", ".arrow": "arrow",
}
_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst")
_SPLIT_ALIASES = {"val": "validation", "valid": "validation", "dev": "validation"}
_TRUE = {"1", "ON", "YES", "TRUE"}
_LOCAL_HINT = "pass data_files pointing at local parquet/json/csv/txt files"


# --------------------------------------------------------------------------- offline decision


def offline_requested() -> bool:
    """The user's offline switches, read now (not at import time) so that late settings count."""
    names = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
    from_env = any(os.environ.get(name, "").strip().upper() in _TRUE for name in names)
    return from_env or bool(datasets.config.HF_HUB_OFFLINE)


@functools.lru_cache(maxsize=8)
def _host_reachable(endpoint: str, timeout_s: float = 3.0) -> bool:
    url = urlparse(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=timeout_s):
            return True
    except OSError:
        return False


def hub_is_offline() -> bool:
    """True when the hub must not be contacted: offline requested, or its host unreachable."""
    if offline_requested():
        return True
    if any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return False  # a direct socket probe says nothing about a proxied route; let the libraries try
    return not _host_reachable(huggingface_hub.constants.ENDPOINT)


@contextmanager
def _hub_mode(offline: bool) -> Iterator[None]:
    """Run a block with both libraries' offline flags set to `offline`, then restore them.

    The flags are module globals: loading is meant for one thread (prepare_data/setup), not many at once.
    """
    saved = (datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE)
    if offline:
        datasets.config.HF_HUB_OFFLINE = huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE = saved


# --------------------------------------------------------------------------- hub datasets and files


def load_hub_dataset(name: str, config: str | None, hf_cache_dir: str | None) -> DatasetDict:
    """All splits of a hub dataset, from the local cache when the hub is unreachable."""
    offline = hub_is_offline()
    label = repr(name) if config is None else f"{name!r} (config {config!r})"
    try:
        with _hub_mode(offline):
            loaded = datasets.load_dataset(name, config, cache_dir=hf_cache_dir)
    except OSError as error:  # connection errors and DatasetNotFoundError are OSErrors
        if offline:
            raise ConfigError(
                f"Dataset {label} is not cached and the hub cannot be reached (offline); download it "
                f"once while online, or {_LOCAL_HINT}."
            ) from None
        raise ConfigError(
            f"Dataset {label} could not be loaded from the hub ({brief(error)}); "
            f"check the name, or {_LOCAL_HINT}."
        ) from None
    except ValueError as error:  # e.g. an unknown config name; the message lists the valid ones
        raise ConfigError(
            f"Dataset {label} could not be loaded ({brief(error)}); check the dataset and config names."
        ) from None
    if not isinstance(loaded, DatasetDict):
        raise ConfigError(f"Dataset {label} did not load as named splits; {_LOCAL_HINT} instead.")
    return loaded


def download_hub_file(repo_id: str, filename: str, what: str) -> str:
    """Local path of one file of a hub model repository (e.g. a pretrained tokenizer.json)."""
    offline = hub_is_offline()
    try:
        with _hub_mode(offline):
            return huggingface_hub.hf_hub_download(repo_id, filename)
    except (OSError, EntryNotFoundError) as error:
        if offline:
            raise ConfigError(
                f"{what} {repo_id!r} is not cached and the hub cannot be reached (offline); download it once "
                f"while online, or use tokenizer='bytes' or 'bpe', which need no download."
            ) from None
        raise ConfigError(
            f"{what} {repo_id!r} has no downloadable {filename} ({type(error).__name__}); use a hub repository "
            f"that ships one, or tokenizer='bytes' or 'bpe'."
        ) from None


# --------------------------------------------------------------------------- local files


def normalize_data_files(data_files: DataFiles) -> dict[str, list[str]]:
    """`data_files` as {split: [paths or globs]}; a bare path or list is the training split."""
    if isinstance(data_files, (str, os.PathLike)):
        data_files = {"train": [os.fspath(data_files)]}
    elif isinstance(data_files, (list, tuple)):
        data_files = {"train": [os.fspath(p) for p in data_files]}
    elif not isinstance(data_files, Mapping):
        raise ConfigError(f"data_files={data_files!r} is invalid; give a path, a list of paths or {{split: path}}.")
    normalized: dict[str, list[str]] = {}
    for split, paths in data_files.items():
        split = _SPLIT_ALIASES.get(split, split)
        paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        normalized[split] = [os.fspath(p) for p in paths]
    return normalized


def local_format(data_files: dict[str, list[str]], dataset: str | None) -> str:
    """The `datasets` builder for local files: `dataset` when it names one, else the file extension."""
    if dataset in LOCAL_FORMATS:
        return dataset
    formats = set()
    for path in (p for paths in data_files.values() for p in paths):
        suffixes = [s for s in Path(path).suffixes if s not in _COMPRESSION_SUFFIXES]
        extension = suffixes[-1].lower() if suffixes else ""
        if extension not in _EXTENSION_FORMATS:
            raise ConfigError(
                f"Cannot tell the format of data file {path!r}; use one of the extensions "
                f"{', '.join(sorted(_EXTENSION_FORMATS))} or set dataset to one of {', '.join(LOCAL_FORMATS)}."
            )
        formats.add(_EXTENSION_FORMATS[extension])
    if len(formats) != 1:
        raise ConfigError(f"data_files mix formats {sorted(formats)}; give files of a single format.")
    return formats.pop()


def check_local_files(data_files: dict[str, list[str]]) -> None:
    """Every path or glob names at least one file, and no file is empty (cheap: no file is read)."""
    for split, patterns in data_files.items():
        for pattern in patterns:
            matches = glob.glob(os.path.expanduser(pattern))
            if not matches:
                raise ConfigError(
                    f"Data file {pattern!r} (split {split!r}) does not exist; check the path in data_files."
                )
            for path in matches:
                if os.path.isfile(path) and os.path.getsize(path) == 0:
                    raise ConfigError(
                        f"Data file {path!r} (split {split!r}) is empty; give a file that holds data, or leave it out of data_files."
                    )


def load_local_dataset(
    data_files: dict[str, list[str]], file_format: str, hf_cache_dir: str | None, **builder_kwargs: object
) -> DatasetDict:
    check_local_files(data_files)
    files = {split: [os.path.expanduser(p) for p in paths] for split, paths in data_files.items()}
    try:
        return datasets.load_dataset(file_format, data_files=files, cache_dir=hf_cache_dir, **builder_kwargs)
    except (ValueError, OSError, datasets.exceptions.DatasetGenerationError) as error:
        raise ConfigError(
            f"Local {file_format} files {sorted(p for ps in files.values() for p in ps)} could not be read "
            f"({brief(error.__cause__ or error)})."
        ) from None


def load_source(
    dataset: str | None,
    config: str | None,
    data_files: DataFiles | None,
    hf_cache_dir: str | None,
    **local_kwargs: object,
) -> DatasetDict:
    """Local files when `data_files` is given (`dataset` may then name their format), else a hub dataset."""
    if data_files is not None:
        files = normalize_data_files(data_files)
        return load_local_dataset(files, local_format(files, dataset), hf_cache_dir, **local_kwargs)
    if not dataset:
        raise ConfigError(f"No data given; set dataset to a hub name or {_LOCAL_HINT}.")
    return load_hub_dataset(dataset, config, hf_cache_dir)


def source_fingerprint(dataset: str | None, config: str | None, data_files: DataFiles | None, *extra: object) -> str:
    """A short stable hash naming a source, for cache file names: local files count by path, size and mtime."""
    if data_files is None:
        identity: object = [dataset, config]
    else:
        identity = {
            split: sorted(
                (os.path.abspath(f), os.path.getsize(f), os.stat(f).st_mtime_ns)
                for pattern in patterns
                for f in glob.glob(os.path.expanduser(pattern))
            )
            for split, patterns in sorted(normalize_data_files(data_files).items())
        }
    blob = json.dumps([identity, *extra], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def source_slug(dataset: str | None, data_files: DataFiles | None) -> str:
    """A readable prefix for cache file names."""
    if data_files is not None:
        return "local"
    return (dataset or "data").replace("/", "__")


# --------------------------------------------------------------------------- splits


def require_train(splits: Mapping[str, Dataset], source: str) -> Dataset:
    if "train" not in splits:
        raise ConfigError(
            f"{source} has no 'train' split (it has {sorted(splits)}); name the training files "
            f"with data_files={{'train': ...}}."
        )
    return splits["train"]


def train_val_test(
    splits: DatasetDict, source: str, *, val_fraction: float, seed: int, test_split: str = "test"
) -> tuple[Dataset, Dataset, Dataset]:
    """Training, validation and test sets, carving missing ones from the training split.

    A missing test split is carved with a fixed seed so that it never moves when the run's seed does;
    a missing validation split is carved with `seed`.
    """
    train = require_train(splits, source)
    test = splits.get(test_split)
    validation = splits.get("validation") if test_split != "validation" else None
    if test is None:
        train, test = _carve(train, val_fraction, seed=0, source=source)
    if validation is None:
        train, validation = _carve(train, val_fraction, seed=seed, source=source)
    return train, validation, test


def _carve(data: Dataset, fraction: float, seed: int, source: str) -> tuple[Dataset, Dataset]:
    if len(data) < 2:
        raise ConfigError(f"{source} has {len(data)} training rows, too few to carve a held-out split from.")
    parts = data.train_test_split(test_size=fraction, seed=seed)
    return parts["train"], parts["test"]
