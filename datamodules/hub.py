"""Loading Hugging Face datasets (hub names or local files), with one sentence when they cannot be.

Offline mode: `HF_HUB_OFFLINE=1` (or `HF_DATASETS_OFFLINE=1`) in the environment, which `datasets` and
`huggingface_hub` read when they are imported (here also when set later, in a process that imported
them already). Then a cached dataset or tokenizer loads at once and a missing one fails at once, here
said in one sentence. Without it, the hub is asked once per process
whether it answers (one request, `HUB_PROBE_SECONDS` at most); when it does not, the one load is made
with the libraries' own offline flags, so that a cached dataset or tokenizer still loads and a missing
one fails at once (left to themselves the libraries retry for about 25 s before giving up).
"""

from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import json
import os
from collections.abc import Iterator, Mapping

import datasets
import huggingface_hub
from datasets import Dataset, DatasetDict
from datasets.data_files import DataFilesList
from datasets.load import infer_module_for_data_files_list
from huggingface_hub.errors import EntryNotFoundError
from huggingface_hub.utils import get_session

from lit_attention.errors import ConfigError, brief

from .fingerprints import file_sha256, fingerprint

DataFiles = Mapping[str, str | list[str]] | str | list[str]

# Builder names of the `datasets` library for local files (a file's extension picks one otherwise).
LOCAL_FORMATS = ("parquet", "json", "csv", "text", "arrow")
_SPLIT_ALIASES = {"val": "validation", "valid": "validation", "dev": "validation"}
_LOCAL_HINT = "pass data_files pointing at local parquet/json/csv/txt files"
_OFFLINE_HINT = "if this machine has no internet, set HF_HUB_OFFLINE=1 so that cached data load at once"


HUB_PROBE_SECONDS = 5.0  # a hub that has not answered by then is taken as unreachable


OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def offline() -> bool:
    """Whether the user asked for offline mode: HF_HUB_OFFLINE / HF_DATASETS_OFFLINE as the libraries read
    them at import, or as the environment says now (set after the libraries were imported)."""
    now = any(os.environ.get(name, "").upper() in ("1", "ON", "YES", "TRUE") for name in OFFLINE_VARIABLES)
    return bool(now or datasets.config.HF_HUB_OFFLINE or huggingface_hub.constants.HF_HUB_OFFLINE)


@functools.cache
def hub_answers(endpoint: str) -> bool:
    """Whether `endpoint` answers one HEAD request (any status) within HUB_PROBE_SECONDS; asked once per
    process, through the libraries' own HTTP session (so their proxy settings apply)."""
    try:
        get_session().head(endpoint, timeout=HUB_PROBE_SECONDS)
    except Exception:  # noqa: BLE001  (the HTTP client's connect / timeout errors are its own classes)
        return False
    return True


@contextlib.contextmanager
def offline_unless_reachable(endpoint: str) -> Iterator[str | None]:
    """Inside: the libraries offline when the user asked for it (yields "offline") or when the hub at
    `endpoint` does not answer (yields the endpoint); else None. Their flags are put back on the way out."""
    if offline():
        reason = "offline"
    elif hub_answers(endpoint):
        yield None
        return
    else:
        reason = endpoint
    saved = datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield reason
    finally:
        datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE = saved


# --------------------------------------------------------------------------- hub datasets and files


def load_hub_dataset(name: str, config: str | None, hf_cache_dir: str | None) -> DatasetDict:
    """All splits of a hub dataset (from the local cache when offline)."""
    label = repr(name) if config is None else f"{name!r} (config {config!r})"
    why_offline = None
    try:
        with offline_unless_reachable(datasets.config.HF_ENDPOINT) as why_offline:
            loaded = datasets.load_dataset(name, config, cache_dir=hf_cache_dir)
    except OSError as error:  # connection errors and DatasetNotFoundError are OSErrors
        if why_offline and why_offline != "offline":
            raise ConfigError(
                f"Dataset {label} is not cached and the hub ({why_offline}) does not answer; download it "
                f"once while online, or {_LOCAL_HINT}."
            ) from None
        if why_offline:
            raise ConfigError(
                f"Dataset {label} is not cached and the hub cannot be reached (offline); download it "
                f"once while online, or {_LOCAL_HINT}."
            ) from None
        raise ConfigError(
            f"Dataset {label} could not be loaded from the hub ({brief(error)}); check the name, or {_LOCAL_HINT} "
            f"({_OFFLINE_HINT})."
        ) from None
    except ValueError as error:  # e.g. an unknown config name; the message lists the valid ones
        raise ConfigError(f"Dataset {label} could not be loaded ({brief(error)}); check the dataset and config names.") from None
    if not isinstance(loaded, DatasetDict):
        raise ConfigError(f"Dataset {label} did not load as named splits; {_LOCAL_HINT} instead.")
    return loaded


def download_hub_file(repo_id: str, filename: str, what: str) -> str:
    """Local path of one file of a hub model repository (e.g. a pretrained tokenizer.json)."""
    why_offline = None
    try:
        with offline_unless_reachable(huggingface_hub.constants.ENDPOINT) as why_offline:
            return huggingface_hub.hf_hub_download(repo_id, filename)
    except (OSError, EntryNotFoundError) as error:
        if why_offline and why_offline != "offline":
            raise ConfigError(
                f"{what} {repo_id!r} is not cached and the hub ({why_offline}) does not answer; download it once "
                f"while online, or use tokenizer='bytes' or 'bpe', which need no download."
            ) from None
        if why_offline:
            raise ConfigError(
                f"{what} {repo_id!r} is not cached and the hub cannot be reached (offline); download it once "
                f"while online, or use tokenizer='bytes' or 'bpe', which need no download."
            ) from None
        raise ConfigError(
            f"{what} {repo_id!r} could not be downloaded ({type(error).__name__}); use a hub repository that "
            f"ships a {filename}, or tokenizer='bytes' or 'bpe' ({_OFFLINE_HINT})."
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
    """The `datasets` builder for local files: `dataset` when it names one, else what `datasets` infers
    from the files' extensions."""
    if dataset in LOCAL_FORMATS:
        return dataset
    check_local_files(data_files)
    formats = set()
    for split, patterns in data_files.items():
        files = DataFilesList.from_patterns([os.path.abspath(os.path.expanduser(p)) for p in patterns])
        module, _ = infer_module_for_data_files_list(files)
        if module is None:
            raise ConfigError(
                f"Cannot tell the format of the {split} data files {patterns}; use a known extension "
                f"(.parquet, .json, .jsonl, .csv, .txt, .arrow) or set dataset to one of {', '.join(LOCAL_FORMATS)}."
            )
        formats.add(module)
    if len(formats) != 1:
        raise ConfigError(f"data_files mix formats {sorted(formats)}; give files of a single format.")
    return formats.pop()


def check_local_files(data_files: dict[str, list[str]]) -> None:
    """Every path or glob names at least one file, and no file is empty (cheap: no file is read)."""
    for split, patterns in data_files.items():
        for pattern in patterns:
            matches = glob.glob(os.path.expanduser(pattern))
            if not matches:
                raise ConfigError(f"Data file {pattern!r} (split {split!r}) does not exist; check the path in data_files.")
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
            f"{source} has no 'train' split (it has {sorted(splits)}); name the training files with data_files={{'train': ...}}."
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


def source_fingerprints(splits: Mapping[str, Dataset]) -> dict[str, str]:
    """`datasets`' own fingerprint of each split as loaded: for a hub dataset a hash of its name,
    configuration, revision and split (not of the cache's location)."""
    return {name: data._fingerprint for name, data in splits.items()}  # no public accessor


def split_fingerprints(
    sources: Mapping[str, str],
    data_files: DataFiles | None,
    *,
    val_fraction: float,
    seed: int,
    test_split: str = "test",
    view: object = None,
) -> dict[str, str]:
    """The fingerprints of the training, validation and test sets train_val_test makes of a source.

    `sources`: source_fingerprints of the loaded splits; local files count by their bytes instead
    (`datasets` hashes their paths and modification times). A carved split is named by the split it
    is carved from and how (val_fraction, seeds), which fix its rows; `view`: what the module keeps of
    a row (its columns). The run seed takes no part: train_val_test never carves with it.
    """
    identity = dict(sources)
    if data_files is not None:
        identity = {
            split: fingerprint(sorted(file_sha256(f) for pattern in patterns for f in glob.glob(os.path.expanduser(pattern))))
            for split, patterns in normalize_data_files(data_files).items()
        }
    test = test_split if test_split in identity else None
    validation = "validation" if "validation" in identity and test_split != "validation" else None
    carving = None
    if test is None or validation is None:  # what makes the rows left in train and the carved ones
        carving = {
            "val_fraction": val_fraction,
            "test_carved": test is None,
            "validation_seed": seed if validation is None else None,
        }
    return {
        "train": fingerprint(identity["train"], "train", carving, view),
        "validation": fingerprint(identity[validation], validation, None, view)
        if validation
        else fingerprint(identity["train"], "validation carved from train", carving, view),
        "test": fingerprint(identity[test], test, None, view)
        if test
        else fingerprint(identity["train"], "test carved from train", carving, view),
    }


def _carve(data: Dataset, fraction: float, seed: int, source: str) -> tuple[Dataset, Dataset]:
    if len(data) < 2:
        raise ConfigError(f"{source} has {len(data)} training rows, too few to carve a held-out split from.")
    parts = data.train_test_split(test_size=fraction, seed=seed)
    return parts["train"], parts["test"]
