"""CausalLanguageModel: a GPT trained on next-token prediction (also serves MQAR recall)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from lit_attention.errors import ConfigError
from lit_attention.modeling import GPT
from lit_attention.training.tasks.base import TaskModule, check_length, check_token_ids, require_sizes

IGNORE = -100  # targets equal to this are not scored (MQAR scores only its query positions)
MONITORS = {"val/loss": "min", "val/acc": "max"}  # the metric that ranks runs and picks the best checkpoint


class CausalLanguageModel(TaskModule):
    """Language modelling. Batches are `(inputs (B, T), targets (B, T))`; logs loss, perplexity
    (exp of the token-weighted mean loss) and next-token accuracy over scored targets.

    Args:
        vocab_size: token ids; set by the DataModule (a larger value is allowed, e.g. GPT-2's 50304).
        max_len: positions (and the size of W_A); set by the DataModule (a larger value is allowed).
        dim: model width d.
        depth: transformer blocks.
        num_heads: attention heads (must divide dim).
        mlp_ratio: MLP hidden width as a multiple of dim.
        attention: the variant: standard, optimized, efficient, super, identity_query, residual_query or nonlinear_query, a preset with settings ('super,value_mix_init=xavier') or an axes spec ('query=residual_mlp,key=identity,value=identity,value_mix=true').
        dropout: dropout in embeddings, attention and MLP.
        drop_path: stochastic depth of the last block.
        bias: biases in linear layers and LayerNorms (GPT-2 has them).
        tie_weights: the output head shares the token embedding.
        activation: gelu (exact) or gelu_tanh (GPT-2's approximation).
        norm_eps: LayerNorm eps.
        init_std: std of the normal initialisation (GPT-2's 0.02).
        monitor: the validation metric that ranks runs (`compare`) and picks the best checkpoint:
            val/loss for language modelling, val/acc where only some answers count (MQAR recall).
        max_new_tokens: tokens `predict` generates after each prompt.
        temperature: sampling temperature of `predict`; 0 picks the most likely token (greedy).
        top_k: sample among the k most likely tokens only (None: all).
        top_p: sample among the most likely tokens whose probabilities sum to p (None: all).
    """

    model_class = GPT

    def __init__(
        self,
        vocab_size: int | None = None,
        max_len: int | None = None,
        dim: int = 384,
        depth: int = 6,
        num_heads: int = 6,
        mlp_ratio: float = 4.0,
        attention: str | dict = "standard",
        dropout: float = 0.0,
        drop_path: float = 0.0,
        bias: bool = False,
        tie_weights: bool = True,
        activation: Literal["gelu", "gelu_tanh"] = "gelu",
        norm_eps: float = 1e-5,
        init_std: float = 0.02,
        monitor: Literal["val/loss", "val/acc"] = "val/loss",
        max_new_tokens: int = 64,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        **optimization,
    ) -> None:
        super().__init__(**optimization)
        if monitor not in MONITORS:
            raise ConfigError(f"monitor {monitor!r} is not available for language models; valid choices are {', '.join(MONITORS)}.")
        require_sizes(self, ("vocab_size", "max_len"))
        self.monitor, self.monitor_mode = monitor, MONITORS[monitor]
        self.model = self.build_model()
        for stage in ("train", "val", "test"):
            setattr(self, f"{stage}_accuracy", MulticlassAccuracy(vocab_size, average="micro", ignore_index=IGNORE))
        self.val_loss, self.test_loss = MeanMetric(), MeanMetric()
        self._record_model_facts()

    def forward(self, tokens):
        return self.model(tokens)

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
        self._log_loss_and_perplexity("val")

    def on_test_epoch_end(self) -> None:
        self._log_loss_and_perplexity("test")

    def predict_step(self, batch, batch_idx) -> list[dict]:
        """Continue each prompt of a left-padded batch; one row per prompt with the generated text."""
        hp = self.hparams
        tokens = self.model.generate(batch["tokens"], hp.max_new_tokens, temperature=hp.temperature, top_k=hp.top_k,
                                     top_p=hp.top_p, padding_mask=batch["padding_mask"])
        new = tokens[:, batch["tokens"].shape[1]:].tolist()
        decode = self.trainer.datamodule.decode
        return [{"prompt": prompt, "continuation": decode(ids)} for prompt, ids in zip(batch["texts"], new)]
