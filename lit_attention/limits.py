"""The limits of every value a model config or a task takes, in one table: what each must be, and the
rule in words for the one sentence a bad value gets (`dim=0 is invalid; it must be a positive integer.`);
and the range of a seed, which the command line, the CLI and the DataModules check.

Below every layer, beside errors.py, so that the model configs (modeling/config.py), the tasks
(training/tasks/base.py), the DataModules and main.py check against the same limits.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from lit_attention.errors import ConfigError


def positive_int(value) -> bool:
    """A whole number from 1 (True is no count, though Python's bool is an int)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


_POSITIVE = (positive_int, "a positive integer")
_FRACTION = (lambda v: 0 <= v < 1, "in [0, 1)")

# name -> (test, the rule in words). Names are unique across the configs and the tasks, so one table
# serves both; a value of None (a size the data sets later, an unset option) is not checked here.
LIMITS: dict[str, tuple[Callable[[Any], bool], str]] = {
    # The model configs' fields.
    **{
        name: _POSITIVE
        for name in (
            "dim",
            "depth",
            "encoder_depth",
            "decoder_depth",
            "num_heads",
            "patch_size",
            "num_classes",
            "image_size",
            "in_channels",
            "vocab_size",
            "max_len",
            "max_src_len",
            "max_tgt_len",
            "mlp_hidden",
        )
    },
    "mlp_ratio": (lambda v: 0 < v < math.inf, "a finite number > 0"),
    "dropout": _FRACTION,
    "drop_path": _FRACTION,
    "norm_eps": (lambda v: v > 0, "> 0"),
    "init_std": (lambda v: v > 0, "> 0 (GPT-2 uses 0.02)"),
    "rope_base": (lambda v: 1 < v < math.inf, "a finite number > 1 (Llama uses 10000)"),
    # The tasks' own arguments: the optimiser's, then each task's.
    "lr": (lambda v: v > 0, "> 0"),
    "weight_decay": (lambda v: v >= 0, ">= 0"),
    "betas": (lambda v: len(v) == 2 and all(0 <= b < 1 for b in v), "two numbers in [0, 1)"),
    "warmup_steps": (lambda v: isinstance(v, int) and v >= 0, "an integer >= 0"),
    "min_lr_ratio": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    # val/bleu ranks the runs: at least one batch is scored.
    **{name: _POSITIVE for name in ("beam_size", "max_new_tokens", "bleu_batches")},
    "label_smoothing": _FRACTION,
    "temperature": (lambda v: v >= 0, ">= 0 (0 is greedy)"),
    "top_k": (positive_int, "a positive integer or null"),
    "top_p": (lambda v: 0 < v <= 1, "in (0, 1] or null"),
}


# The range of every seed: numpy's seeding (Lightning's seed_everything) takes 0 .. 2**32 - 1; the data's
# seeds (its order, its splits) keep to the run's.
SEED_MAX = 2**32 - 1


def check_run_seed(value) -> None:
    """`--seed_everything`, a whole number (a bool or a string is the parser's to refuse) in the seeds' range."""
    if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= SEED_MAX:
        raise ConfigError(
            f"--seed_everything {value} is invalid; a seed is a whole number from 0 to {SEED_MAX} "
            "(2**32 - 1, the range numpy's seeding takes)."
        )


def check_limit(name: str, value) -> None:
    """One sentence when `value` is outside the limits of `name` (a name the table lacks has none)."""
    if value is None or name not in LIMITS:
        return
    valid, rule = LIMITS[name]
    if not valid(value):
        raise ConfigError(f"{name}={value!r} is invalid; it must be {rule}.")
