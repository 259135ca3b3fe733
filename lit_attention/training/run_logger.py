"""The TensorBoard logger of a run: hyper-parameters with the run's facts first, and the monitored
metric named with its direction in the HParams tab.

TensorBoard's HParams table shows only the first few hyper-parameters and metrics unless the user
ticks more, so the facts a comparison needs (variant, seed, recipe, parameter counts) come first.
Lightning's placeholder `hp_metric` is not used: one tag meaning accuracy in one run and loss in
another cannot be compared; the table shows the real validation metric, as `val/acc (higher is
better)` or `val/loss (lower is better)`.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
from torch.utils.tensorboard.summary import hparams as hparams_summaries

from lit_attention.training.lightning_internals import flat_hyperparameters, summary_writer

DIRECTIONS = {"max": "higher is better", "min": "lower is better"}


class RunLogger(TensorBoardLogger):
    """TensorBoardLogger that puts `facts` before the module's hyper-parameters and registers the
    `metrics` ({tag: "max" | "min"}) in the HParams tab. `resumed`: the HParams summary was written
    when the run started, so it is not written again (hparams.yaml is)."""

    def __init__(self, *args, facts: dict[str, Any], metrics: dict[str, str], resumed: bool = False, **kwargs) -> None:
        super().__init__(*args, default_hp_metric=False, **kwargs)
        self.facts, self.metrics, self.resumed = dict(facts), dict(metrics), resumed

    @rank_zero_only
    def log_hyperparams(self, params, metrics=None, step=None) -> None:
        params = {**self.facts, **dict(params)}
        self.hparams.update(params)  # what save() writes to hparams.yaml
        if self.resumed:
            return
        flat = flat_hyperparameters(params)
        experiment, session_start, session_end = hparams_summaries(flat, {tag: 0.0 for tag in self.metrics})
        self._name_directions(experiment)
        writer = summary_writer(self.experiment)
        for summary in (experiment, session_start, session_end):
            writer.add_summary(summary)

    def _name_directions(self, experiment) -> None:
        """Give each metric the display name `<tag> (higher is better)` inside the experiment summary."""
        value = experiment.value[0]
        data = HParamsPluginData.FromString(value.metadata.plugin_data.content)
        for info in data.experiment.metric_infos:
            info.display_name = f"{info.name.tag} ({DIRECTIONS[self.metrics[info.name.tag]]})"
        value.metadata.plugin_data.content = data.SerializeToString()
