"""CausalLanguageModel: a GPT trained on next-token prediction (also serves MQAR recall)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torchmetrics import MeanMetric, Metric
from torchmetrics.classification import MulticlassAccuracy

from lit_attention.errors import ConfigError
from lit_attention.modeling import GPT, GPTConfig
from lit_attention.training.tasks.base import TaskModule, check_length, check_token_ids

IGNORE = -100  # targets equal to this are not scored (MQAR scores only its query positions)
MONITORS = {"val/loss": "min", "val/acc": "max"}  # the metric that ranks runs and picks the best checkpoint


class ScoredAccuracy(Metric):
    """Next-token accuracy over the targets that are scored (not IGNORE), counted on the device. The same
    value as MulticlassAccuracy(average="micro", ignore_index=IGNORE), whose update selects the scored
    targets by a boolean mask and so waits for the device at every training step."""

    full_state_update, higher_is_better = False, True

    def __init__(self) -> None:
        super().__init__()
        self.add_state("correct", torch.tensor(0), dist_reduce_fx="sum")
        self.add_state("scored", torch.tensor(0), dist_reduce_fx="sum")

    def update(self, predictions: torch.Tensor, targets: torch.Tensor) -> None:
        scored = targets != IGNORE
        self.correct += ((predictions == targets) & scored).sum()
        self.scored += scored.sum()

    def compute(self) -> torch.Tensor:
        return self.correct / self.scored.clamp(min=1)


class CausalLanguageModel(TaskModule):
    """Language modelling. Batches are `(inputs (B, T), targets (B, T))`; logs loss, perplexity
    (exp of the token-weighted mean loss) and next-token accuracy over scored targets.

    Args:
        net: the GPT's architecture (vocab_size and max_len come from the data).
        monitor: the validation metric that ranks runs (`compare`) and picks the best checkpoint:
            val/loss for language modelling, val/acc where only some answers count (MQAR recall).
        max_new_tokens: tokens `predict` generates after each prompt.
        temperature: sampling temperature of `predict`; 0 picks the most likely token (greedy).
        top_k: sample among the k most likely tokens only (None: all).
        top_p: sample among the most likely tokens whose probabilities sum to p (None: all).
    """

    config_class, model_class = GPTConfig, GPT

    def __init__(
        self,
        net: GPTConfig = GPTConfig(),
        monitor: Literal["val/loss", "val/acc"] = "val/loss",
        max_new_tokens: int = 64,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        **optimization,
    ) -> None:
        super().__init__(**optimization)
        if monitor not in MONITORS:
            raise ConfigError(
                f"monitor {monitor!r} is not available for language models; valid choices are {', '.join(MONITORS)}."
            )
        self.monitor, self.monitor_mode = monitor, MONITORS[monitor]
        self.model = self.build_model()
        self.train_accuracy = ScoredAccuracy()
        for stage in ("val", "test"):
            setattr(self, f"{stage}_accuracy", MulticlassAccuracy(self.config.vocab_size, average="micro", ignore_index=IGNORE))
        self.val_loss, self.test_loss = MeanMetric(), MeanMetric()
        self._record_model_facts()

    def forward(self, tokens):
        return self.model(tokens)

    @staticmethod
    def tokens_of(batch) -> int:
        return batch[0].numel()

    def check_batch(self, batch) -> None:
        inputs, targets = batch
        check_length("input sequences", inputs.shape[1], self.config.max_len, self.spec)
        check_token_ids("inputs", inputs, self.config.vocab_size)
        check_token_ids("targets", targets, self.config.vocab_size, ignore=IGNORE)

    def _loss(self, batch, stage: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The mean loss over the scored targets, their count (on the device: no host sync) and the logits."""
        inputs, targets = batch
        logits = self.forward_batch(self.model, batch)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE)
        accuracy = getattr(self, f"{stage}_accuracy")
        accuracy.update(logits.detach().argmax(dim=-1), targets)
        self.log(f"{stage}/acc", accuracy, on_step=False, on_epoch=True)
        return loss, (targets != IGNORE).sum(), logits

    @staticmethod
    def per_example(logits: torch.Tensor, targets: torch.Tensor) -> dict:
        """Each window's outcome, for the run's per-example file (per_example.py): the mean loss over its
        scored targets, how many it predicted and how many were scored (token-weighted means rebuild)."""
        scored = targets != IGNORE
        losses = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE, reduction="none").view_as(
            targets
        )
        tokens = scored.sum(dim=1)
        return {
            "per_example": {
                "loss": (losses.sum(dim=1) / tokens.clamp(min=1)).detach(),
                "correct": ((logits.argmax(dim=-1) == targets) & scored).sum(dim=1),
                "tokens": tokens,
            }
        }

    def training_step(self, batch, batch_idx):
        self.log_learning_rate()
        loss, _, _ = self._loss(batch, "train")
        self.log_loss("train", loss, batch_size=batch[0].shape[0])
        return loss

    def validation_step(self, batch, batch_idx):
        loss, scored, logits = self._loss(batch, "val")
        self.val_loss.update(loss, weight=scored)
        return self.per_example(logits.detach(), batch[1])

    def test_step(self, batch, batch_idx):
        loss, scored, logits = self._loss(batch, "test")
        self.test_loss.update(loss, weight=scored)
        return self.per_example(logits.detach(), batch[1])

    def _log_loss_and_perplexity(self, stage: str) -> torch.Tensor:
        metric = getattr(self, f"{stage}_loss")
        loss = metric.compute()  # token-weighted mean over the epoch, synced across DDP ranks
        metric.reset()
        # compute() has synced the loss over the ranks: sync_dist averages equal numbers (exactly), and it
        # says so to Lightning, which would otherwise warn that an epoch value is one rank's.
        self.log(f"{stage}/loss", loss, prog_bar=True, sync_dist=True)
        self.log(f"{stage}/ppl", loss.exp(), sync_dist=True)
        return loss

    def on_validation_epoch_end(self) -> None:
        self._log_loss_and_perplexity("val")

    def on_test_epoch_end(self) -> None:
        self._log_loss_and_perplexity("test")

    def predict_step(self, batch, batch_idx) -> list[dict]:
        """Continue each prompt of a left-padded batch; one row per prompt with the generated text."""
        hp = self.hparams
        tokens = self.model.generate(
            batch["tokens"],
            hp.max_new_tokens,
            temperature=hp.temperature,
            top_k=hp.top_k,
            top_p=hp.top_p,
            padding_mask=batch["padding_mask"],
        )
        new = tokens[:, batch["tokens"].shape[1] :].tolist()
        decode = self.trainer.datamodule.decode
        return [{"prompt": prompt, "continuation": decode(ids)} for prompt, ids in zip(batch["texts"], new)]
