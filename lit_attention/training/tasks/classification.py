"""Shared steps and metrics for image and text classification."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torchmetrics import MetricCollection
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score

from lit_attention.training.tasks.base import TaskModule


def classification_metrics(num_classes: int, validate_args: bool = True) -> MetricCollection:
    """`validate_args=False` skips torchmetrics' check of every batch's labels, which reads them on the
    host (training: the batches were checked when the run began, check_batch)."""
    checks = {"validate_args": validate_args}
    metrics = {
        "acc": MulticlassAccuracy(num_classes, average="micro", **checks),
        "f1_macro": MulticlassF1Score(num_classes, average="macro", **checks),
    }
    if num_classes >= 10:
        metrics["acc_top5"] = MulticlassAccuracy(num_classes, top_k=5, average="micro", **checks)
    # No compute groups: torchmetrics would otherwise merge metrics whose states happen to be equal
    # after the first batch (a perfectly classified one makes top-5 accuracy and macro-F1 look alike),
    # and from then on report one metric's value under the other's name.
    return MetricCollection(metrics, compute_groups=False)


class ClassificationTask(TaskModule):
    """Cross-entropy training; accuracy (top-1, top-5 from 10 classes) and macro-F1 per stage.

    Args:
        label_smoothing: label smoothing of the training loss (validation and test use none).
    """

    monitor, monitor_mode = "val/acc", "max"

    def __init__(self, *, label_smoothing: float = 0.0, **optimization) -> None:
        super().__init__(**optimization)

    def _build_metrics(self, num_classes: int) -> None:
        metrics = classification_metrics(num_classes)
        self.train_metrics = classification_metrics(num_classes, validate_args=False).clone(prefix="train/")
        self.val_metrics = metrics.clone(prefix="val/")
        self.test_metrics = metrics.clone(prefix="test/")

    def labels_of(self, batch) -> torch.Tensor:
        raise NotImplementedError

    def logits_and_labels(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        return self.forward_batch(self.model, batch), self.labels_of(batch)

    def _step(self, batch, stage: str) -> torch.Tensor:
        logits, labels = self.logits_and_labels(batch)
        smoothing = self.hparams.label_smoothing if stage == "train" else 0.0
        loss = F.cross_entropy(logits.float(), labels, label_smoothing=smoothing)
        metrics = getattr(self, f"{stage}_metrics")
        metrics.update(logits.detach(), labels)
        self.log_loss(stage, loss, batch_size=labels.shape[0])
        self.log_dict(metrics, on_step=False, on_epoch=True, prog_bar=stage == "val")
        return loss

    def training_step(self, batch, batch_idx):
        self.log_learning_rate()
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx):
        self._step(batch, "val")

    def test_step(self, batch, batch_idx):
        self._step(batch, "test")

    def predict_logits(self, batch) -> tuple[torch.Tensor, list[str]]:
        """(logits, the inputs' names or texts) of a `predict` batch."""
        raise NotImplementedError

    def predict_step(self, batch, batch_idx) -> list[dict]:
        """One row per input: the predicted class and every class's probability."""
        logits, inputs = self.predict_logits(batch)
        probabilities = logits.float().softmax(dim=-1).cpu()
        names = getattr(self.trainer.datamodule, "class_names", None) or [str(i) for i in range(logits.shape[-1])]
        return [{"input": text, "prediction": names[int(row.argmax())],
                 "probabilities": {name: round(float(p), 6) for name, p in zip(names, row)}}
                for text, row in zip(inputs, probabilities)]
