"""What the command line and the recipe give, checked and put right before LightningCLI builds anything:
words jsonargparse would misread (a negative value, null for one field of the model config), the data's
sizes copied into the model config, and trainer values a run could not use (training/cli.py calls these)."""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import torch
from lightning.pytorch.utilities import rank_zero_info

from lit_attention.errors import ConfigError
from lit_attention.modeling.config import GROWABLE
from lit_attention.training.run_dirs import launched_as_rank_zero

NEGATIVE_NUMBER = re.compile(r"-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def joined_negative_values(words: list[str]) -> list[str]:
    """`--model.lr -1e-3` as `--model.lr=-1e-3`: argparse takes a word that starts with `-` for an option,
    and then says only that `--model` expected one argument."""
    joined: list[str] = []
    for word in words:
        if NEGATIVE_NUMBER.fullmatch(word) and joined and joined[-1].startswith("--") and "=" not in joined[-1]:
            joined[-1] = f"{joined[-1]}={word}"
        else:
            joined.append(word)
    return joined


NET_FIELD_NULL = re.compile(r"--model\.(?:init_args\.)?net\.(\w+)")


def nulls_as_mappings(words: list[str]) -> list[str]:
    """`--model.net.vocab_size=null` as `--model.net={vocab_size: null}`: jsonargparse takes null for one
    field of a nested config as a malformed value (a NestedArg), but merges a mapping into the config."""
    rewritten: list[str] = []
    for word in words:
        option, _, value = word.partition("=")
        if word.lower() in ("null", "none") and rewritten and NET_FIELD_NULL.fullmatch(rewritten[-1]):
            option, value = rewritten.pop(), word  # the two-word form
        field = NET_FIELD_NULL.fullmatch(option)
        rewritten.append(f"--model.net={{{field.group(1)}: null}}" if field and value.lower() in ("null", "none") else word)
    return rewritten


def copy_data_sizes(net, config_class, sizes: dict[str, Any], data_name: str, task_name: str) -> None:
    """Put the data's sizes into the model config `net` (a parsed namespace): the fields its
    `config_class.from_data` declares. Unset ones take the data's value; a value the user gave must
    agree with it, except that lengths and the vocabulary may be larger. `sizes` empty: the data
    could not be read (`--print_config` offline), and the fields stay as they are."""
    missing = [name for name in config_class.from_data if name not in sizes]
    if sizes and missing:
        raise ConfigError(
            f"{data_name} does not give {missing[0]}, which {task_name} needs; pair {task_name} with "
            "data of its kind (see the recipes under recipes/)."
        )
    for key in config_class.from_data:
        if key not in sizes:
            continue
        value, given = sizes[key], net.get(key)
        if given is None or given == value:
            net[key] = value
        elif key in GROWABLE and given > value:
            rank_zero_info(f"--model.net.{key} {given} is kept (the data's {key} is {value}).")
        else:
            larger = f", or give at least {value}" if key in GROWABLE else ""
            raise ConfigError(
                f"--model.net.{key} {given} conflicts with the data: {data_name} gives {key}={value}; "
                f"leave --model.net.{key} unset (the data sets it){larger}."
            )


# The limit that would leave a command (or fit's --run.test) nothing to do: Lightning skips the loop and exits 0.
EMPTY_LOOP = {"validate": "limit_val_batches", "test": "limit_test_batches", "predict": "limit_predict_batches"}


def check_trainer_settings(trainer, command: str | None = None, test: bool = False) -> None:
    """Trainer values that Lightning would accept and then do nothing with, or fail on late. `command`:
    the command they are for (`test`: whether fit tests after training)."""
    for name in [command] + (["test"] if command == "fit" and test else []):
        key = EMPTY_LOOP.get(name)
        value = trainer.get(key) if key else None
        if value is not None and not isinstance(value, bool) and value == 0:
            asked = "--run.test" if command == "fit" else command
            raise ConfigError(
                f"--trainer.{key} {value} leaves {asked} nothing to do (Lightning would skip it and report "
                "success); give a number of batches, a fraction in (0, 1], or leave it unset."
            )
    for key in ("max_steps", "max_epochs"):
        value = trainer.get(key)
        if value is not None and (value == 0 or value < -1):
            raise ConfigError(f"--trainer.{key} {value} is invalid; give a positive number, or -1 for no limit.")
    limit = trainer.get("limit_train_batches")
    if limit is not None and not isinstance(limit, bool) and (limit <= 0):
        raise ConfigError(
            f"--trainer.limit_train_batches {limit} is invalid: the run would train nothing; give a "
            "number of batches (e.g. 10), a fraction of the epoch in (0, 1], or leave it unset."
        )
    strategy = trainer.get("strategy")
    check_strategy(strategy, test=command == "fit" and test, checkpointing=trainer.get("enable_checkpointing") is not False)
    options = strategy.get("init_args") if hasattr(strategy, "get") else None
    if options is not None and str(options.get("state_dict_type")) == "sharded":
        # A sharded checkpoint is a directory: the atomic writer, `--ckpt_path last` and reading a
        # checkpoint before the run starts all take one file.
        raise ConfigError(
            "--trainer.strategy.state_dict_type 'sharded' is not supported: a run's checkpoints are single "
            "files that resume and load everywhere; use state_dict_type 'full' (the default), which gathers "
            "them on rank 0."
        )
    devices = trainer.get("devices")
    if str(devices).strip() in ("0", "[]", "") or (isinstance(devices, (list, tuple)) and not devices):
        raise ConfigError(
            f"--trainer.devices {devices!r} is invalid; give a number of devices (e.g. 1), a list of "
            "device indices (e.g. [0, 1]), or auto."
        )
    accelerator = str(trainer.get("accelerator") or "auto")
    on_cpu = accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available())
    processes = int(devices) if str(devices).isdigit() else len(devices) if isinstance(devices, (list, tuple)) else 1
    cores = os.cpu_count() or 1
    if on_cpu and processes > cores and launched_as_rank_zero():
        print(
            f"warning: --trainer.devices {devices} starts {processes} training processes on {cores} CPU cores; "
            "they share the cores, so each runs slower than one process would.",
            file=sys.stderr,
            flush=True,
        )
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"--trainer.accelerator {accelerator} asks for a GPU but none is visible here (torch.cuda.is_available() "
            "is False); use --trainer.accelerator cpu, or stack recipes/trainer/cpu_debug.yaml instead of a GPU preset."
        )


SUPPORTED_STRATEGIES = "auto, ddp (any DDPStrategy), FSDPStrategy (recipes/trainer/fsdp.yaml) or single_device"


def strategy_class(strategy) -> type | None:
    """The Strategy class a --trainer.strategy setting names: a registered name, a class_path, or a Strategy
    given from Python. None for auto, and for a name Lightning does not know (Lightning says so itself)."""
    from lightning.pytorch.strategies import Strategy, StrategyRegistry

    if strategy is None or isinstance(strategy, Strategy):
        return None if strategy is None else type(strategy)
    path = strategy.get("class_path") if hasattr(strategy, "get") else strategy
    if path and "." in str(path):
        module, _, name = str(path).rpartition(".")
        try:
            return getattr(__import__(module, fromlist=[name]), name) if module else None
        except (ImportError, AttributeError):
            return None  # jsonargparse has already refused a class it cannot import
    return StrategyRegistry[str(strategy)]["strategy"] if str(strategy) in StrategyRegistry else None


def check_strategy(strategy, test: bool, checkpointing: bool) -> None:
    """Refuse, before anything is built, a strategy whose runs this suite cannot keep: DeepSpeed and
    ModelParallelStrategy write checkpoints that are directories (the run's single-file, atomic
    `last.ckpt` is what resume, compare and predict read), and ModelParallelStrategy leaves the sharding
    to a `configure_model` that here does not shard, so gradients would not be synchronised. An FSDP run
    that tests after fit tests a new copy of the model (FSDP's wrapping of the trained one outlives fit),
    loaded from the best or last checkpoint, so it needs checkpoints."""
    from lightning.pytorch.strategies import DDPStrategy, DeepSpeedStrategy, FSDPStrategy, SingleDeviceStrategy

    cls = strategy_class(strategy)
    if cls is None:
        return
    name = strategy.get("class_path") if hasattr(strategy, "get") else strategy if isinstance(strategy, str) else cls.__name__
    if issubclass(cls, DeepSpeedStrategy) or not issubclass(cls, (DDPStrategy, FSDPStrategy, SingleDeviceStrategy)):
        raise ConfigError(
            f"--trainer.strategy {name} is not supported: its checkpoints are directories (or it leaves the "
            f"sharding to the model, which does not shard itself), and a run keeps one checkpoint file that "
            f"resumes and loads everywhere; use {SUPPORTED_STRATEGIES}."
        )
    if issubclass(cls, FSDPStrategy) and test and not checkpointing:
        raise ConfigError(
            "--run.test under FSDP tests a checkpoint (the best, else last.ckpt), and "
            "--trainer.enable_checkpointing false keeps none; leave checkpointing on, or test later with "
            "`lit-attention test`."
        )


def processes_in_run(trainer) -> int:
    """How many training processes the trainer settings start (devices per node x nodes), as Lightning counts them."""
    devices = trainer.get("devices") if trainer.get("devices") is not None else "auto"
    accelerator = str(trainer.get("accelerator") or "auto")
    on_cpu = accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available())
    text = str(devices).strip()
    if isinstance(devices, (list, tuple)):
        per_node = len(devices)
    elif text in ("auto", "-1"):  # every visible GPU; one process on CPU for auto, a core each for -1
        per_node = (os.cpu_count() or 1) if on_cpu and text == "-1" else 1 if on_cpu else torch.cuda.device_count()
    elif "," in text:  # "0,1": device indices
        per_node = len([index for index in text.split(",") if index.strip()])
    else:
        per_node = int(text) if text.isdigit() else 1
    return per_node * int(trainer.get("num_nodes") or 1)


def check_data_prepared(trainer, datamodule) -> None:
    """A run of several processes on data whose preparing takes long is refused: Lightning prepares it
    on local rank 0 while the other ranks wait at a barrier that gives up after 30 minutes."""
    processes = processes_in_run(trainer)
    # A DataModule from outside the suite (a plain LightningDataModule) says nothing: it is not refused.
    unprepared = getattr(datamodule, "unprepared", lambda: None)() if processes > 1 else None
    if unprepared:
        raise ConfigError(
            f"{unprepared} are not prepared yet, and a run of {processes} processes would make them on one "
            "while the others wait at a barrier that times out; prepare them once with `lit-attention "
            "prepare` and this command's --config and --data options, then start the run again."
        )
