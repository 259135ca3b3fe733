"""Every use of Lightning's (and TensorBoard's writer's) private API, in one place.

Exact resume needs two decisions Lightning makes internally and exposes no public way to ask, and the
run logger writes TensorBoard's HParams summary the way Lightning's own logger does. Nothing here
falls back silently: if an upgrade removes one of these names, the call raises AttributeError, and
tests/test_lightning_internals.py fails first, naming it.
"""

from __future__ import annotations

import traceback
from typing import Any

import lightning as L
from lightning.fabric.utilities.logger import _convert_params, _flatten_dict, _sanitize_params
from lightning.pytorch.loops.fit_loop import _FitLoop

# (object path, attribute) pairs this module relies on; the test checks each exists.
REQUIRED = (
    ("lightning.pytorch.loops.training_epoch_loop._TrainingEpochLoop", "_should_check_val_fx"),
    ("lightning.pytorch.loops.fit_loop._FitLoop", "_load_combined_loader_states"),
    ("lightning.pytorch.cli.LightningCLI", "_parser"),
    ("lightning.pytorch.cli.LightningCLI", "_parse_ckpt_path"),
    ("lightning.pytorch.loops.fit_loop._FitLoop", "setup_data"),
)


class RecipeOverCheckpoint:
    """A LightningCLI mixin. LightningCLI would let a checkpoint's hyper-parameters replace the configured
    model (its private `_parse_ckpt_path`); here the recipe stays authoritative and a checkpoint that
    does not fit it is refused (cli.LitAttentionCLI._place_run)."""

    def _parse_ckpt_path(self) -> None:
        pass


def subcommand_parser(cli, subcommand: str | None):
    """The jsonargparse parser of one LightningCLI subcommand (the whole parser without subcommands)."""
    return cli._parser(subcommand)


def computed_metrics(trainer: L.Trainer) -> tuple[dict, dict]:
    """(progress-bar metrics, callback metrics) as Lightning last computed them, on every rank alike, at a
    batch's or an epoch's end, without computing any. The public `trainer.progress_bar_metrics` and
    `trainer.callback_metrics` compute an epoch metric not computed yet, and computing a `sync_dist` one is
    a collective: read on rank 0 alone (which alone draws a bar), it waits forever for the other ranks."""
    connector = trainer._logger_connector
    return connector._progress_bar_metrics, connector._callback_metrics


def validation_follows(trainer: L.Trainer) -> bool:
    """Whether Lightning validates right after the current training batch (its own decision)."""
    fetcher = trainer.fit_loop._data_fetcher
    return bool(trainer.fit_loop.epoch_loop._should_check_val_fx(fetcher)) if fetcher is not None else False


def load_pending_loader_states(trainer: L.Trainer) -> None:
    """Load the training DataLoader's saved position if Lightning has one waiting: it loads it only while
    it builds the loader during fit, which `estimated_stepping_batches` may already have done before
    the checkpoint was restored."""
    fit_loop = trainer.fit_loop
    if fit_loop._combined_loader_states_to_load:
        fit_loop._load_combined_loader_states()


def flat_hyperparameters(params: Any) -> dict[str, Any]:
    """Hyper-parameters as Lightning's TensorBoard logger writes them: a flat dict of loggable values."""
    return _sanitize_params(_flatten_dict(_convert_params(params)))


def summary_writer(experiment):
    """The file writer under a torch SummaryWriter (where HParams summaries are added)."""
    return experiment._get_file_writer()


def raised_checking_the_epoch(error: BaseException) -> bool:
    """Whether `error` was raised by the fit loop's `setup_data`, where Lightning checks the settings
    against the training data's length (`val_check_interval` longer than the epoch) before any batch."""
    frames = traceback.extract_tb(error.__traceback__)
    fit_loop = _FitLoop.setup_data.__code__
    return bool(frames) and frames[-1].name == fit_loop.co_name and frames[-1].filename == fit_loop.co_filename
