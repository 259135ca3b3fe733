"""A run resolved exactly as `fit` resolves it, without reading data, writing or training anything:
what `compare` checks every arm of a sweep with before it starts one (lit_attention/sweep/compare.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from lit_attention.training.cli import LitAttentionCLI, instantiate_config, resolved
from lit_attention.training.cli_input import check_trainer_settings


@dataclass
class PlannedRun:
    """A run resolved exactly as `fit` resolves it, before anything is read, written or trained."""

    config: Any  # the run's config, with the data's sizes in the model's arguments
    model: Any  # the LightningModule, on the meta device
    datamodule: Any
    resolved: dict  # the flat config the run's record.json will hold (records.run_config)


class _Planner(LitAttentionCLI):
    def __init__(self, *args, check_trainer: bool = True, **kwargs) -> None:
        self.check_trainer = check_trainer
        super().__init__(*args, **kwargs)

    def before_instantiate_classes(self) -> None:
        self.prepare_config()
        if self.check_trainer:
            check_trainer_settings(self.run_config.trainer)
        with torch.device("meta"):
            self.meta_model = instantiate_config(self.run_config.model)

    def instantiate_classes(self) -> None:
        """Nothing: a plan builds no trainer and no real weights."""


def plan_run(args: list[str], check_trainer: bool = True) -> PlannedRun:
    """Parse the arguments of a `fit` (without the word fit) as `fit` would, take the data's sizes and
    build the model on the meta device: what `compare` checks every run with before training any.
    `check_trainer`: also refuse trainer settings this machine cannot run (a GPU preset without GPU)."""
    planner = _Planner(args=args, run=False, check_trainer=check_trainer)
    return PlannedRun(planner.run_config, planner.meta_model, planner.built_datamodule,
                      resolved(planner.parser, planner.run_config))
