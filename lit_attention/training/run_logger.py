"""The TensorBoard logger of a run: a small, deliberate HParams table, and the run's results as its metrics.

TensorBoard's HParams table sorts the hyper-parameters by name and shows only the first five without a
click, and a comparison drowns in 40 columns; so it gets exactly five, what a comparison reads (variant,
seed, recipe, the run's settings, the non-embedding parameter count: cli.LitAttentionCLI.logger_facts),
all in view. Everything else stays in the run's config.yaml and record.json (and hparams.yaml keeps the
module's full set).
Its metrics are the run's results, as the tables of `compare` use them: the best value of the
monitored validation metric (`best/val/acc`, logged when fit ends) and the best checkpoint's test value
(`test/acc`, logged by `--run.test`), each named with its direction. Lightning's placeholder
`hp_metric` is not used: one tag meaning accuracy in one run and loss in another compares nothing.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
from torch.utils.tensorboard.summary import hparams as hparams_summaries

from lit_attention.training.lightning_internals import flat_hyperparameters, summary_writer

DIRECTIONS = {"max": "higher is better", "min": "lower is better"}


BEST = "best/"


def hparams_metrics(monitor: str, mode: str) -> dict[str, str]:
    """{tag: display name} of the HParams metrics of a run monitoring `monitor` ("val/acc") in `mode`."""
    direction = DIRECTIONS[mode]
    test = test_tag(monitor)
    return {BEST + monitor: f"{monitor}, best of the run ({direction})", test: f"{test} of the best checkpoint ({direction})"}


def settings_label(settings: dict | None, variant: str) -> str:
    """`lr=0.004,arm=standard~efficient`: a run's labels in one HParams cell (the last part of each key, as
    compare's tables write a grid point); the arm only where it is not the variant; `default` for none."""
    shown = {key: value for key, value in (settings or {}).items() if not (key == "arm" and value == variant)}
    return ",".join(f"{key.split('.')[-1]}={value}" for key, value in shown.items()) or "default"


def test_tag(monitor: str) -> str:
    """The test metric that matches a validation metric: `val/acc` -> `test/acc`."""
    return "test/" + monitor.split("/", 1)[-1]


class RunLogger(TensorBoardLogger):
    """TensorBoardLogger whose HParams summary holds `facts` only and the metrics of `hparams_metrics`;
    hparams.yaml holds `facts`, `details` and the module's hyper-parameters. `resumed`: the HParams
    summary was written when the run started, so it is not written again (hparams.yaml is)."""

    def __init__(
        self, *args, facts: dict[str, Any], details: dict[str, Any], metrics: dict[str, str], resumed: bool = False, **kwargs
    ) -> None:
        super().__init__(*args, default_hp_metric=False, **kwargs)
        self.facts, self.details, self.metrics, self.resumed = dict(facts), dict(details), dict(metrics), resumed

    @rank_zero_only
    def log_hyperparams(self, params, metrics=None, step=None) -> None:
        self.hparams.update({**self.facts, **self.details, **dict(params)})  # what save() writes to hparams.yaml
        if self.resumed:
            return
        experiment, session_start, session_end = hparams_summaries(
            flat_hyperparameters(self.facts), {tag: 0.0 for tag in self.metrics}
        )
        self._name_metrics(experiment)
        writer = summary_writer(self.experiment)
        for summary in (experiment, session_start, session_end):
            writer.add_summary(summary)

    def _name_metrics(self, experiment) -> None:
        """Give each metric its display name (`val/acc, best of the run (higher is better)`)."""
        value = experiment.value[0]
        data = HParamsPluginData.FromString(value.metadata.plugin_data.content)
        for info in data.experiment.metric_infos:
            info.display_name = self.metrics[info.name.tag]
        value.metadata.plugin_data.content = data.SerializeToString()
