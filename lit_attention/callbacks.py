"""Trainer callbacks the CLI adds: attention maps in TensorBoard and a run history for `compare`."""

from __future__ import annotations

import time

import lightning as L
import torch
from lightning.fabric.utilities.apply_func import apply_to_collection

from lit_attention.attention import MultiHeadAttention
from lit_attention.checkpointing import LastCheckpoint


class AttentionMapLogger(L.Callback):
    """After each validation, log the attention maps of one fixed validation sample as images.

    Maps come from the plain-math reference path (the fused kernel never materialises them), one
    image per attention layer, averaged over heads.
    """

    def __init__(self) -> None:
        self.sample = None

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
        if self.sample is None and batch_idx == 0:
            self.sample = apply_to_collection(batch, torch.Tensor, lambda t: t[:1].detach().clone())

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or self.sample is None or trainer.logger is None:
            return
        if not hasattr(trainer.logger.experiment, "add_image"):
            return
        maps = attention_maps(pl_module, self.sample)
        for name, weights in maps.items():
            image = weights / weights.max().clamp(min=1e-12)  # (T_q, T_k) in [0, 1]
            trainer.logger.experiment.add_image(f"attention/{name}", image[None].float().cpu(), trainer.global_step)


@torch.no_grad()
def attention_maps(pl_module, batch) -> dict[str, torch.Tensor]:
    """Head-averaged attention weights (T_q, T_k) of every attention layer for the first sample."""
    layers = {name: m for name, m in pl_module.model.named_modules() if isinstance(m, MultiHeadAttention)}
    previous = {name: (m.fused, m.record_weights) for name, m in layers.items()}
    was_training = pl_module.training
    pl_module.eval()
    try:
        for layer in layers.values():
            layer.fused, layer.record_weights = False, True
        pl_module.forward_batch(pl_module.model, apply_to_collection(batch, torch.Tensor, lambda t: t.to(pl_module.device)))
        return {name: layer.recorded_weights[0].mean(dim=0) for name, layer in layers.items()}
    finally:
        for name, layer in layers.items():
            layer.fused, layer.record_weights = previous[name]
            layer.recorded_weights = None
        pl_module.train(was_training)


class RunHistory(L.Callback):
    """Remembers what `compare` reports: the monitored metric at each validation, and training speed."""

    def __init__(self) -> None:
        self.curve: list[tuple[int, int, float]] = []  # (epoch, global step, value)
        self.train_seconds = 0.0
        self.train_samples = 0
        self._batch_started = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._batch_started = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.train_seconds += time.perf_counter() - self._batch_started
        self.train_samples += pl_module.batch_size_of(batch)

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or pl_module.monitor not in trainer.callback_metrics:
            return
        value = float(trainer.callback_metrics[pl_module.monitor])
        self.curve.append((trainer.current_epoch, trainer.global_step, value))

    @property
    def samples_per_second(self) -> float:
        return self.train_samples / self.train_seconds if self.train_seconds else float("nan")


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite; training stopped before that step was applied."""


class FiniteLossGuard(L.Callback):
    """Stops training at the first NaN or infinite training loss, naming the step.

    It checks the loss before the backward pass, so the faulty step never reaches the weights, the
    optimizer state or any checkpoint: the last checkpoint stays the last good one. The check is one
    scalar per step (`Trainer(detect_anomaly=True)` checks every operation and is far slower).
    """

    def on_before_backward(self, trainer, pl_module, loss: torch.Tensor) -> None:
        finite = bool(torch.isfinite(loss.detach()).all())
        # Every rank must stop together: one rank raising alone would leave the others waiting forever.
        if trainer.strategy.reduce_boolean_decision(not finite, all=False):
            raise NonFiniteLossError(nonfinite_message(trainer, loss))


def nonfinite_message(trainer, loss: torch.Tensor) -> str:
    loss = loss.detach()
    value = "nan" if torch.isnan(loss).any() else "infinite" if torch.isinf(loss).any() else "nan or infinite on another rank"
    where = f"global step {trainer.global_step} (epoch {trainer.current_epoch}, batch {trainer.fit_loop.epoch_loop.batch_idx})"
    last = next((c.path(trainer) for c in trainer.callbacks if isinstance(c, LastCheckpoint)), None)
    intact = f", and the last checkpoint {str(last)!r} is intact" if last is not None and last.is_file() else ""
    return (
        f"The training loss became {value} at {where}; training stopped before applying that step{intact}: "
        "lower the learning rate or clip gradients (trainer.gradient_clip_val), then resume with --ckpt_path last."
    )
