"""`compare --scale`: the model sizes a sweep runs every arm at, and with `--tokens-per-parameter` each
size's training budget.

Syntax: `--scale KEY=V1,V2,...` gives one size axis; repeating --scale with lists of the same length
changes several keys together (`--scale model.init_args.net.dim=64,128 --scale
model.init_args.net.num_heads=2,4` is two sizes: dim=64 with 2 heads, dim=128 with 4). Each size is
its own sweep of the arms x the --grid x the seeds, tuned on its own; its label (`dim=64,num_heads=2`)
names its folder, `<output>/runs/<label>/...`.

Budget: with `--tokens-per-parameter R`, a size trains for max_steps = round(R x N / T) optimizer steps,
N the baseline arm's non-embedding parameters at that size (counted on the meta device; every arm of a
size trains the same steps on the same batches, so the arms stay paired), T what one optimizer step
consumes: batch size x sequence length (data max_len) tokens for a language model, batch size samples
for every other task (a "token" of a classifier is one sample), times gradient accumulation and the
devices. Warm-up keeps the recipe's fraction: warmup_steps = round(recipe warmup_steps / recipe
max_steps x max_steps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from lit_attention.errors import ConfigError
from lit_attention.sweep.runs import Run, axis_item, grid_points, parse_variants, point_label, same_key

MAX_STEPS = "trainer.max_steps"
WARMUP = "model.init_args.warmup_steps"
LANGUAGE_MODELS = ("CausalLanguageModel",)
PER_STEP = (
    "data.init_args.batch_size",
    "data.init_args.max_len",
    "trainer.accumulate_grad_batches",
    "trainer.devices",
    "trainer.num_nodes",
)  # what decides the tokens per step


@dataclass(frozen=True)
class Size:
    label: str  # "dim=64,num_heads=2"
    settings: tuple[tuple[str, str], ...]  # ((key, value), ...) in --scale order
    budget: tuple[tuple[str, str], ...] = ()  # with --tokens-per-parameter: what went into the settings

    @property
    def arguments(self) -> list[str]:
        """The fit arguments of this size: its settings, then its budget's steps."""
        steps = dict(self.budget)
        words = [f"--{key}={value}" for key, value in self.settings]
        words += [f"--{MAX_STEPS}={steps['max_steps']}"] if "max_steps" in steps else []
        return words + ([f"--{WARMUP}={steps['warmup_steps']}"] if "warmup_steps" in steps else [])


def parse_scale(items: list[str]) -> list[Size]:
    """The sizes of `--scale KEY=V1,V2,...` items (repeated: zipped, lists of one length); [] without."""
    axes: list[tuple[str, list[str]]] = []
    for item in items:
        key, choices = axis_item(
            item,
            "--scale",
            "model.init_args.net.dim=64,128,256 (repeat --scale with as many values to change several keys together)",
        )
        for earlier, earlier_values in axes:
            if same_key(key, earlier):
                raise ConfigError(f"--scale {key} is given twice; give each size key once.")
            if len(choices) != len(earlier_values):
                raise ConfigError(
                    f"--scale {key} has {len(choices)} values but --scale {earlier} has "
                    f"{len(earlier_values)}; keys changed together need one value per size each."
                )
        axes.append((key, choices))
    if not axes:
        return []
    keys = [key for key, _ in axes]
    sizes = [
        Size(point_label(settings), settings)
        for settings in (tuple(zip(keys, values)) for values in zip(*(values for _, values in axes)))
    ]
    seen: dict[tuple, str] = {}
    for size in sizes:
        other = seen.setdefault(tuple(meaning(value) for _, value in size.settings), size.label)
        if other is not size.label:
            twice = f"the size {other} twice" if other == size.label else f"{other} and {size.label}, which are one size"
            raise ConfigError(f"--scale gives {twice}; give each size once.")
    return sizes


def meaning(value: str) -> object:
    """What a value means: `1e-3` and `0.001` are one number."""
    try:
        return float(value)
    except ValueError:
        return value


def check_scale(sizes: list[Size], grid, extra: list[str], arms: list[str], tokens_per_parameter: float | None) -> None:
    """Combinations that cannot work, each one sentence, before anything is planned."""
    keys = [key for size in sizes[:1] for key, _ in size.settings]
    for key in keys:
        for grid_key, _ in grid:
            if same_key(key, grid_key):
                raise ConfigError(
                    f"--scale {key} is also a --grid key; a size is not tuned over, so give {key} to one of them only."
                )
        for word in [*extra, *(w for arm in arms for w in arm.split(";")[2:])]:
            if same_key(word.lstrip("-").split("=")[0], key):
                raise ConfigError(f"{word!r} sets {key}, which --scale varies; drop it, or drop that key from --scale.")
    if tokens_per_parameter is None:
        return
    if not sizes:
        raise ConfigError(f"--tokens-per-parameter {tokens_per_parameter:g} needs --scale: it sets each size's training length.")
    if not (math.isfinite(tokens_per_parameter) and tokens_per_parameter > 0):
        raise ConfigError(f"--tokens-per-parameter {tokens_per_parameter:g} is invalid; give a positive number, such as 20.")
    arm_words = [part.strip() for arm in arms for part in arm.split(";")[2:]]
    for key in (MAX_STEPS, "trainer.max_epochs", WARMUP):
        for word in [*extra, *arm_words]:
            if same_key(word.lstrip("-").split("=")[0], key):
                raise ConfigError(
                    f"--tokens-per-parameter sets each size's {key.split('.')[-1]} itself, so "
                    f"{word!r} cannot be given too; drop one of them."
                )
        for grid_key, _ in grid:
            if same_key(grid_key, key):
                raise ConfigError(
                    f"--tokens-per-parameter sets each size's {key.split('.')[-1]} itself, so --grid "
                    f"{grid_key} cannot vary it; drop one of them."
                )
    for grid_key, _ in grid:  # one budget per size: every grid point must consume the same tokens per step
        if any(same_key(grid_key, key) for key in PER_STEP):
            raise ConfigError(
                f"--tokens-per-parameter gives every grid point of a size the same steps, so --grid "
                f"{grid_key} cannot change the tokens per step; give it one value, or drop "
                "--tokens-per-parameter."
            )


def budget(planned, tokens_per_parameter: float) -> tuple[tuple[str, str], ...]:
    """A size's budget from its baseline run planned at the recipe's own length (planning.PlannedRun):
    (("tokens_per_parameter", R), ("tokens_per_step", T), ("max_steps", S), ("warmup_steps", W))."""
    config = planned.config
    recipe_steps = config.trainer.max_steps
    if recipe_steps is None or recipe_steps < 1:
        raise ConfigError(
            f"--tokens-per-parameter keeps the recipe's warm-up fraction, but the recipe sets no "
            f"trainer.max_steps (it has {recipe_steps}); use a recipe that trains for max_steps."
        )
    data = config.data.init_args
    per_step = int(data.batch_size)
    if config.model.class_path.split(".")[-1] in LANGUAGE_MODELS:
        per_step *= int(data.max_len)
    per_step *= int(config.trainer.accumulate_grad_batches or 1)
    devices = config.trainer.devices
    if isinstance(devices, int) and devices > 0:
        per_step *= devices * int(config.trainer.num_nodes or 1)
    params = planned.model.param_counts["non_embedding"]
    steps = max(1, round(tokens_per_parameter * params / per_step))
    pairs = [("tokens_per_parameter", f"{tokens_per_parameter:g}"), ("tokens_per_step", str(per_step)), ("max_steps", str(steps))]
    warmup = getattr(config.model.init_args, "warmup_steps", None)
    if warmup is not None:
        pairs.append(("warmup_steps", str(round(warmup / recipe_steps * steps))))
    return tuple(pairs)


def plan_sizes(args, variants: list[str], grid, extra: list[str], sizes) -> list[tuple]:
    """[(size, its Plan, its extra arguments)] for a --scale sweep, every size planned before any trains;
    with --tokens-per-parameter each size's budget is set from its baseline arm's non-embedding
    parameters at the first grid point (`budget`)."""
    from lit_attention.sweep.planning import build_plan, check_run  # here: it loads Lightning, which parsing --scale needs not

    planned = []
    for size in sizes:
        if args.tokens_per_parameter is not None:
            variant = budget_variant(args.baseline, variants)
            first = Run(variant, variant, grid_points(grid)[0], args.first_seed, size=size.label)
            size = replace(
                size, budget=budget(check_run(args.config, first, [*extra, *size.arguments]), args.tokens_per_parameter)
            )
        size_extra = [*extra, *size.arguments]
        planned.append((size, build_plan(args, variants, grid, size_extra, size), size_extra))
    return planned


def budget_variant(baseline: str, variants: list[str]) -> str:
    """The variant whose parameters set a size's budget: the baseline's, or the first variant when the
    baseline is an arm of its own (a control, an --arm)."""
    if baseline in variants:
        return baseline
    try:
        name = parse_variants([baseline], "--baseline")[0]
    except ConfigError:
        return variants[0]
    return name if name in variants else variants[0]
