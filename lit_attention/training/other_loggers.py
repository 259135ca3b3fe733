"""A user's own loggers (`--trainer.logger CSVLogger`, `MLFlowLogger`, `WandbLogger`, ...) keep the run's
identity, as the run's TensorBoard logger does (run_logger.py):

* a logger the user did not name is named after the run: its recipe (with compare's grid point and arm),
  variant and seed, so that the runs of a sweep never become `version_0`, `version_1`, ... of one
  `lightning_logs` (`name_loggers`, before the classes are built). A directory logger keeps its own
  versions under that name: a resumed run gets the next one rather than writing over the first's files
  (CSVLogger rewrites a version's metrics.csv);
* every logger gets the run's labels (variant, seed, recipe, settings, parameter counts, data settings)
  through `log_hyperparams` (`RunLabels`), beside the module's hyper-parameters Lightning gives it;
* attention maps go to every logger that takes images, and one line says which ones take none
  (`image_loggers`, `log_figure`); with none that does, they are not drawn at all.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import lightning as L

from lit_attention.errors import ConfigError

# Logger class -> (the init argument that names its run, the value that means "not named by the user").
NAME_ARGUMENTS = {
    "CSVLogger": ("name", "lightning_logs"),
    "TensorBoardLogger": ("name", "lightning_logs"),
    "MLFlowLogger": ("run_name", None),
    "WandbLogger": ("name", None),
    "NeptuneLogger": ("name", None),
    "CometLogger": ("name", None),
}
VERSIONED = ("CSVLogger", "TensorBoardLogger")  # loggers whose directory is <save_dir>/<name>/version_<k>


def logger_specs(trainer_config) -> list:
    """The logger entries of a trainer config that are classes to build (`class_path` and `init_args`)."""
    given = trainer_config.get("logger")
    entries = given if isinstance(given, list) else [given]
    return [entry for entry in entries if hasattr(entry, "get") and entry.get("class_path")]


def name_loggers(trainer_config, label: str, version: str | None) -> None:
    """Name every logger the user left unnamed after the run: `label` (`quickstart/vit_digits/super/seed_0`,
    compare's grid point and arm included); a logger without versions of its own also by the run's `version`."""
    for spec in logger_specs(trainer_config):
        kind = spec.class_path.rsplit(".", 1)[-1]
        if kind not in NAME_ARGUMENTS or spec.get("init_args") is None:
            continue
        argument, unnamed = NAME_ARGUMENTS[kind]
        if spec.init_args.get(argument) == unnamed:
            spec.init_args[argument] = label if kind in VERSIONED or version is None else f"{label}/{version}"


def check_logger_stores(trainer_config) -> None:
    """An MLflowLogger on MLflow's file store (its default, `save_dir ./mlruns`, or a `file:` tracking_uri) is
    refused by MLflow 3.x unless MLFLOW_ALLOW_FILE_STORE=true: say so in one sentence before anything runs,
    not as an error of the logger's construction."""
    for spec in logger_specs(trainer_config):
        if spec.class_path.rsplit(".", 1)[-1] != "MLFlowLogger" or spec.get("init_args") is None:
            continue
        uri = spec.init_args.get("tracking_uri") or os.environ.get("MLFLOW_TRACKING_URI")
        store = uri or f"file:{spec.init_args.get('save_dir') or './mlruns'}"
        if "://" in store and not store.startswith("file:"):
            continue  # a database or a server
        try:
            from mlflow.environment_variables import MLFLOW_ALLOW_FILE_STORE
        except ImportError:
            return  # no mlflow (the logger says so itself), or one without the gate
        if not MLFLOW_ALLOW_FILE_STORE.get():
            raise ConfigError(
                f"--trainer.logger MLFlowLogger would keep its runs in MLflow's file store ({store}), which "
                "this MLflow refuses unless MLFLOW_ALLOW_FILE_STORE=true is set; set it, or give "
                "--trainer.logger.tracking_uri a database (sqlite:///mlflow.db, with the full mlflow package) or "
                "a tracking server."
            )


class RunLabels(L.Callback):
    """Give every logger but the run's own TensorBoard logger (which has them) the run's labels, once the
    trainer is set up; Lightning then adds the module's hyper-parameters."""

    def __init__(self, labels: dict[str, Any], own_logger: type) -> None:
        self.labels, self.own_logger = dict(labels), own_logger

    def setup(self, trainer, pl_module, stage: str) -> None:
        for logger in trainer.loggers:
            if not isinstance(logger, self.own_logger):
                logger.log_hyperparams(self.labels)


# The loggers told, once a process, that they take no images.
NOTED: set[str] = set()


def image_writer(logger):
    """How `logger` takes a matplotlib figure: a function of (tag, figure, step), or None when it takes no images
    (TensorBoard's add_figure, W&B's log_image, MLflow's log_figure take them)."""
    experiment = logger.experiment
    if hasattr(experiment, "add_figure"):
        return experiment.add_figure
    if hasattr(logger, "log_image"):
        return lambda tag, figure, step: logger.log_image(key=tag, images=[figure], step=step)
    if hasattr(experiment, "log_figure") and getattr(logger, "run_id", None) is not None:
        return lambda tag, figure, step: experiment.log_figure(logger.run_id, figure, f"{tag}/step_{step}.png")
    return None


def image_loggers(loggers) -> list:
    """Those of `loggers` that take images; for each kind that does not, one line, once a process."""
    for logger in loggers:
        kind = type(logger).__name__
        if image_writer(logger) is None and kind not in NOTED:
            NOTED.add(kind)
            print(
                f"note: attention maps are not logged to {kind}, which takes no images (TensorBoard, W&B and "
                "MLflow loggers do); keep a TensorBoardLogger beside it to have them.",
                file=sys.stderr,
                flush=True,
            )
    return [logger for logger in loggers if image_writer(logger) is not None]


def log_figure(loggers, tag: str, figure, step: int) -> None:
    """A matplotlib `figure` to each of `loggers` (each one that takes images: image_loggers), then closed."""
    from matplotlib import pyplot  # the figure's maker has chosen the backend

    for logger in loggers:
        image_writer(logger)(tag, figure, step)
    pyplot.close(figure)
