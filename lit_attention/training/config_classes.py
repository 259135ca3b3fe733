"""The classes a run's config names: finding a `class_path`, building it from its `init_args`, the short
names `--model` and `--data` accept, and the resolved config as a run's record keeps it."""

from __future__ import annotations

import importlib

import yaml

import datamodules
import lit_attention.training.tasks
from lit_attention.training.records import run_config


def resolved(parser, config) -> dict:
    """The run's config as its record keeps it (records.run_config), dumped the way config.yaml is.

    Without dump's own check: the config was checked when parsed, and the data's sizes copied in since
    have built the model already. Checking again was some 60% of the dump, and compare plans every arm x
    grid point of a sweep with it (the text dumped is the same)."""
    return run_config(yaml.safe_load(parser.dump(config, skip_none=False, skip_check=True)))


def class_of(class_path: str) -> type:
    module_name, class_name = class_path.rsplit(".", 1)
    return getattr(importlib.import_module(module_name), class_name)


def instantiate_config(config):
    """The class a `class_path` / `init_args` config names, built from it (nested configs as dicts)."""
    init_args = config.get("init_args")
    return class_of(config.class_path)(**(init_args.as_dict() if init_args else {}))


def registered_classes() -> dict[str, list[str]]:
    """Short names `--model` and `--data` accept, for error messages."""
    return {"model": list(lit_attention.training.tasks.__all__), "data": [n for n in datamodules.__all__ if n != "DataModule"]}
