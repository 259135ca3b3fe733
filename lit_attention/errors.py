"""The error a user can fix: bad configuration or data, said in one sentence naming the value and the choices."""


class ConfigError(ValueError):
    """Raised before any expensive work when a recipe, argument, data source or input is invalid.

    A ValueError, so plain `except ValueError` keeps working; the CLI prints it without a traceback
    and exits with status 2.
    """


def brief(error: BaseException) -> str:
    """An exception as a short clause (its type and first sentence), to quote inside a ConfigError."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    text = text.split(". ")[0].rstrip(".:")
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
