"""The `lit-attention` command: LightningCLI plus the run layout, data-driven model sizes and clear errors.

    lit-attention fit --config recipes/quickstart/vit_digits.yaml --model.attention super
    lit-attention compare --config recipes/quickstart/vit_digits.yaml --variants all --seeds 3

Runs are written to `<run.root>/<run.name>/<variant>/seed_<n>/version_<k>/` (TensorBoard events,
`config.yaml`, `checkpoints/`), so every variant of a recipe shows up side by side in TensorBoard
and a rerun gets a new version instead of overwriting the last one.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import torch
from lightning.pytorch.callbacks import ModelCheckpoint, ThroughputMonitor
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.loggers import TensorBoardLogger

import datamodules  # noqa: F401  (registers the DataModules for `--data <ShortName>`)
import lit_attention.tasks  # noqa: F401  (registers the LightningModules for `--model <ShortName>`)
from datamodules import DataError
from lit_attention.attention import resolve_spec
from lit_attention.callbacks import AttentionMapLogger
from lit_attention.errors import ConfigError
from lit_attention.tasks.base import TaskModule

# Sizes the DataModule knows and the model must match; copied into the model's arguments.
DATA_TO_MODEL = (
    "num_classes", "image_size", "in_channels", "vocab_size", "max_len", "pad_id", "bos_id", "eos_id",
    "max_src_len", "max_tgt_len",
)
TRACEBACK_ENV = "LIT_ATTENTION_TRACEBACK"
DESCRIPTION = (
    "Train attention variants with LightningCLI (fit / validate / test / predict). "
    "`lit-attention compare --help` runs a recipe over several variants and seeds."
)


class LitAttentionCLI(LightningCLI):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("subclass_mode_model", True)
        kwargs.setdefault("subclass_mode_data", True)
        kwargs.setdefault("seed_everything_default", 0)
        kwargs.setdefault("save_config_kwargs", {"overwrite": True})
        kwargs.setdefault("parser_kwargs", {"description": DESCRIPTION})
        super().__init__(*args, **kwargs)

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_argument("--run.root", type=str, default="runs", help="Directory that holds all runs.")
        parser.add_argument("--run.name", type=str | None, default=None,
                            help="Recipe name, the first level under run.root (default: the recipe file's name).")
        parser.add_argument("--run.attention_maps", type=bool, default=False,
                            help="Log attention maps of one validation sample to TensorBoard after each validation.")

    # ------------------------------------------------------------------ configuration

    def _subcommand_config(self):
        return self.config[self.subcommand] if self.subcommand else self.config

    def before_instantiate_classes(self) -> None:
        """Copy the sizes the data defines (classes, vocabulary, lengths, image shape) into the model,
        then build the model once on the meta device: a bad value fails here, in one sentence,
        before any data preparation or weight allocation."""
        config = self._subcommand_config()
        data_config, model_config = config.get("data"), config.get("model")
        if model_config is None or "init_args" not in model_config:
            return
        if data_config is not None:
            datamodule = _class_of(data_config)(**_init_args(data_config))
            for key in DATA_TO_MODEL:
                if key in model_config.init_args and hasattr(datamodule, key):
                    model_config.init_args[key] = getattr(datamodule, key)
        with torch.device("meta"):
            _class_of(model_config)(**_init_args(model_config))

    def instantiate_classes(self) -> None:
        super().instantiate_classes()
        # Lightning refuses to log module and data hyper-parameters that share a name with different
        # values (the data's image_size=None vs the model's 8); log the data's under a "data/" prefix.
        if self.datamodule is not None and self.model is not None:
            data_hparams = {f"data/{k}": v for k, v in self.datamodule.hparams_initial.items() if k != "_class_path"}
            self.model._hparams_initial.update(data_hparams)
            self.datamodule._log_hyperparams = False

    def run_directory_parts(self) -> tuple[str, str, str]:
        """(root, recipe/variant/seed_n name, variant) for this run."""
        config = self._subcommand_config()
        run = config.get("run")
        recipe = run.name if run and run.name else recipe_name(config.get("config"))
        variant = resolve_spec(config.model.init_args.attention).name
        seed = config.get("seed_everything")
        return run.root, f"{recipe}/{variant}/seed_{seed}", variant

    def instantiate_trainer(self, **kwargs):
        config = self._subcommand_config()
        trainer_config = config.get("trainer", {})
        if trainer_config.get("logger") in (None, True):
            root, name, _ = self.run_directory_parts()
            kwargs["logger"] = TensorBoardLogger(save_dir=root, name=name, default_hp_metric=True)
        user_callbacks = list(self._get(self.config_init, "trainer", default={}).get("callbacks") or [])
        kwargs["callbacks"] = user_callbacks + self.default_callbacks(user_callbacks, trainer_config)
        return super().instantiate_trainer(**kwargs)

    def default_callbacks(self, user_callbacks, trainer_config) -> list:
        callbacks = []
        model = self.model
        wants_checkpoints = trainer_config.get("enable_checkpointing") is not False
        if wants_checkpoints and not any(isinstance(c, ModelCheckpoint) for c in user_callbacks):
            callbacks.append(ModelCheckpoint(
                monitor=model.monitor, mode=model.monitor_mode, save_last=True, save_top_k=1,
                filename="best-{epoch}-{step}", auto_insert_metric_name=False,
            ))
        if not any(isinstance(c, ThroughputMonitor) for c in user_callbacks):
            callbacks.append(ThroughputMonitor(
                batch_size_fn=model.batch_size_of, length_fn=_lengths_or_none(model), window_size=10,
            ))
        run = self._subcommand_config().get("run")
        if run is not None and run.attention_maps:
            callbacks.append(AttentionMapLogger())
        return callbacks


def _class_of(config):
    module_name, class_name = config.class_path.rsplit(".", 1)
    return getattr(importlib.import_module(module_name), class_name)


def _init_args(config) -> dict:
    init_args = config.get("init_args")
    return init_args.as_dict() if init_args is not None else {}


def _lengths_or_none(model):
    """items/s only for tasks that count tokens (not images)."""
    return None if type(model).tokens_of is TaskModule.tokens_of else model.tokens_of


def recipe_name(config_paths) -> str:
    """The recipe is the last --config file outside recipes/trainer/, e.g. `quickstart/vit_digits`."""
    for path in reversed(config_paths or []):
        path = Path(str(path))
        if path.parent.name == "trainer":
            continue
        parts = path.with_suffix("").parts
        return "/".join(parts[parts.index("recipes") + 1 :]) if "recipes" in parts else path.stem
    return "default"


def main(argv: list[str] | None = None) -> None:
    words = sys.argv[1:] if argv is None else argv
    if words and words[0] == "compare":
        from lit_attention.compare import main as compare_main

        return compare_main(words[1:])
    if torch.cuda.is_available():
        torch.set_float32_matmul_precision("high")  # TF32 matmuls for float32 runs on GPU
    try:
        LitAttentionCLI(args=argv)  # None: LightningCLI reads sys.argv itself
    except (ConfigError, DataError) as error:
        if os.environ.get(TRACEBACK_ENV):
            raise
        print(f"error: {error}\n(set {TRACEBACK_ENV}=1 to see the traceback)", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
