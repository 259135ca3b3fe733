"""Trainer callbacks of every `lit-attention` run, and the one function that picks them.

* `LastCheckpoint` / `ExactResume` (checkpointing.py): a killed run resumes exactly.
* `BestCheckpoint`: the best checkpoint by the task's monitored metric (ties broken as the task says).
* `RunRecorder` (recorder.py): the run's record.json, built from state that survives a resume.
* `PerExampleOutcomes` (per_example.py): each validation and test item's outcome, in a file beside it.
* `FinalValidation`: a run whose last step no validation follows is validated after it.
* `FiniteLossGuard`: stops at the first NaN or infinite loss, before any checkpoint holds it.
* `TrainingThroughput` (throughput.py): samples/s, tokens/s, FLOP/s and MFU in TensorBoard (FLOPs counted by torch).
* `ProgressBar`: epoch and step (a step-based run has no last epoch to show).
* `AttentionMapLogger` (opt-in): attention maps of one validation sample.
"""

from __future__ import annotations

import heapq
import json
from pathlib import Path

import lightning as L
import torch
from lightning.fabric.utilities.apply_func import apply_to_collection
from lightning.pytorch.callbacks import BasePredictionWriter, ModelCheckpoint, ThroughputMonitor, TQDMProgressBar
from lightning.pytorch.callbacks.progress.progress_bar import get_standard_metrics
from lightning.pytorch.utilities.exceptions import SIGTERMException

from lit_attention.errors import ConfigError
from lit_attention.modeling.attention import MultiHeadAttention
from lit_attention.training.checkpointing import ExactResume, LastCheckpoint, last_checkpoint
from lit_attention.training.other_loggers import image_loggers, log_figure
from lit_attention.training.lightning_internals import computed_metrics, validation_follows
from lit_attention.training.per_example import PerExampleOutcomes
from lit_attention.training.recorder import RunRecorder
from lit_attention.training.throughput import TrainingThroughput
from lit_attention.training.tasks.base import TaskModule


def default_callbacks(
    model,
    user_callbacks: list,
    fitting: bool,
    checkpointing: bool,
    checkpoint_every_n_steps: int | None,
    attention_maps: bool,
    progress: bool,
    checkpoint_dir: str | None = None,
) -> list[L.Callback]:
    """The callbacks a run gets besides the user's own (a user's callback of the same kind replaces
    ours). The recorder comes before LastCheckpoint: after a validation it must note the new point
    before the checkpoint that a resume would start from is written. `checkpoint_dir`: the run's
    `checkpoints/` on rank 0 (None on the other ranks, which get rank 0's), whichever logger the user
    names: Lightning would put checkpoints in the first logger's directory."""

    def missing(kind) -> bool:
        return not any(isinstance(c, kind) for c in user_callbacks)

    callbacks: list[L.Callback] = [RunRecorder()] if missing(RunRecorder) else []
    if missing(PerExampleOutcomes):  # after the recorder: it reads the curve the recorder has just extended
        recorder = next(c for c in [*user_callbacks, *callbacks] if isinstance(c, RunRecorder))
        callbacks.append(PerExampleOutcomes(recorder))
    if fitting and missing(FinalValidation):
        callbacks.append(FinalValidation())
    if checkpointing:
        if missing(ExactResume):
            callbacks.append(ExactResume())
        if missing(ModelCheckpoint):  # the best checkpoint; last.ckpt is LastCheckpoint's
            callbacks.append(
                BestCheckpoint(
                    tie_breaker=getattr(model, "monitor_tie_breaker", None),
                    dirpath=checkpoint_dir,
                    monitor=model.monitor,
                    mode=model.monitor_mode,
                    save_last=False,
                    save_top_k=1,
                    filename="best-{epoch}-{step}",
                    auto_insert_metric_name=False,
                )
            )
        if missing(LastCheckpoint):
            callbacks.append(LastCheckpoint(every_n_steps=checkpoint_every_n_steps))
    if missing(FiniteLossGuard):
        callbacks.append(FiniteLossGuard())
    if fitting and missing(ThroughputMonitor) and missing(TrainingThroughput):  # FLOPs: counted per batch shape
        lengths = None if type(model).tokens_of is TaskModule.tokens_of else model.tokens_of  # items/s for tokens only
        callbacks.append(TrainingThroughput(batch_size_fn=model.batch_size_of, length_fn=lengths))
    if progress and missing(TQDMProgressBar):
        callbacks.append(ProgressBar())
    if attention_maps:
        callbacks.append(AttentionMapLogger())
    return callbacks


class FinalValidation(L.Callback):
    """Validates after the run's last training batch when Lightning's schedule would not: a step budget
    shorter than an epoch, or a `check_val_every_n_epoch` that skips the last epoch, would otherwise end
    a run whose final weights were never scored, or that has no validation (no best checkpoint, an empty
    record curve, nothing for compare to report). It asks Lightning the way early stopping does
    (`should_stop`, which makes Lightning validate after the batch), so the best and last checkpoints and
    the record see this validation as any other. `limit_val_batches=0` (no validation) is respected."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.sanity_checking or not _last_batch_of_fit(trainer) or validation_follows(trainer):
            return
        trainer.check_val_every_n_epoch = None  # the epoch filter comes before the `should_stop` request
        trainer.should_stop = True


def _last_batch_of_fit(trainer: L.Trainer) -> bool:
    """Whether the training batch just done is the run's last (by max_steps or max_epochs)."""
    steps = trainer.max_steps is not None and trainer.max_steps >= 0 and trainer.global_step >= trainer.max_steps
    epochs = (
        trainer.max_epochs is not None
        and trainer.max_epochs >= 0
        and trainer.current_epoch + 1 >= trainer.max_epochs
        and trainer.fit_loop.epoch_loop.batch_progress.is_last_batch
    )
    return steps or epochs


class BestCheckpoint(ModelCheckpoint):
    """The one best checkpoint by the monitored metric; with `tie_breaker` (metric, "min" or "max"), a
    validation that equals the best monitored value and is better by that metric becomes the best.
    (Translation's val/bleu can stay 0.0 for many epochs on short sentences, and the first of them would
    otherwise stay best however far the loss fell.)"""

    def __init__(self, tie_breaker: tuple[str, str] | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.tie_breaker = tie_breaker
        self.best_tie_value: float | None = None  # the tie-breaking metric at the best checkpoint

    def check_monitor_top_k(self, trainer: L.Trainer, current: torch.Tensor | None = None) -> bool:
        better = super().check_monitor_top_k(trainer, current)
        if self.tie_breaker is None or current is None:
            return better
        name, mode = self.tie_breaker
        tie = trainer.callback_metrics.get(name)
        tie = None if tie is None else float(tie)
        if not better and self.best_k_models and tie is not None and self.best_tie_value is not None:
            if bool(current == self.best_k_models[self.kth_best_model_path]):
                tie_better = tie < self.best_tie_value if mode == "min" else tie > self.best_tie_value
                better = trainer.strategy.reduce_boolean_decision(tie_better)
        if better:
            self.best_tie_value = tie
        return better

    @property
    def state_key(self) -> str:
        # ModelCheckpoint's key, so that a checkpoint written before this class existed resumes its best.
        return super().state_key.replace(type(self).__qualname__, ModelCheckpoint.__qualname__, 1)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "best_tie_value": self.best_tie_value}

    def load_state_dict(self, state_dict: dict) -> None:
        self.best_tie_value = state_dict.get("best_tie_value")
        super().load_state_dict(state_dict)


class PredictionWriter(BasePredictionWriter):
    """Writes what `predict_step` returns (a list of JSON-able rows per batch) to a JSON-lines file, one
    row per input, in input order, batch by batch, so a long prediction run keeps what it has done.

    Under DDP every rank predicts its share (Lightning's sampler for predict gives each input to one rank,
    and the ranks may run different numbers of batches) and appends each batch's rows, with their input
    indices, to a file of its own beside the predictions (`predictions.rank<r>.jsonl`): no rank holds more
    than a batch. When prediction ends, rank 0 merges the ranks' files into the predictions in input order
    (a sampler's padding repeats an input: it is written once) and removes them. Stopped by SIGTERM, each
    rank's file keeps what it predicted. The ranks' files must be where rank 0 can read them, as the
    checkpoint every rank loads must be. `path` is None on the ranks other than 0.

    Lightning's prediction loop never looks at `trainer.received_sigterm`; this stops it after the batch
    just written (preemption.py), keeping the `rows` written so far."""

    def __init__(self, path: str | Path | None) -> None:
        super().__init__(write_interval="batch")
        self.path = None if path is None else Path(path)
        self.rows = 0  # rows this rank has written so far (to the predictions, or under DDP to its own file)
        self.part: Path | None = None  # this rank's file under DDP

    def on_predict_start(self, trainer, pl_module) -> None:
        self.rows = 0
        if self.path is not None:
            self.path.write_text("")
            for stale in self.path.parent.glob(rank_file(self.path, "*").name):
                stale.unlink()  # a stopped earlier prediction's, maybe on more ranks
        if trainer.world_size > 1:
            where = Path(trainer.strategy.broadcast(None if self.path is None else str(self.path)))
            self.part = rank_file(where, trainer.global_rank)
            try:
                self.part.write_text("")
                written = True
            except OSError:
                written = False
            # Every rank must be able to write where rank 0 reads, or rank 0 would wait at the end for ever.
            if not trainer.strategy.reduce_boolean_decision(written, all=True):
                raise ConfigError(
                    f"A rank cannot write its predictions beside {str(where)!r}; under DDP every rank "
                    "writes into the run's folder, so put the runs on a file system every node sees."
                )

    def write_on_batch_end(self, trainer, pl_module, prediction, batch_indices, batch, batch_idx, dataloader_idx) -> None:
        if self.part is not None:
            self._append(self.part, [[int(index), row] for index, row in zip(batch_indices, prediction, strict=True)])
        elif self.path is not None:
            self._append(self.path, prediction)
        if trainer.received_sigterm:
            raise SIGTERMException

    def on_predict_epoch_end(self, trainer, pl_module) -> None:
        if self.part is None:
            return
        trainer.strategy.barrier()  # every rank's file is complete
        if self.path is not None and trainer.is_global_zero:
            parts = [rank_file(self.path, rank) for rank in range(trainer.world_size)]
            self.rows = merge_in_input_order(parts, self.path)
            for part in parts:
                part.unlink(missing_ok=True)
        self.part = None

    def _append(self, path: Path, rows: list) -> None:
        with open(path, "a", encoding="utf-8") as file:
            for row in rows:
                file.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.rows += len(rows)


def rank_file(predictions: Path, rank: int | str) -> Path:
    """Where rank `rank` keeps its rows, with their input indices, under DDP (`*`: a pattern for every rank's)."""
    return predictions.with_name(f"{predictions.stem}.rank{rank}.jsonl")


def merge_in_input_order(parts: list[Path], destination: Path) -> int:
    """Append the rows of the ranks' files to `destination` in input order, each input once; how many.
    Each file holds `[index, row]` lines in increasing input order, but for the sampler's padding at its
    end (inputs repeated from the start), which is skipped; the files are read line by line, not loaded."""

    def ascending(part: Path):
        last = -1
        with open(part, encoding="utf-8") as file:
            for line in file:
                index, row = json.loads(line)
                if index > last:
                    last = index
                    yield index, row

    written, previous = 0, None
    with open(destination, "a", encoding="utf-8") as out:
        for index, row in heapq.merge(*(ascending(part) for part in parts), key=lambda item: item[0]):
            if index != previous:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                written, previous = written + 1, index
    return written


class ProgressBar(TQDMProgressBar):
    """Lightning's bar, described as `epoch E, step S/N`: a run limited by steps shows how far it is.
    The training loss it shows is read every `log_every_n_steps` steps, when the loggers read it too:
    reading it every step would make the host wait for the device every step.

    The bar shows the metrics Lightning has already computed, and never computes one itself: only rank 0
    draws it, and computing an epoch metric synced over the ranks is a collective, which rank 0 alone
    would wait in forever (a classification fit on 2 processes hung at its first epoch's end)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.shown_loss: float | None = None

    def get_metrics(self, trainer, pl_module) -> dict:
        shown, computed = computed_metrics(trainer)
        metrics = {**get_standard_metrics(trainer), **shown}
        metrics.pop("v_num", None)  # the run directory is printed at the start and the end instead
        if trainer.training and trainer.global_step % max(1, trainer.log_every_n_steps) == 0:
            loss = computed.get("train/loss_step")
            self.shown_loss = None if loss is None else float(loss)
        if self.shown_loss is not None:
            metrics["train/loss_step"] = f"{self.shown_loss:.3g}"
        return metrics

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        bar = self.train_progress_bar
        if bar is not None and not bar.disable:
            total = f"/{trainer.max_steps}" if trainer.max_steps and trainer.max_steps > 0 else ""
            bar.set_description(f"epoch {trainer.current_epoch}, step {trainer.global_step}{total}", refresh=False)


class AttentionMapLogger(L.Callback):
    """After each validation, log the attention maps of one fixed validation sample as figures.

    Maps come from the plain-math reference path (the fused kernel never materialises them), one
    figure per attention layer, averaged over heads, on a log colour scale with a colour bar: attention
    weights span orders of magnitude, and a linear scale normalised by the maximum shows a causal
    model's first row and little else.
    """

    def __init__(self) -> None:
        self.sample = None

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
        if self.sample is None and batch_idx == 0:
            self.sample = apply_to_collection(batch, torch.Tensor, lambda t: t[:1].detach().clone())

    def on_validation_end(self, trainer, pl_module) -> None:
        loggers = image_loggers(trainer.loggers)  # a line for each that takes none
        if trainer.sanity_checking or self.sample is None or not loggers:
            return
        for name, weights in attention_maps(pl_module, self.sample).items():
            log_figure(loggers, f"attention/{name}", attention_figure(weights, name), trainer.global_step)


def attention_figure(weights: torch.Tensor, title: str):
    """A (T_q, T_k) map on a log scale from 1e-4 to 1 with a colour bar; exact zeros (masked) are white."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    values = weights.float().cpu().numpy()
    figure, axes = plt.subplots(figsize=(4.2, 3.6))
    shown = axes.imshow(values, norm=LogNorm(vmin=1e-4, vmax=1.0, clip=True), cmap="viridis", interpolation="nearest")
    shown.cmap.set_bad("white")  # log(0): masked positions
    axes.set_xlabel("key position")
    axes.set_ylabel("query position")
    axes.set_title(title, fontsize=9)
    figure.colorbar(shown, ax=axes, label="attention weight (log scale)")
    figure.tight_layout()
    return figure


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


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite; training stopped before any later state was saved."""


class FiniteLossGuard(L.Callback):
    """Stops training at the first NaN or infinite training loss, naming its step.

    Reading the loss on the host every step would make the host wait for the device every step, so
    the losses stay on the device and are read together every `log_every_n_steps` steps, and always
    before a checkpoint is written, before a validation and when training ends. A faulty step is
    therefore applied, but neither it nor any later step reaches a checkpoint: `last.ckpt` stays the
    last good state. (`Trainer(detect_anomaly=True)` checks every operation and is far slower.)
    """

    def __init__(self) -> None:
        self.losses: list[torch.Tensor] = []  # this rank's training losses since the last check
        self.places: list[tuple[int, int, int]] = []  # their (global step, epoch, batch)

    def on_before_backward(self, trainer, pl_module, loss: torch.Tensor) -> None:
        self.losses.append(loss.detach())
        self.places.append((trainer.global_step, trainer.current_epoch, trainer.fit_loop.epoch_loop.batch_idx))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step % max(1, trainer.log_every_n_steps) == 0:
            self.check(trainer)

    def on_validation_start(self, trainer, pl_module) -> None:
        if trainer.state.fn == "fit":  # not a NaN model's validation metrics in the record
            self.check(trainer)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        self.check(trainer)  # raising here leaves the checkpoint on disk as it was

    def on_train_end(self, trainer, pl_module) -> None:
        self.check(trainer)

    def check(self, trainer) -> None:
        """Raise NonFiniteLossError if any loss since the last check, on any rank, was not finite. Every
        rank checks at the same points, so the all-reduce below is matched on every rank."""
        losses, places = self.losses, self.places
        self.losses, self.places = [], []
        bad = None
        if losses:
            finite = torch.isfinite(torch.stack(losses).float()).tolist()  # the one host sync
            bad = next((i for i, ok in enumerate(finite) if not ok), None)
        # Every rank must stop together: one rank raising alone would leave the others waiting forever.
        if trainer.strategy.reduce_boolean_decision(bad is not None, all=False):
            loss, place = (losses[bad], places[bad]) if bad is not None else (None, None)
            raise NonFiniteLossError(nonfinite_message(trainer, loss, place))


def nonfinite_message(trainer, loss: torch.Tensor | None, place: tuple[int, int, int] | None = None) -> str:
    """`loss`: the first non-finite loss (None: it was another rank's) and `place` its (global step,
    epoch, batch), by default where the trainer is now."""
    if loss is None:
        value = "nan or infinite on another rank"
    else:
        value = "nan" if torch.isnan(loss).any() else "infinite"
    step, epoch, batch = place or (trainer.global_step, trainer.current_epoch, trainer.fit_loop.epoch_loop.batch_idx)
    where = f"global step {step} (epoch {epoch}, batch {batch})"
    last = last_checkpoint(trainer)
    if last is not None and last.is_file():
        then = (
            f"; the last checkpoint {str(last)!r} is intact: lower the learning rate or clip gradients "
            "(trainer.gradient_clip_val), then resume with --ckpt_path last"
        )
    else:
        then = (
            "; no checkpoint was written before it, so lower the learning rate or clip gradients "
            "(trainer.gradient_clip_val) and start the run again"
        )
    return f"The training loss became {value} at {where}; training stopped before saving that step or any later one{then}."
