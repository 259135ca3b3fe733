"""`lit-attention fit / validate / test / predict`: LightningCLI with the suite's run layout, model
sizes taken from the data, and what-you-see printing.

    lit-attention fit --config recipes/quickstart/vit_digits.yaml --model.attention super

One run, in order: parse the recipe and flags; build the DataModule once and copy the sizes it
defines (classes, vocabulary, lengths, image shape) into the model's arguments; check the trainer
settings; print the config if asked (with those sizes, as the run will use them); build the model on
the meta device (a bad value fails here, before any data work); choose the run directory (checkpoint
resolution, resume, lock: `run_dirs.py`, `checkpointing.py`); train. The modules that run after that:
`training/tasks/` (LightningModules), `modeling/` (plain nn.Modules, `modeling/attention.py`).
"""

from __future__ import annotations

import inspect
import sys
from argparse import ArgumentError
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

import datamodules  # noqa: F401  (registers the DataModules for `--data <ShortName>`)
import lit_attention.training.tasks  # noqa: F401  (registers the LightningModules for `--model <ShortName>`)
from lit_attention.modeling import CONFIG_FIELDS
from lit_attention.modeling.variants import resolve_spec
from lit_attention.training.callbacks import PredictionWriter, default_callbacks
from lit_attention.training.checkpointing import (
    logging_step,
    read_fitting_checkpoint,
    resolve_checkpoint,
    trains_further,
    with_atomic_checkpoints,
)
from lit_attention.training.cli_input import (
    check_data_prepared,
    check_trainer_settings,
    copy_data_sizes,
    joined_negative_values,
    nulls_as_mappings,
    processes_in_run,
)
from lit_attention.training.global_batch import apply_global_batch
from lit_attention.errors import ConfigError
from lit_attention.limits import check_run_seed
from lit_attention.training.input_limits import check_path_lengths, check_trainer_values, runs_on_cpu
from lit_attention.training.library_errors import TrainerSettingsError
from lit_attention.training.memory import check_fits_memory
from lit_attention.training import preemption
from lit_attention.training.lightning_internals import RecipeOverCheckpoint, subcommand_parser
from lit_attention.training.parser_errors import (
    abbreviation_sentence,
    config_class_without,
    unknown_field_sentence,
    unknown_net_field,
)
from lit_attention.training.recorder import finish_fit
from lit_attention.training.records import finished_record
from lit_attention.training.config_classes import class_of, instantiate_config, resolved
from lit_attention.training.run_dirs import (
    CHECKPOINTS,
    RunLock,
    RunPlace,
    check_run_name,
    check_writable,
    launched_as_rank_zero,
    place_run,
    recipe_name,
    remove_if_unused,
    run_logger,
    version_of_checkpoint,
)
from lit_attention.training.run_config import RunConfigSaver
from lit_attention.training.quiet import quiet_lightning
from lit_attention.training.other_loggers import RunLabels, check_logger_stores, name_loggers
from lit_attention.training.run_logger import RunLogger, hparams_metrics, settings_label
from lit_attention.training.tasks.base import TaskModule

DESCRIPTION = (
    "Train attention variants with LightningCLI (fit / validate / test / predict). "
    "`lit-attention compare --help` runs a recipe over variants, seeds and a grid of settings."
)
PRINT_CONFIG = "--print_config"


class FullNamesParser(LightningArgumentParser):
    """Options are written in full: argparse would expand `--seed 7` to `--seed_everything 7` and the
    nested class parsers `--model.net.di` to `--model.net.dim`. jsonargparse builds the nested parsers
    with the class of their parent, so this default reaches them too."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


class LitAttentionCLI(RecipeOverCheckpoint, LightningCLI):
    """LightningCLI plus the `run.*` arguments and the data-to-model size copy; see the module doc."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("subclass_mode_model", True)
        kwargs.setdefault("parser_class", FullNamesParser)
        kwargs.setdefault("subclass_mode_data", True)
        kwargs.setdefault("seed_everything_default", 0)
        kwargs.setdefault("save_config_callback", RunConfigSaver)
        kwargs.setdefault("save_config_kwargs", {"overwrite": True})
        kwargs.setdefault("parser_kwargs", {"description": DESCRIPTION})
        kwargs.setdefault("trainer_defaults", {"enable_model_summary": False})
        # The tasks build AdamW with decay groups and their schedule from their own arguments; a
        # replacement optimizer would drop the groups and leave those arguments in config.yaml unused.
        kwargs.setdefault("auto_configure_optimizers", False)
        self.print_config_request: str | None = None
        self.built_datamodule = None
        self.resume_step: int | None = None
        self.place: RunPlace | None = None
        self.lock: RunLock | None = None
        self.previous_record: dict | None = None  # the record of the finished run this fit resumes
        try:
            super().__init__(*args, **kwargs)
        except BaseException as error:
            trainer = getattr(self, "trainer", None)
            writer = next((c for c in trainer.callbacks if isinstance(c, PredictionWriter)), None) if trainer else None
            predicted = writer.rows if writer is not None else None
            if self.place is not None:  # no empty version_<k> for `--ckpt_path last` to find next time
                trained = trainer is not None and trainer.fit_loop.epoch_loop.batch_progress.total.started > 0
                remove_if_unused(self.place, trained or bool(predicted))
                if self.place.directory is not None and self.place.directory.is_dir():
                    error.run_directory = self.place.directory  # where main writes a traceback
            if isinstance(error, preemption.SIGTERMException):  # a SystemExit whose status would be 0
                words = list(sys.argv[1:] if kwargs.get("args") is None else kwargs["args"])
                preemption.stop(self.subcommand, words, trainer, self.place.directory if self.place else None, predicted)
            raise
        finally:
            if self.lock is not None:
                self.lock.release()

    def init_parser(self, **kwargs):
        kwargs.setdefault("exit_on_error", False)  # errors reach `main`, which says them in one sentence
        return super().init_parser(**kwargs)

    def add_default_arguments_to_parser(self, parser) -> None:
        """`--seed_everything` takes a whole number only. Lightning's `true` (draw a random seed) and
        `false` (no seeding) are refused: a run is kept, resumed (`--ckpt_path last`) and compared
        under `seed_<n>`, so its seed must be known before it starts and the same when it resumes."""
        parser.add_argument(
            "--seed_everything",
            type=int,
            default=self.seed_everything_default,
            help="The run's seed, a whole number from 0; the run is kept under seed_<n>.",
        )

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_argument("--run.root", type=str, default="runs", help="Directory that holds all runs.")
        parser.add_argument(
            "--run.name",
            type=str | None,
            default=None,
            help="Recipe name, the first level under run.root (default: the recipe file's name).",
        )
        parser.add_argument(
            "--run.attention_maps",
            type=bool,
            default=False,
            help="Log attention maps of one validation sample to TensorBoard after each validation.",
        )
        parser.add_argument(
            "--run.checkpoint_every_n_steps",
            type=int | None,
            default=500,
            help="Write checkpoints/last.ckpt every N optimizer steps, besides after every validation "
            "and epoch (null: only then); `--ckpt_path last` resumes from it.",
        )
        parser.add_argument(
            "--run.test",
            type=bool,
            default=False,
            help="After fit, score the best checkpoint on the test split; the result goes to record.json.",
        )
        parser.add_argument(
            "--run.settings",
            type=dict[str, str] | None,
            default=None,
            help="Labels kept in the run's record.json (compare names its grid settings here).",
        )
        parser.add_argument(
            "--run.global_batch_size",
            type=int | None,
            default=None,
            help="Sequences (or images) per optimizer step over every device and node; the per-device "
            "batch_size (at most the one given) and accumulate_grad_batches are derived from it, "
            "so that the run trains the same on any layout (null: use them as given).",
        )
        parser.add_argument(
            "--run.recipe",
            type=str | None,
            default=None,
            help="The recipe's name in record.json and TensorBoard (default: --run.name); compare "
            "sets it, since its --run.name is the grid point's folder.",
        )

    # ------------------------------------------------------------------ configuration

    def parse_arguments(self, parser, args) -> None:
        """`--print_config` is taken out here and served after the data sizes are known, so that it
        shows the sizes the run will use, not the model's placeholders."""
        words = nulls_as_mappings(joined_negative_values(list(sys.argv[1:] if args is None else args)))
        kept = []
        for word in words:
            if word == PRINT_CONFIG or word.startswith(PRINT_CONFIG + "="):
                self.print_config_request = word.partition("=")[2]
            else:
                kept.append(word)
        try:
            self.config = parser.parse_args(kept)
        except ArgumentError as error:
            sentence = abbreviation_sentence(kept, self.option_names(kept), str(error))
            if sentence:
                raise ConfigError(sentence) from None
            field = unknown_net_field(str(error))
            if field is not None:
                raise ConfigError(unknown_field_sentence(field, config_class_without(parser, kept, field))) from None
            raise
        subcommand = self.config.get("subcommand")
        check_run_seed((self.config[subcommand] if subcommand else self.config).get("seed_everything"))

    def option_names(self, words: list[str]) -> set[str]:
        """The full option names of the command `words` runs: the parser's own, and the model's config
        fields and the task's arguments (which the parser only learns once it knows the class)."""
        command = words[0] if words and words[0] in self.subcommands() else None
        parser = subcommand_parser(self, command)
        names = {option for action in parser._actions for option in action.option_strings if option.startswith("--")}
        names |= {f"--model.net.{name}" for name in CONFIG_FIELDS}
        names |= {f"--model.{name}" for name in inspect.signature(TaskModule.__init__).parameters if name != "self"}
        return names

    @property
    def run_config(self):
        return self.config[self.subcommand] if self.subcommand else self.config

    def before_instantiate_classes(self) -> None:
        if self.run_config.get("data") is not None and self.run_config.get("model") is not None:
            note = apply_global_batch(self.run_config, processes_in_run(self.run_config.trainer))
            if note and launched_as_rank_zero() and self.print_config_request is None:
                print(note, flush=True)
        self.prepare_config()
        if self.subcommand == "predict" and self.run_config.get("return_predictions") is None:
            # PredictionWriter writes every row as it comes: Lightning's copy of them all would only fill memory.
            self.run_config.return_predictions = False
        if self.print_config_request is not None:
            skip_null = "skip_null" in self.print_config_request
            print(subcommand_parser(self, self.subcommand).dump(self.run_config, skip_none=skip_null), end="")
            raise SystemExit(0)
        check_trainer_settings(self.run_config.trainer, self.subcommand, self.run_config.run.test)
        check_trainer_values(self.run_config.trainer, runs_on_cpu(self.run_config.trainer))
        check_logger_stores(self.run_config.trainer)
        if self.subcommand != "predict":
            check_data_prepared(self.run_config.trainer, self.built_datamodule)
        with torch.device("meta"):
            meta_model = instantiate_config(self.run_config.model)
        check_fits_memory(meta_model, self.subcommand == "fit", runs_on_cpu(self.run_config.trainer))
        self._place_run(meta_model)
        name_loggers(
            self.run_config.trainer,
            f"{self.run_name()}/{self.variant_name()}/seed_{self.run_config.seed_everything}",
            None if self.place.directory is None else self.place.directory.name,
        )

    def prepare_config(self) -> None:
        """Build the DataModule (its __init__ reads nothing), copy its sizes into the model's arguments
        and check the trainer settings: the config is then what the run will use."""
        config = self.run_config
        if config.get("model") is None or config.get("data") is None:
            raise ConfigError("A run needs a model and data; pass a recipe with --config, or --model and --data.")
        self.built_datamodule = data = instantiate_config(config.data)
        try:
            sizes = data.model_sizes()
        except ConfigError as error:
            if self.print_config_request is None:
                raise
            # Printing a config never needs the data; sizes the data would set stay unset (null).
            print(f"warning: the sizes {type(data).__name__} sets are shown as null: {error}", file=sys.stderr)
            sizes = {}
        task = class_of(config.model.class_path)
        copy_data_sizes(config.model.init_args.net, task.config_class, sizes, type(data).__name__, task.__name__)

    def _place_run(self, meta_model) -> None:
        """Resolve --ckpt_path, refuse a checkpoint that does not fit the model, and choose (and lock)
        the directory this command writes to."""
        config = self.run_config
        base = Path(config.run.root) / self.run_name() / self.variant_name() / f"seed_{config.seed_everything}"
        check_path_lengths(Path(config.run.root), "--run.root")
        check_path_lengths(base, "--run.name" if config.run.name is not None else "The recipe's file name")
        checkpoint = resolve_checkpoint(config.get("ckpt_path"), base, self.subcommand)
        if self.subcommand == "predict" and checkpoint is None:
            raise ConfigError("predict needs a trained model: pass --ckpt_path best, last or a checkpoint's path.")
        if self.subcommand == "predict" and not self.built_datamodule.hparams.get("predict_files"):
            raise ConfigError(
                f"{type(self.built_datamodule).__name__} has nothing to predict on; pass the files "
                "with --data.predict_files (images, or text files with one input per line)."
            )
        config.ckpt_path = checkpoint
        # Whatever its name: a truncated `model.pt` is refused here too, as is one of another model.
        saved = None if checkpoint is None else read_fitting_checkpoint(checkpoint, meta_model)
        if self.subcommand == "fit" and saved is not None:
            self.check_not_finished(base, checkpoint, saved)
        check_writable(config.run.root)
        self.place = place_run(self.subcommand, base, checkpoint)
        self.resume_step = logging_step(saved) if saved is not None and self.place.resumed else None
        if self.place.directory is not None and self.subcommand == "fit":
            self.lock = RunLock(self.place.directory).acquire()

    def check_not_finished(self, base: Path, checkpoint: str, saved: dict) -> None:
        """Resuming a finished run trains only when the limits are raised, and otherwise only adds the test
        scores its record lacks (`--run.test`, as compare asks); with neither, it says so and changes nothing."""
        run = version_of_checkpoint(base, checkpoint)
        self.previous_record = finished_record(run, saved) if run is not None else None
        if self.previous_record is None:
            return
        trainer = self.run_config.trainer
        if trains_further(saved, trainer.get("max_steps"), trainer.get("max_epochs")):
            return
        if self.run_config.run.test and self.previous_record.get("test") is None:
            return
        if launched_as_rank_zero():
            print(
                f"Run {str(run)!r} is finished ({saved.get('global_step')} steps; its results are in record.json) and "
                "nothing was changed; to train it further, raise --trainer.max_steps or --trainer.max_epochs.",
                flush=True,
            )
        raise SystemExit(0)

    def run_name(self) -> str:
        run = self.run_config.run
        return check_run_name(run.name) if run.name is not None else recipe_name(self.run_config.get("config"))

    def recipe(self) -> str:
        """The recipe's name as the record and TensorBoard keep it: `--run.recipe` (which compare sets, its
        --run.name being the grid point's folder), else the run's name."""
        return self.run_config.run.get("recipe") or self.run_name()

    def variant_name(self) -> str:
        return resolve_spec(self.run_config.model.init_args.attention).name

    def instantiate_classes(self) -> None:
        """LightningCLI's, except that the DataModule built in `before_instantiate_classes` is the one used."""
        config = self.run_config
        data, config.data = config.data, None
        try:
            super().instantiate_classes()
        finally:
            config.data = data
        self.datamodule = self.config_init[self.subcommand].data = self.built_datamodule

    def instantiate_trainer(self, **kwargs):
        config, model = self.run_config, self.model
        user = (self.config_init[self.subcommand] if self.subcommand else self.config_init).get("trainer") or {}
        user_callbacks = list(user.get("callbacks") or [])
        if config.trainer.get("logger") in (None, True):
            kwargs["logger"] = run_logger(
                self.place,
                self.logger_facts(),
                self.logger_details(),
                hparams_metrics(model.monitor, model.monitor_mode),
                self.resume_step,
            )
        checkpointing = self.subcommand == "fit" and config.trainer.get("enable_checkpointing") is not False
        kwargs["callbacks"] = user_callbacks + default_callbacks(
            model,
            user_callbacks,
            fitting=self.subcommand == "fit",
            checkpointing=checkpointing,
            checkpoint_every_n_steps=config.run.checkpoint_every_n_steps,
            attention_maps=config.run.attention_maps,
            progress=config.trainer.get("enable_progress_bar") is not False,
            checkpoint_dir=str(self.place.directory / CHECKPOINTS) if self.place.directory is not None else None,
        )
        if config.trainer.get("logger") not in (None, True, False):  # the user's own: the run's labels too
            kwargs["callbacks"].append(RunLabels({**self.logger_facts(), **self.logger_details()}, RunLogger))
        if self.subcommand == "predict":  # on every rank: under DDP rank 0 gathers the others' rows
            where = self.place.directory
            kwargs["callbacks"].append(PredictionWriter(None if where is None else where / "predictions.jsonl"))
        # config.yaml goes to the run directory too, not to the first logger's directory.
        self.save_config_kwargs = {**self.save_config_kwargs, "run_dir": self.place.directory}
        kwargs["plugins"] = with_atomic_checkpoints(user.get("plugins"))
        # Without a logger, checkpoints still go to the run directory (not the working directory).
        kwargs.setdefault("default_root_dir", str(self.place.directory or self.place.base))
        try:
            return super().instantiate_trainer(**kwargs)
        except (MisconfigurationException, ValueError, TypeError) as error:  # the Trainer checks the values as given
            raise TrainerSettingsError.of(error) from error

    def logger_facts(self) -> dict[str, Any]:
        """The HParams table of TensorBoard: what a comparison reads, five columns, since TensorBoard shows
        only the first five (by name) without a click: variant, seed, recipe, the settings that label the
        run (compare's grid point and arm) and the non-embedding parameter count. The rest is in
        config.yaml, hparams.yaml and record.json."""
        return {
            "variant": self.variant_name(),
            "seed": self.run_config.seed_everything,
            "recipe": self.recipe(),
            "settings": settings_label(self.run_config.run.settings, self.variant_name()),
            "params/non_embedding": self.model.param_counts["non_embedding"],
        }

    def logger_details(self) -> dict[str, Any]:
        """What hparams.yaml keeps besides the facts and the module's hyper-parameters: every parameter
        count and the data's settings."""
        counts = {f"params/{k}": v for k, v in self.model.param_counts.items()}
        return {**counts, **{f"data/{k}": v for k, v in self.built_datamodule.hparams.items()}}

    # ------------------------------------------------------------------ running

    def before_fit(self) -> None:
        if self.place.directory is not None:
            print(f"Run directory: {self.place.directory}", flush=True)

    def after_fit(self) -> None:
        config = self.run_config
        facts = {
            "variant": self.variant_name(),
            "attention": resolve_spec(config.model.init_args.attention).to_dict(),
            "seed": config.seed_everything,
            "recipe": self.recipe(),
            "settings": config.run.settings or {},
            "data_seed": config.data.init_args.get("data_seed"),
            "run_dir": str(self.place.directory),
            "config": resolved(subcommand_parser(self, self.subcommand), config),
        }
        finish_fit(
            self.trainer,
            self.model,
            self.datamodule,
            self.place.directory,
            facts,
            test=config.run.test,
            previous=self.previous_record,
        )
        if self.place.directory is not None:
            print(f"Run directory: {self.place.directory}", flush=True)

    def after_validate(self) -> None:
        self._say_where()

    def after_test(self) -> None:
        self._say_where()

    def after_predict(self) -> None:
        if self.place.directory is not None:
            print(f"Predictions: {self.place.directory / 'predictions.jsonl'}", flush=True)
            note = getattr(self.datamodule, "predict_note", lambda: None)()  # what the inputs lost, if anything
            if note:
                print(note, flush=True)

    def _say_where(self) -> None:
        if self.place.directory is not None:
            print(f"Results: {self.place.directory}", flush=True)


def run(argv: list[str] | None) -> None:
    """One fit / validate / test / predict, as `lit-attention` runs it."""
    quiet_lightning()
    if torch.cuda.is_available():
        torch.set_float32_matmul_precision("high")  # TF32 matmuls for float32 runs on GPU
    LitAttentionCLI(args=argv)
