"""A sweep's plan: every run resolved exactly as `fit` resolves it, without reading data, writing or
training anything, which is what `compare` checks every arm with before it starts one; the arms of
the sweep (variants, parameter-matched controls, --arm), and the MLP widths that match parameters."""

from __future__ import annotations

import logging
from argparse import ArgumentError
from dataclasses import dataclass
from collections.abc import Iterable
from typing import Any

import torch

from lit_attention.errors import ConfigError
from lit_attention.sweep.runs import Plan, Run, check_folder_names, grid_points, parse_arms, parse_variants
from lit_attention.training.cli import LitAttentionCLI
from lit_attention.training.config_classes import instantiate_config, registered_classes, resolved
from lit_attention.training.global_batch import apply_global_batch
from lit_attention.training.cli_input import check_strategy, check_trainer_settings, processes_in_run
from lit_attention.training.parser_errors import parser_error_sentence

SEED_LOGGER = "lightning.fabric.utilities.seed"


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
        # As fit derives them: the run's record holds the derived batch and accumulation, and compare finds
        # a finished run by its config.
        apply_global_batch(self.run_config, processes_in_run(self.run_config.trainer))
        self.prepare_config()
        # The strategy whatever the hardware: a strategy the fit would refuse is refused before any job is queued.
        trainer = self.run_config.trainer
        check_strategy(
            trainer.get("strategy"), test=self.run_config.run.test, checkpointing=trainer.get("enable_checkpointing") is not False
        )
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
    seeding = logging.getLogger(SEED_LOGGER)  # "Seed set to N", once per arm x point: planning trains nothing
    level = seeding.level
    seeding.setLevel(logging.WARNING)
    try:
        planner = _Planner(args=args, run=False, check_trainer=check_trainer)
    finally:
        seeding.setLevel(level)
    return PlannedRun(
        planner.run_config, planner.meta_model, planner.built_datamodule, resolved(planner.parser, planner.run_config)
    )


def build_plan(args, variants: list[str], grid, extra: list[str], size=None) -> Plan:
    """Every run of the sweep, each arm x grid point checked (its first seed's `Run.arguments` parsed,
    sized and built on the meta device exactly as its fit will be) before anything trains. `size`
    (sizes.Size): the runs of that size of a --scale sweep, whose settings `extra` holds."""
    points = grid_points(grid)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    arms: list[tuple[str, str, tuple[str, ...], tuple]] = []  # (label, variant, overrides, point)
    # Each distinct `fit` command is parsed once (a LightningCLI parse each): parameter matching parses
    # commands that the plan's own checks below parse again.
    checked: dict[tuple[str, ...], PlannedRun] = {}
    for point in points:
        matched = {}
        if args.match_parameters or args.add_control:
            matched = matched_mlp_ratios(args, variants, point, extra, checked)
        for variant in variants:
            overrides = ()
            if args.match_parameters and variant != parse_variants([args.match_parameters], "--match-parameters")[0]:
                overrides = (f"--model.init_args.net.mlp_ratio={matched[(variant, args.match_parameters)]}",)
            label = variant if not overrides else f"{variant}~{args.match_parameters}"
            arms.append((label, variant, overrides, point))
        for reference in args.add_control:
            ratio = matched[("standard", reference)]
            arms.append((f"standard~{reference}", "standard", (f"--model.init_args.net.mlp_ratio={ratio}",), point))
        arms += [(label, variant, overrides, point) for label, variant, overrides in parse_arms(args.arm, grid)]
    labels = [label for label, _, _, point in arms if point == points[0]]
    if len(set(labels)) != len(labels):
        twice = sorted({label for label in labels if labels.count(label) > 1})
        raise ConfigError(f"Two arms are called {twice[0]!r}; give each --arm a label of its own.")
    check_folder_names(list(dict.fromkeys(labels)), points)
    where = {"size": size.label, "budget": size.budget} if size is not None else {}
    runs = [Run(label, variant, point, seed, overrides, **where) for label, variant, overrides, point in arms for seed in seeds]
    configs = {(run.arm, run.point): check_run(args.config, run, extra, checked).resolved for run in runs if run.seed == seeds[0]}
    if not getattr(args, "report", False):
        check_prepared(args.config, checked.values())
    labels = list(dict.fromkeys(label for label, *_ in arms))
    return Plan(runs=runs, arms=labels, points=points, seeds=seeds, configs=configs)


def check_prepared(configs: list[str], planned: Iterable[PlannedRun]) -> None:
    """Refuse a sweep whose runs are several processes each (--devices-per-run, a SLURM job of several
    GPUs) on token files not prepared yet, before any run is started or submitted: each run's fit would
    refuse them (cli_input.check_data_prepared), on SLURM only once its job has waited in the queue."""
    for run in planned:
        processes = processes_in_run(run.config.trainer)
        missing = getattr(run.datamodule, "unprepared", lambda: None)() if processes > 1 else None
        if missing:
            recipes = " ".join(f"--config {config}" for config in configs)
            raise ConfigError(
                f"{missing} are not prepared yet, and each run of this sweep is {processes} processes, "
                f"which would refuse them when it starts; prepare them once here with `lit-attention "
                f"prepare {recipes}` and the sweep's --data options, then start the sweep again."
            )


def check_run(configs, run: Run, extra, checked: dict | None = None):
    """The run's config as its fit will resolve it (from the same `Run.arguments`); a bad key or value
    is one sentence naming the run. `checked`: the runs planned so far, by their arguments (read, and
    added to)."""
    where = f"{run.arm} at {run.point_label}" + (f", size {run.size}" if run.size else "")
    arguments = run.arguments(configs, extra)
    if checked is not None and tuple(arguments) in checked:
        return checked[tuple(arguments)]
    try:
        # The hardware is the fit's to check: a login node plans a SLURM sweep of GPU runs.
        planned = plan_run(arguments, check_trainer=False)
    except ArgumentError as error:
        raise ConfigError(
            f"{parser_error_sentence(str(error), registered_classes()).rstrip('.')} (in the run of {where})."
        ) from None
    except ConfigError as error:
        raise ConfigError(f"{str(error).rstrip('.')} (in the run of {where}).") from None
    if checked is not None:
        checked[tuple(arguments)] = planned
    return planned


def matched_mlp_ratios(args, variants: list[str], point, extra, checked: dict | None = None) -> dict[tuple[str, str], float]:
    """{(variant, reference): mlp_ratio} giving `variant` the non-embedding parameter count of `reference`
    within 1%. The count is linear in the MLP's hidden width, so two meta-device builds find the slope.
    `checked`: as check_run takes it."""
    references = ([args.match_parameters] if args.match_parameters else []) + list(args.add_control)
    wanted = {(v, r) for r in references for v in (variants if r == args.match_parameters else ["standard"])}
    counts = {}
    ratios = {}
    for variant, reference in sorted(wanted):
        if reference not in counts:
            counts[reference] = non_embedding(args.config, reference, point, (), extra, checked)[0]
        target = counts[reference]
        count, dim, ratio = non_embedding(args.config, variant, point, (), extra, checked)
        hidden = int(dim * ratio)
        wider, _, _ = non_embedding(
            args.config, variant, point, (f"--model.init_args.net.mlp_ratio={(hidden + dim + 0.5) / dim}",), extra, checked
        )
        per_unit = (wider - count) / dim
        if per_unit == 0:  # mlp_hidden fixes the width whatever mlp_ratio says
            raise ConfigError(
                f"{variant} cannot be matched to {reference}'s parameters: its config sets mlp_hidden, "
                "so mlp_ratio leaves the MLP width as it is; unset mlp_hidden to match parameters."
            )
        new_hidden = hidden + round((target - count) / per_unit)
        if new_hidden < 1:
            raise ConfigError(
                f"{variant} cannot be matched to {reference}'s {target:,} non-embedding parameters "
                "by its MLP width alone; pick another reference variant."
            )
        ratios[(variant, reference)] = (new_hidden + 0.5) / dim  # int(dim * ratio) == new_hidden exactly
        achieved = non_embedding(
            args.config, variant, point, (f"--model.init_args.net.mlp_ratio={ratios[(variant, reference)]}",), extra, checked
        )[0]
        if abs(achieved - target) > 0.01 * target:
            raise ConfigError(
                f"The MLP width of {variant} gets to {achieved:,} non-embedding parameters, not within "
                f"1% of {reference}'s {target:,}; match to another variant."
            )
    return ratios


def non_embedding(configs, variant: str, point, overrides, extra, checked: dict | None = None) -> tuple[int, int, float]:
    plan = check_run(configs, Run(variant, variant, point, 0, overrides), extra, checked)  # any seed: counts do not depend on it
    model = plan.config.model.init_args
    return plan.model.param_counts["non_embedding"], model.net.dim, model.net.mlp_ratio
