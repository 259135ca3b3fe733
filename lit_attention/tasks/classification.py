"""Shared steps and metrics for image and text classification."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torchmetrics import MetricCollection
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score

from lit_attention.tasks.base import TaskModule


def classification_metrics(num_classes: int) -> MetricCollection:
    metrics = {
        "acc": MulticlassAccuracy(num_classes, average="micro"),
        "f1_macro": MulticlassF1Score(num_classes, average="macro"),
    }
    if num_classes >= 10:
        metrics["acc_top5"] = MulticlassAccuracy(num_classes, top_k=5, average="micro")
    return MetricCollection(metrics)


class ClassificationTask(TaskModule):
    """Cross-entropy training; accuracy (top-1, top-5 from 10 classes) and macro-F1 per stage."""

    monitor, monitor_mode = "val/acc", "max"

    def _build_metrics(self, num_classes: int) -> None:
        metrics = classification_metrics(num_classes)
        self.train_metrics = metrics.clone(prefix="train/")
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
        on_step = stage == "train"
        self.log(f"{stage}/loss", loss, on_step=on_step, on_epoch=True, prog_bar=True, batch_size=labels.shape[0])
        self.log_dict(metrics, on_step=False, on_epoch=True, prog_bar=stage == "val")
        return loss

    def training_step(self, batch, batch_idx):
        self.log_learning_rate()
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx):
        self._step(batch, "val")

    def test_step(self, batch, batch_idx):
        self._step(batch, "test")

    def on_validation_epoch_end(self) -> None:
        # The HParams tab compares runs on `hp_metric`: the monitored validation metric.
        self.log("hp_metric", self.val_metrics["acc"].compute())

    def predict_step(self, batch, batch_idx):
        logits, _ = self.logits_and_labels(batch)
        return logits.argmax(dim=-1)
