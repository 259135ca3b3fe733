"""A trained run's model and held-out data, from the checkpoints `validate` reads.

`--ckpt_path` is a checkpoint file, a training run's directory (`.../version_<k>`: its best
checkpoint, else its last.ckpt) or a seed's directory (its newest training run). The model is rebuilt
from the checkpoint's own hyper-parameters and weights (no recipe needed); the data from the
DataModule the run trained with (the run's config.yaml names its class; the checkpoint keeps its
arguments). Nothing is written anywhere.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

import datamodules
from lit_attention.errors import ConfigError
from lit_attention.modeling import CONFIG_FIELDS
from lit_attention.training import tasks
from lit_attention.training.checkpointing import read_checkpoint
from lit_attention.training.config_classes import class_of
from lit_attention.training.run_dirs import CHECKPOINTS, LAST, newest_version, training_run_of
from lit_attention.training.tasks.base import TaskModule


@dataclass
class LoadedRun:
    checkpoint: Path  # the .ckpt file read
    run_dir: Path | None  # its training run (`.../version_<k>`), when it lies in one
    task: TaskModule  # the LightningModule, weights loaded, in eval mode
    step: int  # the optimizer step the checkpoint was taken at
    hyper_parameters: dict
    data_class: str | None  # the DataModule's class path
    data_arguments: dict  # its arguments

    @property
    def name(self) -> str:
        """A short label: `<variant>/seed_<n>` from the run layout, else the checkpoint's file name."""
        if self.run_dir is not None:
            return f"{self.run_dir.parent.parent.name}/{self.run_dir.parent.name}"
        return self.checkpoint.stem


def checkpoint_file(path: str | os.PathLike) -> Path:
    """The checkpoint `--ckpt_path` names: the file itself, or a run directory's best (else last) checkpoint."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise ConfigError(
            f"--ckpt_path {str(path)!r} does not exist; pass a .ckpt file or a training run's directory "
            "(runs/<recipe>/<variant>/seed_<n>/version_<k>)."
        )
    run = path if (path / CHECKPOINTS).is_dir() else newest_version(path)
    found = sorted((run / CHECKPOINTS).glob("best-*.ckpt"), key=os.path.getmtime) if run is not None else []
    if found:
        return found[-1]
    if run is not None and (run / CHECKPOINTS / LAST).is_file():
        return run / CHECKPOINTS / LAST
    raise ConfigError(
        f"--ckpt_path {str(path)!r} holds no checkpoint (no checkpoints/best-*.ckpt or last.ckpt in it "
        "or its newest version_<k>); pass a .ckpt file or a trained run's directory."
    )


def load_run(path: str | os.PathLike) -> LoadedRun:
    """The model of the checkpoint `path` names, or a ConfigError in one sentence saying why not."""
    file = checkpoint_file(path)
    checkpoint = read_checkpoint(file)
    hyper_parameters = dict(checkpoint.get("hyper_parameters") or {})
    class_path = hyper_parameters.get("_class_path")
    task_class = _task_class(class_path)
    if task_class is None:
        raise ConfigError(
            f"Checkpoint {str(file)!r} does not say which lit-attention task wrote it (its hyper-parameters "
            "name no task class); pass a checkpoint written by `lit-attention fit`."
        )
    arguments = current_arguments({k: v for k, v in hyper_parameters.items() if not k.startswith("_")})
    try:
        task = task_class(**arguments)
        task.load_state_dict(checkpoint["state_dict"])
    except (TypeError, RuntimeError, ValueError) as error:
        reason = str(error).strip().splitlines()[0][:160]
        raise ConfigError(
            f"Checkpoint {str(file)!r} does not rebuild its model ({reason}); pass a checkpoint written by "
            "this version of lit-attention."
        ) from None
    task.eval()
    run_dir = training_run_of(file)
    data_class, data_arguments = _data_of(checkpoint, run_folder(file, run_dir))
    return LoadedRun(file, run_dir, task, int(checkpoint.get("global_step") or 0), hyper_parameters, data_class, data_arguments)


def _task_class(class_path) -> type[TaskModule] | None:
    if not isinstance(class_path, str) or "." not in class_path:
        return None
    try:
        found = class_of(class_path)
    except (ImportError, AttributeError):  # written before the tasks moved (lit_attention.tasks.X): X by its name
        found = getattr(tasks, class_path.rpartition(".")[2], None)
    return found if isinstance(found, type) and issubclass(found, TaskModule) else None


def current_arguments(arguments: dict) -> dict:
    """A task's arguments as this version takes them: a checkpoint written before the architecture moved
    into the model config keeps its fields (dim, depth, ...) flat, beside the task's own (lr, ...)."""
    if "net" in arguments:
        return arguments
    net = {key: value for key, value in arguments.items() if key in CONFIG_FIELDS}
    rest = {key: value for key, value in arguments.items() if key not in CONFIG_FIELDS}
    return {**rest, "net": net} if net else arguments


def _data_of(checkpoint: dict, run_dir: Path | None) -> tuple[str | None, dict]:
    """The DataModule's class path and arguments: the checkpoint's arguments, the class from the run's
    config.yaml, or else the one DataModule whose arguments are exactly the checkpoint's."""
    arguments = dict(checkpoint.get("datamodule_hyper_parameters") or {})
    config = run_dir / "config.yaml" if run_dir is not None else None
    if config is not None and config.is_file():
        data = (yaml.safe_load(config.read_text()) or {}).get("data") or {}
        if isinstance(data, dict) and data.get("class_path"):
            return data["class_path"], arguments or dict(data.get("init_args") or {})
    for name in datamodules.__all__:
        candidate = getattr(datamodules, name)
        if name != "DataModule" and arguments and set(arguments) == _arguments_of(candidate):
            return f"datamodules.{name}", arguments
    return None, arguments


def _arguments_of(data_class: type) -> set[str]:
    """Every keyword argument of the __init__ chain of a DataModule (what save_hyperparameters keeps)."""
    names = set()
    for cls in data_class.__mro__:
        if "__init__" in vars(cls) and issubclass(cls, datamodules.DataModule):
            names |= {p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs")}
    return names


def run_folder(checkpoint: Path, run_dir: Path | None) -> Path | None:
    """The folder of the run a checkpoint belongs to: its training run, or the folder above the `checkpoints/`
    it lies in (a run copied under another name than version_<k>)."""
    if run_dir is not None:
        return run_dir
    return checkpoint.resolve().parent.parent if checkpoint.resolve().parent.name == CHECKPOINTS else None


def check_data_known(run: LoadedRun) -> None:
    """One sentence when nothing says which data the run trained on: the checkpoint names no DataModule
    and its run directory has no config.yaml (the fit writes one there)."""
    if run.data_class is not None:
        return
    folder = run_folder(run.checkpoint, run.run_dir)
    if folder is not None:
        raise ConfigError(
            f"The run {str(folder)!r} has no config.yaml, which names the data it trained on, and its checkpoint "
            f"{str(run.checkpoint)!r} does not name it either; put the run's config.yaml back beside "
            "checkpoints/ (a copy of a run keeps it there)."
        )
    raise ConfigError(
        f"Checkpoint {str(run.checkpoint)!r} does not say which data it was trained on (no config.yaml "
        "beside it and no DataModule arguments in it); inspect a checkpoint inside its run directory."
    )


def held_out_loader(run: LoadedRun, data_dir: str | os.PathLike | None = None):
    """The validation DataLoader of the run's data (in order, no workers): the held-out batches. A relative
    `data_dir` (the default `data`) is read from the working directory, as the run did; `data_dir` replaces it."""
    check_data_known(run)
    data_class = class_of(run.data_class)
    arguments = {**run.data_arguments, "num_workers": 0}
    if data_dir is not None:
        if "data_dir" not in _arguments_of(data_class):
            raise ConfigError(f"--data_dir {str(data_dir)!r}: {data_class.__name__} reads no data folder; leave --data_dir out.")
        arguments["data_dir"] = str(data_dir)
    data = data_class(**arguments)
    data.prepare_data()
    data.setup("validate")
    return data.val_dataloader()
