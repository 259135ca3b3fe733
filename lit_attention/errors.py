"""The error a user can fix: bad configuration, said in one sentence naming the value and the choices."""


class ConfigError(ValueError):
    """Raised before any expensive work when a recipe, argument or input is invalid.

    A ValueError, so plain `except ValueError` keeps working; the CLI prints it without a traceback.
    """
