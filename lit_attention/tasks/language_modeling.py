"""CausalLanguageModel: a GPT trained on next-token prediction (also serves MQAR recall)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from lit_attention.errors import ConfigError
from lit_attention.models import GPT
from lit_attention.tasks.base import TaskModule, check_length, check_token_ids

IGNORE = -100  # targets equal to this are not scored (MQAR scores only its query positions)
MONITORS = {"val/loss": "min", "val/acc": "max"}  # the metric that ranks runs and picks the best checkpoint


class CausalLanguageModel(TaskModule):
    """Language modelling. Batches are `(inputs (B, T), targets (B, T))`; logs loss, perplexity
    (exp of the token-weighted mean loss) and next-token accuracy over scored targets.

    `monitor` picks the validation metric that ranks runs (`compare`) and the best checkpoint:
    `val/loss` for language modelling, `val/acc` where only some answers count, as in MQAR recall.
    `init_std` is the std of the GPT's normal initialisation (GPT-2's 0.02 by default).
    """

    def __init__(
        self,
        vocab_size: int = 256,
        max_len: int = 256,
        dim: int = 384,
        depth: int = 6,
        num_heads: int = 6,
        mlp_ratio: float = 4.0,
        attention: str | dict = "standard",
        dropout: float = 0.0,
        drop_path: float = 0.0,
        bias: bool = False,
        tie_weights: bool = True,
        lr: float = 6e-4,
        weight_decay: float = 0.1,
        betas: tuple[float, float] = (0.9, 0.95),
        warmup_steps: int = 100,
        max_steps: int | None = None,
        min_lr_ratio: float = 0.1,
        compile: bool = False,
        monitor: str = "val/loss",
        init_std: float = 0.02,
    ) -> None:
        super().__init__()
        if monitor not in MONITORS:
            raise ConfigError(f"monitor {monitor!r} is not available for language models; valid choices are {', '.join(MONITORS)}.")
        self.monitor, self.monitor_mode = monitor, MONITORS[monitor]
        self.save_hyperparameters()
        self.model = self.build_model()
        for stage in ("train", "val", "test"):
            setattr(self, f"{stage}_accuracy", MulticlassAccuracy(vocab_size, average="micro", ignore_index=IGNORE))
        self.val_loss, self.test_loss = MeanMetric(), MeanMetric()
        self._record_model_facts()

    def build_model(self) -> GPT:
        hp = self.hparams
        return GPT(
            vocab_size=hp.vocab_size, max_len=hp.max_len, dim=hp.dim, depth=hp.depth, num_heads=hp.num_heads,
            mlp_ratio=hp.mlp_ratio, attention=hp.attention, dropout=hp.dropout, drop_path=hp.drop_path,
            bias=hp.bias, tie_weights=hp.tie_weights, init_std=hp.init_std,
        )

    def forward(self, tokens):
        return self.model(tokens)

    @staticmethod
    def forward_batch(model, batch):
        return model(batch[0])

    @staticmethod
    def batch_size_of(batch) -> int:
        return batch[0].shape[0]

    @staticmethod
    def tokens_of(batch) -> int:
        return batch[0].numel()

    def check_batch(self, batch) -> None:
        inputs, targets = batch
        check_length("input sequences", inputs.shape[1], self.hparams.max_len, self.hparams.attention)
        check_token_ids("inputs", inputs, self.hparams.vocab_size)
        check_token_ids("targets", targets, self.hparams.vocab_size, ignore=IGNORE)

    def _loss(self, batch, stage: str) -> tuple[torch.Tensor, int]:
        inputs, targets = batch
        logits = self.forward_batch(self.model, batch)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE)
        accuracy = getattr(self, f"{stage}_accuracy")
        accuracy.update(logits.detach().argmax(dim=-1), targets)
        self.log(f"{stage}/acc", accuracy, on_step=False, on_epoch=True)
        return loss, int((targets != IGNORE).sum())

    def training_step(self, batch, batch_idx):
        self.log_learning_rate()
        loss, _ = self._loss(batch, "train")
        self.log("train/loss", loss, on_step=True, on_epoch=True, prog_bar=True, batch_size=batch[0].shape[0])
        return loss

    def validation_step(self, batch, batch_idx):
        loss, scored = self._loss(batch, "val")
        self.val_loss.update(loss, weight=scored)

    def test_step(self, batch, batch_idx):
        loss, scored = self._loss(batch, "test")
        self.test_loss.update(loss, weight=scored)

    def _log_loss_and_perplexity(self, stage: str) -> torch.Tensor:
        metric = getattr(self, f"{stage}_loss")
        loss = metric.compute()  # token-weighted mean over the epoch, synced across DDP ranks
        metric.reset()
        self.log(f"{stage}/loss", loss, prog_bar=True)
        self.log(f"{stage}/ppl", loss.exp())
        return loss

    def on_validation_epoch_end(self) -> None:
        loss = self._log_loss_and_perplexity("val")
        # The HParams tab compares runs on `hp_metric`: the monitored validation metric.
        self.log("hp_metric", loss if self.monitor == "val/loss" else self.val_accuracy.compute())

    def on_test_epoch_end(self) -> None:
        self._log_loss_and_perplexity("test")

    def predict_step(self, batch, batch_idx):
        inputs = batch[0] if isinstance(batch, (tuple, list)) else batch
        return self.model(inputs).argmax(dim=-1)
