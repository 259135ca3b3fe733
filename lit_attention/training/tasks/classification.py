"""Shared steps and metrics for image and text classification."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torchmetrics import Metric, MetricCollection
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score

from lit_attention.errors import ConfigError
from lit_attention.training.tasks.base import TaskModule


def classification_metrics(num_classes: int) -> MetricCollection:
    metrics = {
        "acc": MulticlassAccuracy(num_classes, average="micro"),
        "f1_macro": MulticlassF1Score(num_classes, average="macro"),
    }
    if num_classes >= 10:
        metrics["acc_top5"] = MulticlassAccuracy(num_classes, top_k=5, average="micro")
    # No compute groups: torchmetrics would otherwise merge metrics whose states happen to be equal
    # after the first batch (a perfectly classified one makes top-5 accuracy and macro-F1 look alike),
    # and from then on report one metric's value under the other's name.
    return MetricCollection(metrics, compute_groups=False)


class TrainingClassificationMetrics(Metric):
    """The values classification_metrics gives (acc, f1_macro, acc_top5 from 10 classes), from counts kept
    on the device: torchmetrics checks every batch's labels and counts classes with torch.bincount, and
    both wait for the device, at every training step. Macro-F1 averages the classes that occur among the
    labels or the predictions, as torchmetrics does."""

    full_state_update, higher_is_better = False, True

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.num_classes = num_classes
        for name in ("hits", "predicted", "actual"):  # per class
            self.add_state(name, torch.zeros(num_classes, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("top5", torch.tensor(0), dist_reduce_fx="sum")
        self.add_state("total", torch.tensor(0), dist_reduce_fx="sum")

    def update(self, logits: torch.Tensor, labels: torch.Tensor) -> None:
        predictions, ones = logits.argmax(dim=-1), torch.ones_like(labels)
        self.hits.scatter_add_(0, labels, (predictions == labels).long())
        self.predicted.scatter_add_(0, predictions, ones)
        self.actual.scatter_add_(0, labels, ones)
        self.total += labels.numel()
        if self.num_classes >= 10:
            self.top5 += (logits.topk(5, dim=-1).indices == labels[:, None]).any(dim=-1).sum()

    def compute(self) -> dict[str, torch.Tensor]:
        tp, fp, fn = self.hits, self.predicted - self.hits, self.actual - self.hits
        present = (tp + fp + fn) > 0
        f1 = 2 * tp / (2 * tp + fp + fn).clamp(min=1)
        total = self.total.clamp(min=1)
        scores = {"acc": tp.sum() / total, "f1_macro": (f1 * present).sum() / present.sum().clamp(min=1)}
        if self.num_classes >= 10:
            scores["acc_top5"] = self.top5 / total
        return scores


class ClassificationTask(TaskModule):
    """Cross-entropy training; accuracy (top-1, top-5 from 10 classes) and macro-F1 per stage.

    Args:
        label_smoothing: label smoothing of the training loss (validation and test use none).
        monitor: the validation metric that ranks runs (`compare`) and picks the best checkpoint: val/acc, or
            val/loss (the scorecard compares test losses, so it picks checkpoints by loss too).
    """

    monitor, monitor_mode = "val/acc", "max"
    MONITORS = {"val/acc": "max", "val/loss": "min"}

    def __init__(
        self, *, label_smoothing: float = 0.0, monitor: Literal["val/acc", "val/loss"] = "val/acc", **optimization
    ) -> None:
        super().__init__(**optimization)
        if monitor not in self.MONITORS:
            raise ConfigError(f"monitor {monitor!r} is not available here; valid choices are {', '.join(self.MONITORS)}.")
        self.monitor, self.monitor_mode = monitor, self.MONITORS[monitor]

    def _build_metrics(self, num_classes: int) -> None:
        metrics = classification_metrics(num_classes)
        self.train_metrics = TrainingClassificationMetrics(num_classes)
        self.val_metrics = metrics.clone(prefix="val/")
        self.test_metrics = metrics.clone(prefix="test/")

    def labels_of(self, batch) -> torch.Tensor:
        raise NotImplementedError

    def logits_and_labels(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        return self.forward_batch(self.model, batch), self.labels_of(batch)

    def _step(self, batch, stage: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(the mean loss, the logits, the labels) of a batch, its metrics updated and logged."""
        logits, labels = self.logits_and_labels(batch)
        smoothing = self.hparams.label_smoothing if stage == "train" else 0.0
        loss = F.cross_entropy(logits.float(), labels, label_smoothing=smoothing)
        metrics = getattr(self, f"{stage}_metrics")
        metrics.update(logits.detach(), labels)
        self.log_loss(stage, loss, batch_size=labels.shape[0])
        if stage != "train":  # training's are logged at the epoch's end
            self.log_dict(metrics, on_step=False, on_epoch=True, prog_bar=stage == "val")
        return loss, logits, labels

    @staticmethod
    def per_example(logits: torch.Tensor, labels: torch.Tensor) -> dict:
        """Each item's outcome, for the run's per-example file (per_example.py): right or not, and its loss."""
        losses = F.cross_entropy(logits.float(), labels, reduction="none")
        return {"per_example": {"correct": logits.argmax(dim=-1) == labels, "loss": losses.detach()}}

    def on_train_epoch_end(self) -> None:
        # compute() sums the counts over the DDP ranks; the ranks then log the same values (sync_dist
        # averages equal numbers, once an epoch, instead of Lightning's warning that they are unsynced).
        self.log_dict({f"train/{name}": value for name, value in self.train_metrics.compute().items()}, sync_dist=True)
        self.train_metrics.reset()

    def training_step(self, batch, batch_idx):
        self.log_learning_rate()
        return self._step(batch, "train")[0]

    def validation_step(self, batch, batch_idx):
        return self.per_example(*self._step(batch, "val")[1:])

    def test_step(self, batch, batch_idx):
        return self.per_example(*self._step(batch, "test")[1:])

    def predict_logits(self, batch) -> tuple[torch.Tensor, list[str]]:
        """(logits, the inputs' names or texts) of a `predict` batch."""
        raise NotImplementedError

    def predict_step(self, batch, batch_idx) -> list[dict]:
        """One row per input: the predicted class and every class's probability."""
        logits, inputs = self.predict_logits(batch)
        probabilities = logits.float().softmax(dim=-1).cpu()
        names = getattr(self.trainer.datamodule, "class_names", None) or [str(i) for i in range(logits.shape[-1])]
        return [
            {
                "input": text,
                "prediction": names[int(row.argmax())],
                "probabilities": {name: round(float(p), 6) for name, p in zip(names, row)},
            }
            for text, row in zip(inputs, probabilities)
        ]
