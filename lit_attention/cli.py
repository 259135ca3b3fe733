"""The `lit-attention` command: LightningCLI plus the run layout, data-driven model sizes and clear errors.

    lit-attention fit --config recipes/quickstart/vit_digits.yaml --model.attention super
    lit-attention compare --config recipes/quickstart/vit_digits.yaml --variants all --seeds 3

Runs are written to `<run.root>/<run.name>/<variant>/seed_<n>/version_<k>/` (TensorBoard events,
`config.yaml`, `checkpoints/`), so every variant of a recipe shows up side by side in TensorBoard
and a rerun gets a new version instead of overwriting the last one (two runs started at the same
moment too). `--ckpt_path last` resumes the latest version of the recipe/variant/seed in place, from
its `checkpoints/last.ckpt`, written every `--run.checkpoint_every_n_steps` steps, after every
validation and at every epoch end.

Exit status: 0 done, 2 bad input (one sentence on stderr, no traceback unless
LIT_ATTENTION_TRACEBACK=1), 3 the training loss became NaN or infinite.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import sys
from argparse import ArgumentError
from pathlib import Path

import torch
import yaml
from lightning.fabric.plugins import CheckpointIO
from lightning.pytorch.callbacks import ModelCheckpoint, ThroughputMonitor
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_info

import datamodules  # noqa: F401  (registers the DataModules for `--data <ShortName>`)
import lit_attention.tasks  # noqa: F401  (registers the LightningModules for `--model <ShortName>`)
from datamodules import DataError
from lit_attention.attention import resolve_spec
from lit_attention.callbacks import AttentionMapLogger, FiniteLossGuard, NonFiniteLossError
from lit_attention.checkpointing import (
    LAST,
    AtomicCheckpointIO,
    ExactResume,
    LastCheckpoint,
    checkpoint_mismatch,
    logging_step,
    read_checkpoint,
)
from lit_attention.errors import ConfigError
from lit_attention.run_dirs import claim_new_version, launched_as_rank_zero, version_dir, version_of_checkpoint, versions
from lit_attention.tasks.base import TaskModule

# Sizes the DataModule knows and the model must match; copied into the model's arguments.
DATA_TO_MODEL = (
    "num_classes", "image_size", "in_channels", "vocab_size", "max_len", "pad_id", "bos_id", "eos_id",
    "max_src_len", "max_tgt_len",
)
TRACEBACK_ENV = "LIT_ATTENTION_TRACEBACK"
# `--ckpt_path` values Lightning resolves itself (besides "last", which this CLI resolves).
LIGHTNING_CHECKPOINT_NAMES = ("best", "hpc", "registry")
# Settings whose change on resume is not worth a warning.
RESUME_IGNORED_SETTINGS = ("ckpt_path", "config")
DESCRIPTION = (
    "Train attention variants with LightningCLI (fit / validate / test / predict). "
    "`lit-attention compare --help` runs a recipe over several variants and seeds."
)


class LitAttentionCLI(LightningCLI):
    def __init__(self, *args, one_line_errors: bool = False, **kwargs) -> None:
        """`one_line_errors`: raise parsing errors (an unknown recipe key, a bad value) as ArgumentError
        for `main` to print in one line, instead of jsonargparse's usage screen and exit."""
        self.one_line_errors = one_line_errors
        kwargs.setdefault("subclass_mode_model", True)
        kwargs.setdefault("subclass_mode_data", True)
        kwargs.setdefault("seed_everything_default", 0)
        kwargs.setdefault("save_config_kwargs", {"overwrite": True})
        kwargs.setdefault("parser_kwargs", {"description": DESCRIPTION})
        self.resume_version: int | None = None  # the version directory a resumed fit continues in
        self.resume_step: int | None = None  # the TensorBoard step of its checkpoint
        super().__init__(*args, **kwargs)

    def init_parser(self, **kwargs):
        kwargs.setdefault("exit_on_error", not self.one_line_errors)
        return super().init_parser(**kwargs)

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_argument("--run.root", type=str, default="runs", help="Directory that holds all runs.")
        parser.add_argument("--run.name", type=str | None, default=None,
                            help="Recipe name, the first level under run.root (default: the recipe file's name).")
        parser.add_argument("--run.attention_maps", type=bool, default=False,
                            help="Log attention maps of one validation sample to TensorBoard after each validation.")
        parser.add_argument("--run.checkpoint_every_n_steps", type=int | None, default=500,
                            help="Write checkpoints/last.ckpt every N optimizer steps, besides after every validation "
                                 "and epoch (null: only then); `--ckpt_path last` resumes from it.")

    # ------------------------------------------------------------------ configuration

    def _subcommand_config(self):
        return self.config[self.subcommand] if self.subcommand else self.config

    def _parse_ckpt_path(self) -> None:
        """Do not let a checkpoint's hyper-parameters silently replace the configured model (what
        LightningCLI does); the recipe stays authoritative and a checkpoint that does not fit it is
        an error, raised in `check_checkpoint`."""

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
            meta_model = _class_of(model_config)(**_init_args(model_config))
        self.check_checkpoint(meta_model)

    # ------------------------------------------------------------------ checkpoints and resuming

    def check_checkpoint(self, meta_model) -> None:
        """Resolve `--ckpt_path last` to this recipe's latest run, then read the checkpoint and compare
        it with the configured model: a missing, corrupted or mismatched checkpoint fails here, before
        any data is prepared. A fit from a checkpoint of this recipe/variant/seed continues its run directory."""
        config = self._subcommand_config()
        path = config.get("ckpt_path")
        if path is None or str(path).split(":")[0] in LIGHTNING_CHECKPOINT_NAMES:
            return
        if path == "last":
            path = config.ckpt_path = self.find_last_checkpoint()
            if path is None:
                return
        checkpoint = read_checkpoint(path)
        differences = checkpoint_mismatch(checkpoint, meta_model)
        if differences:
            raise ConfigError(
                f"Checkpoint {str(path)!r} does not fit the configured model ({'; '.join(differences)}); "
                "configure the model it was trained with, or start without --ckpt_path."
            )
        if self.subcommand == "fit":
            self.resume_version = version_of_checkpoint(self.run_base_dir(), path)
            self.resume_step = logging_step(checkpoint)

    def find_last_checkpoint(self) -> str | None:
        """`last.ckpt` of the latest version of this recipe/variant/seed; None (a new run) when there is
        no run yet or the latest one stopped before its first checkpoint. Never an older version:
        that is a different, earlier run."""
        base = self.run_base_dir()
        existing = versions(base)
        last = version_dir(base, existing[-1]) / "checkpoints" / LAST if existing else None
        if last is None or not last.is_file():
            rank_zero_info(f"--ckpt_path last: nothing to resume in {last.parent.parent if last else base}; starting a new run.")
            return None
        rank_zero_info(f"--ckpt_path last: resuming {last}")
        return str(last)

    def run_base_dir(self) -> Path:
        root, name, _ = self.run_directory_parts()
        return Path(root) / name

    def tensorboard_logger(self) -> TensorBoardLogger:
        """The run's logger: a resumed fit continues its version directory, a new run claims a new one."""
        root, name, _ = self.run_directory_parts()
        extra = {}
        if self.resume_version is not None:
            version = self.resume_version
            if self.resume_step is not None:
                # Hide what the killed run logged after its checkpoint: the resumed run logs it again.
                extra["purge_step"] = self.resume_step + 1
            if launched_as_rank_zero():
                self.keep_config_on_change(version_dir(Path(root) / name, version))
        elif launched_as_rank_zero():
            version = claim_new_version(Path(root) / name)
        else:
            version = None  # other ranks never write; Lightning broadcasts rank 0's directory
        # The placeholder hp_metric (-1 at step 0) belongs to the start of a run, not to a resumption.
        resuming = self.resume_version is not None
        return TensorBoardLogger(save_dir=root, name=name, version=version, default_hp_metric=not resuming, **extra)

    def keep_config_on_change(self, run_dir: Path) -> None:
        """Resuming with other settings is allowed (more steps, more GPUs, a lower learning rate) but
        never silent: the changes are printed, and the earlier config.yaml is kept next to the new one."""
        saved = run_dir / "config.yaml"
        if not saved.is_file():
            return
        before = _flatten(yaml.safe_load(saved.read_text()) or {})
        now = _flatten(yaml.safe_load(self._parser(self.subcommand).dump(self._subcommand_config(), skip_none=False)))
        changed = [key for key in sorted(before.keys() | now.keys())
                   if key.split(".")[0] not in RESUME_IGNORED_SETTINGS and before.get(key) != now.get(key)]
        if not changed:
            return
        number = 1
        while (kept := run_dir / f"config.before_resume_{number}.yaml").exists():
            number += 1
        shutil.copy2(saved, kept)
        listed = ", ".join(f"{key} {before.get(key)!r} -> {now.get(key)!r}" for key in changed[:8])
        print(f"warning: resuming {run_dir} with changed settings: {listed}; the earlier config is kept as {kept.name}.",
              file=sys.stderr)

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
            kwargs["logger"] = self.tensorboard_logger()
        user_callbacks = list(self._get(self.config_init, "trainer", default={}).get("callbacks") or [])
        kwargs["callbacks"] = user_callbacks + self.default_callbacks(user_callbacks, trainer_config)
        kwargs["plugins"] = with_atomic_checkpoints(self._get(self.config_init, "trainer", default={}).get("plugins"))
        return super().instantiate_trainer(**kwargs)

    def default_callbacks(self, user_callbacks, trainer_config) -> list:
        def missing(kind) -> bool:
            return not any(isinstance(c, kind) for c in user_callbacks)

        callbacks = []
        model = self.model
        run = self._subcommand_config().get("run")
        if trainer_config.get("enable_checkpointing") is not False:
            if missing(ExactResume):
                callbacks.append(ExactResume())
            if missing(ModelCheckpoint):  # the best checkpoint; last.ckpt is LastCheckpoint's
                callbacks.append(ModelCheckpoint(
                    monitor=model.monitor, mode=model.monitor_mode, save_last=False, save_top_k=1,
                    filename="best-{epoch}-{step}", auto_insert_metric_name=False,
                ))
            if missing(LastCheckpoint):
                callbacks.append(LastCheckpoint(every_n_steps=run.checkpoint_every_n_steps if run else 500))
        if missing(FiniteLossGuard):
            callbacks.append(FiniteLossGuard())
        if not any(isinstance(c, ThroughputMonitor) for c in user_callbacks):
            callbacks.append(ThroughputMonitor(
                batch_size_fn=model.batch_size_of, length_fn=_lengths_or_none(model), window_size=10,
            ))
        if run is not None and run.attention_maps:
            callbacks.append(AttentionMapLogger())
        return callbacks


def with_atomic_checkpoints(plugins) -> list:
    """The trainer's plugins plus `AtomicCheckpointIO`, unless a checkpoint writer is configured already."""
    plugins = [] if plugins is None else list(plugins) if isinstance(plugins, (list, tuple)) else [plugins]
    if not any(isinstance(plugin, CheckpointIO) for plugin in plugins):
        plugins.append(AtomicCheckpointIO())
    return plugins


def _flatten(tree, prefix: str = "") -> dict:
    """{"a.b.c": leaf} for nested dicts (lists stay leaves)."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    flat = {}
    for key, value in tree.items():
        flat.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def _class_of(config):
    module_name, class_name = config.class_path.rsplit(".", 1)
    return getattr(importlib.import_module(module_name), class_name)


def _init_args(config) -> dict:
    init_args = config.get("init_args")
    return init_args.as_dict() if init_args is not None else {}


def _lengths_or_none(model):
    """items/s only for tasks that count tokens (not images)."""
    return None if type(model).tokens_of is TaskModule.tokens_of else model.tokens_of


def parser_error_sentence(message: str) -> str:
    """jsonargparse's error, often a nested multi-line report, as one sentence naming the bad key."""
    lines = [line.strip(" -") for line in message.splitlines() if line.strip(" -")]
    culprit = next((line for line in lines if "not accepted" in line or "does not accept" in line), None)
    if culprit is None:
        return " ".join(lines).rstrip(".")
    owner = re.search(r"class_path '([^']+)'", message)
    return culprit.rstrip(".") + (f" by {owner.group(1)}" if owner else "")


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
        LitAttentionCLI(args=argv, one_line_errors=True)  # args None: LightningCLI reads sys.argv itself
    except ArgumentError as error:
        if os.environ.get(TRACEBACK_ENV):
            raise
        subcommand = next((w for w in words if not w.startswith("-")), "fit")
        print(f"error: {parser_error_sentence(str(error))}; `lit-attention {subcommand} --help` lists the valid "
              f"options.\n(set {TRACEBACK_ENV}=1 to see the whole report)", file=sys.stderr)
        sys.exit(2)
    except (ConfigError, DataError, NonFiniteLossError) as error:
        if os.environ.get(TRACEBACK_ENV):
            raise
        print(f"error: {error}\n(set {TRACEBACK_ENV}=1 to see the traceback)", file=sys.stderr)
        sys.exit(3 if isinstance(error, NonFiniteLossError) else 2)


if __name__ == "__main__":
    main()
