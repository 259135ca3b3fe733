"""Exceptions of the libraries a run drives that mean the user's input is wrong, as one sentence in the
library's own words (main.explain calls this for every error that is not already a ConfigError).

Lightning says by its exception's type when a setting is misused (`MisconfigurationException`); the
Trainer's constructor, which takes the `--trainer.*` values as they are, reports a bad one as a
ValueError or TypeError too, so the CLI marks what that constructor raises (`TrainerSettingsError`).
Running out of memory is a size the user chose. Anything else is not the user's doing.
"""

from __future__ import annotations

import torch
from lightning.fabric.utilities.exceptions import MisconfigurationException

from lit_attention.errors import ConfigError
from lit_attention.training.lightning_internals import raised_checking_the_epoch

HELP = "`lit-attention fit --help` lists the trainer options"


class TrainerSettingsError(ConfigError):
    """Lightning's Trainer refused the `--trainer.*` settings it was built with."""

    @classmethod
    def of(cls, error: BaseException) -> TrainerSettingsError:
        return cls(f"Lightning's Trainer refused the trainer settings: {words(error)}; change that --trainer option ({HELP}).")


def library_error_sentence(error: BaseException) -> str | None:
    """One sentence for a library exception caused by the input, or None for one that is not."""
    if isinstance(error, MisconfigurationException):
        return f"Lightning refused a setting: {words(error)}; change the option it names ({HELP})."
    if isinstance(error, ValueError) and raised_checking_the_epoch(error):  # known only once the data is read
        return f"Lightning refused a setting for this data: {first_sentence(error)}; change the option it names ({HELP})."
    if isinstance(error, (torch.OutOfMemoryError, MemoryError)):
        return (
            f"The run ran out of memory ({type(error).__name__}: {words(error) or 'no details'}); lower "
            "--data.batch_size, the model's size (--model.net.dim, --model.net.depth) or the sequence length."
        )
    return None


def first_sentence(error: BaseException) -> str:
    return words(error).split(". ")[0]


def words(error: BaseException) -> str:
    """The library's message on one line, without its final full stop (it goes inside a sentence)."""
    return " ".join(str(error).split()).rstrip(".")
