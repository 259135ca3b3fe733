"""What Lightning prints on every command that a user can do nothing about, silenced (cli.run calls it)."""

from __future__ import annotations

import logging
import warnings


class NotTheUsersBusiness(logging.Filter):
    """Drops Lightning's advertisements for its cloud products ("💡 Tip: ... litlogger / litmodels")."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("💡 Tip")


def quiet_lightning() -> None:
    """Silence what Lightning prints on every command that a user can do nothing about: the cloud tips;
    "Be aware that when using `ckpt_path`, callbacks ... need to be provided" (validate, test and predict
    load a training checkpoint without the training-only callbacks on purpose); and the deprecation
    warning Lightning's own `_pytree` module raises under this torch version."""
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, NotTheUsersBusiness) for f in logger.filters):
            logger.addFilter(NotTheUsersBusiness())
    warnings.filterwarnings("ignore", message="Be aware that when using `ckpt_path`, callbacks used to create")
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
