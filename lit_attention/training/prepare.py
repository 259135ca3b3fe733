"""`lit-attention prepare --config <recipe> [fit's options]`: the run's data prepared once, here.

A multi-device fit leaves preparing to Lightning: local rank 0 runs the DataModule's `prepare_data`
while every other rank waits at a barrier that gives up after 30 minutes, too short to tokenize a
large corpus. This command parses the same recipe and options as `fit` (sizes included), builds the
DataModule, and runs its `prepare_data` and `setup("fit")` in this one process, with no process
group and no model, trainer or run directory; then it says where the prepared data is. A fit
that finds it there starts at once (`check_data_prepared` in cli_input.py refuses one that does not).
"""

from __future__ import annotations

import os

import torch

from lit_attention.errors import ConfigError
from lit_attention.training.cli import LitAttentionCLI, quiet_lightning
from lit_attention.training.config_classes import instantiate_config


class _Preparer(LitAttentionCLI):
    def before_instantiate_classes(self) -> None:
        self.prepare_config()  # the DataModule, as the fit builds it
        if self.print_config_request is not None:
            print(self.parser.dump(self.run_config, skip_none="skip_null" in self.print_config_request), end="")
            raise SystemExit(0)
        # The fit's model, built on the meta device as the fit builds it: a bad variant or model value is
        # refused here, before any data is prepared, as the fit would refuse it (the hardware is the fit's
        # to check: a login node prepares for GPU runs).
        with torch.device("meta"):
            instantiate_config(self.run_config.model)

    def instantiate_classes(self) -> None:
        """Nothing: preparing data needs no model, trainer or run directory."""


def run(argv: list[str]) -> None:
    if not any(word.split("=")[0] in ("--config", "-c", "--model", "--help", "-h") for word in argv):
        raise ConfigError(
            "prepare takes the fit's recipe and options, and none was given; name the recipe, e.g. "
            "`lit-attention prepare --config recipes/quickstart/gpt_stdlib.yaml`."
        )
    quiet_lightning()
    parser = {"prog": "lit-attention prepare", "description": "Prepare a run's data (the fit's --config and options)."}
    data = _Preparer(args=argv, run=False, parser_kwargs=parser).built_datamodule
    data.prepare_data()
    data.setup("fit")  # whatever setup caches besides (hub datasets' tokenized splits)
    where = getattr(data, "prepared_at", lambda: None)()
    name = type(data).__name__
    print(
        f"Prepared data: {os.path.abspath(where)}"
        if where
        else f"Prepared data: {name} is ready; it has no token files of its own, so a multi-device run needs nothing more.",
        flush=True,
    )
