"""The one error type of the data package, and the cheap argument checks that raise it.

Every problem a user can fix (a bad argument, a missing file, a dataset that is neither cached nor
downloadable) is a ``DataError`` whose message is one sentence: what is wrong and what would work.
"""

from __future__ import annotations

from collections.abc import Iterable


class DataError(ValueError):
    """Bad data input or an unavailable dataset; the message says what is valid or how to provide it."""


def brief(error: BaseException) -> str:
    """An exception as a short clause (its type and first sentence) to quote inside a DataError."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    text = text.split(". ")[0].rstrip(".:")
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def check_choice(name: str, value: object, choices: Iterable[object]) -> None:
    choices = list(choices)
    if value not in choices:
        raise DataError(f"{name}={value!r} is not supported; choose one of {', '.join(map(repr, choices))}.")


def check_positive(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise DataError(f"{name}={value!r} is invalid; it must be an integer >= {minimum}.")


def check_fraction(name: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise DataError(f"{name}={value!r} is invalid; it must be a fraction strictly between 0 and 1.")
