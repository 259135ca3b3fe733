"""The callback that collects a run's record (records.py) while it trains, and what follows a fit.

The recorder's state (the validation curve, samples and tokens seen, training and wall time, the
first batch's fingerprint) travels with every checkpoint, so a run killed and resumed writes the same
record as one that never stopped (timings aside: they are wall-clock, summed over the processes).
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch

from lit_attention.training.checkpointing import last_checkpoint
from lit_attention.training.peak_flops import peak_flops
from lit_attention.training.outcome_files import write_outcomes
from lit_attention.training.per_example import PerExampleOutcomes
from lit_attention.training.records import provenance, write_record
from lit_attention.training.tasks.base import sharded_root


class RunRecorder(L.Callback):
    """Collects what the record holds while the run trains; `record()` assembles it."""

    def __init__(self) -> None:
        self.curve: list[list[float]] = []  # [epoch, global step, monitored value] after each validation
        self.ties: list[float | None] = []  # the task's tie-breaking metric at each point of the curve, if any
        self.samples = 0
        self.tokens: int | torch.Tensor = 0  # a tensor on the device while training: read when saved
        self.train_seconds = 0.0
        self.first_batch: str | None = None
        self.flops_per_batch: float | None = None  # of the run's first batch
        self.flops: float | None = 0  # of every training batch of this rank so far (None: not known)
        self._batch_started = 0.0
        self._started = time.perf_counter()
        self._earlier_wall_seconds = 0.0  # of the processes before a resume, up to their checkpoint

    def wall_seconds(self) -> float:
        return self._earlier_wall_seconds + time.perf_counter() - self._started

    def state_dict(self) -> dict[str, Any]:
        return {
            "curve": self.curve,
            "samples": self.samples,
            "tokens": int(self.tokens),
            "train_seconds": self.train_seconds,
            "first_batch": self.first_batch,
            "flops_per_batch": self.flops_per_batch,
            "flops": self.flops,
            "wall_seconds": self.wall_seconds(),
            "ties": self.ties,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.curve, self.samples, self.tokens = [list(p) for p in state["curve"]], state["samples"], state["tokens"]
        self.train_seconds, self.first_batch = state["train_seconds"], state["first_batch"]
        self.flops_per_batch = state.get("flops_per_batch")
        self.flops = state.get("flops")  # None from a checkpoint written before every batch was counted
        self.ties = list(state.get("ties", [None] * len(self.curve)))
        self._earlier_wall_seconds = float(state.get("wall_seconds", 0.0))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.first_batch is None:
            self.first_batch = batch_fingerprint(batch)
        self._batch_started = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.train_seconds += time.perf_counter() - self._batch_started
        flops = getattr(pl_module, "flops_per_batch", None)  # this batch's, counted by its shape
        if self.flops_per_batch is None:
            self.flops_per_batch = flops
        if self.flops is not None:
            self.flops = None if flops is None else self.flops + flops
        self.samples += pl_module.batch_size_of(batch) * trainer.world_size
        tokens = pl_module.tokens_of(batch)
        if tokens is not None:  # this rank's count, times the ranks (an estimate under DDP); a tensor stays one
            self.tokens = self.tokens + tokens * trainer.world_size

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or pl_module.monitor not in trainer.callback_metrics:
            return
        value = float(trainer.callback_metrics[pl_module.monitor])
        self.curve.append([trainer.current_epoch, trainer.global_step, value])
        tie_breaker = getattr(pl_module, "monitor_tie_breaker", None)
        tie = trainer.callback_metrics.get(tie_breaker[0]) if tie_breaker else None
        self.ties.append(None if tie is None else float(tie))

    def on_train_end(self, trainer, pl_module) -> None:
        """The best validation value goes to the loggers as `best/<monitor>`, the HParams table's metric
        (run_logger.py), logged while the loggers are open (they are finalized when fit ends)."""
        best = self.best(pl_module.monitor_mode, getattr(pl_module, "monitor_tie_breaker", None))
        if best is not None:
            for logger in trainer.loggers:
                logger.log_metrics({f"best/{pl_module.monitor}": best[2]}, step=trainer.global_step)

    def best(self, mode: str, tie_breaker: tuple[str, str] | None = None) -> list[float] | None:
        """The [epoch, step, value] of the curve's best point ("max" or "min" `mode`), if any: the first
        of equal values, or with `tie_breaker` (metric, mode) the one best by that metric, as the best
        checkpoint chooses (callbacks.BestCheckpoint), so the record names the checkpoint that was kept."""
        if not self.curve:
            return None
        value = (max if mode == "max" else min)(point[2] for point in self.curve)
        tied = [i for i, point in enumerate(self.curve) if point[2] == value]
        known = [i for i in tied if i < len(self.ties) and self.ties[i] is not None] if tie_breaker else []
        if len(tied) > 1 and known:
            best_tie = (min if tie_breaker[1] == "min" else max)(self.ties[i] for i in known)
            return self.curve[next(i for i in known if self.ties[i] == best_tie)]
        return self.curve[tied[0]]

    def record(self, trainer: L.Trainer, pl_module, test_metrics: dict[str, float] | None, facts: dict[str, Any]) -> dict:
        """The record of the finished run: `facts` (variant, seed, recipe, settings) first, then results."""
        best = None
        if self.curve:
            epoch, step, value = self.best(pl_module.monitor_mode, getattr(pl_module, "monitor_tie_breaker", None))
            best = {"epoch": int(epoch), "step": int(step), "value": value}
        flops = self.flops_per_batch
        batches = trainer.global_step * trainer.accumulate_grad_batches
        # Every batch's own count; from a run resumed from an older checkpoint, the first batch's times the batches.
        total = self.flops if self.flops else (flops * batches if flops else None)
        return {
            **facts,
            "monitor": pl_module.monitor,
            "mode": pl_module.monitor_mode,
            "curve": self.curve,
            "best": best,
            "final": self.curve[-1][2] if self.curve else None,
            "test": test_metrics,
            "test_checkpoint": None,  # finish_fit: "best" or "last", the weights the test scored
            "params": dict(pl_module.param_counts),
            "optimizer_steps": trainer.global_step,
            # Sequences (or images) per optimizer step over every rank, as trained: batch x accumulation x ranks.
            "global_batch_size": global_batch_size(trainer),
            "samples_seen": self.samples,
            "tokens_seen": int(self.tokens) or None,
            "flops_per_batch": flops,  # forward + backward of the first training batch on one device, counted by torch
            "train_flops": total * trainer.world_size if total else None,  # rank 0's batches times the ranks
            "peak_flops": peak_flops(trainer.strategy.root_device, trainer.precision),  # what MFU divides by
            "first_batch_sha256": self.first_batch,
            "data_fingerprints": data_fingerprints(trainer),
            "ngram_floors": ngram_floors(trainer),  # how far above counting the losses are (an LM's data only)
            "train_seconds": round(self.train_seconds, 3),
            "train_samples_per_second": round(self.samples / self.train_seconds, 2) if self.train_seconds else None,
            "wall_seconds": round(self.wall_seconds(), 3),  # every process's, up to the checkpoint it resumed from
            "provenance": provenance(devices=device_names(trainer)),
        }


def finish_fit(
    trainer: L.Trainer, model, datamodule, directory: Path | None, facts: dict, test: bool, previous: dict | None = None
) -> None:
    """What follows a fit: its record (taken before the test, as testing the best checkpoint restores that
    checkpoint's callback states), the best checkpoint's test scores when `test` (the final weights' when
    there is none; `test_checkpoint` says which), record.json and, beside it, the per-example outcomes of
    the best validation and of the test (per_example.py), named in the record's `per_example`.
    `previous`: the record of the finished run this fit resumed; if it trained no further, that record
    stays as it was (its timings are the training's, not this process's) and only gains test scores."""
    if trainer.fast_dev_run:
        # A debugging run of a batch or two: no record (compare would count it as a finished run) and no
        # last.ckpt (`--ckpt_path last` would continue it as if it were a real run).
        if trainer.is_global_zero:
            print("fast_dev_run: a debugging run, so nothing was recorded and no checkpoint was kept.", flush=True)
        return
    recorder = next((c for c in trainer.callbacks if isinstance(c, RunRecorder)), None)
    outcomes = next((c for c in trainer.callbacks if isinstance(c, PerExampleOutcomes)), None)
    validation = outcomes.validation if outcomes is not None else None  # the best validation's, before the test
    if previous is not None and previous.get("optimizer_steps") == trainer.global_step:
        record = dict(previous)
    else:
        record = recorder.record(trainer, model, None, facts) if recorder is not None else None
    if test:
        # A run that never validated (limit_val_batches=0) has no best checkpoint: its final weights are
        # tested, and the record says so.
        best = getattr(trainer.checkpoint_callback, "best_model_path", None)
        if not best and trainer.is_global_zero:
            print(
                "warning: no validation chose a best checkpoint, so --run.test scores the final weights "
                '(record.json: test_checkpoint "last").',
                file=sys.stderr,
                flush=True,
            )
        tested, weights = model, best or None
        if sharded_root(trainer) is not None:
            # FSDP's wrapping of `model` outlives fit (its top-level weights stay 1-D views of this rank's
            # shard, and Lightning would load the full checkpoint into them): a new copy of the module is
            # wrapped for the test, and the final weights come from last.ckpt.
            # (an FSDP run that tests after fit keeps checkpointing on: cli_input.check_strategy)
            tested, weights = model.new_copy(), best or str(last_checkpoint(trainer))
        results = trainer.test(tested, datamodule=datamodule, ckpt_path=weights, verbose=False)
        if record is not None:
            record["test"] = {k: float(v) for k, v in (results[0] if results else {}).items() if k.startswith("test/")}
            record["test_checkpoint"] = "best" if best else "last"
    if record is not None and directory is not None and trainer.is_global_zero:
        arrays = outcomes.arrays(validation) if outcomes is not None else {}
        if arrays:
            record["per_example"] = write_outcomes(directory, arrays)
        write_record(directory, record)


def global_batch_size(trainer: L.Trainer) -> int | None:
    """The DataModule's batch_size x accumulation x ranks; None for a DataModule without a batch_size."""
    size = getattr(trainer.datamodule, "hparams", {}).get("batch_size") if trainer.datamodule is not None else None
    return int(size) * trainer.accumulate_grad_batches * trainer.world_size if size else None


def data_fingerprints(trainer: L.Trainer) -> dict[str, str | None] | None:
    """{"train", "validation", "test"}: the DataModule's content hashes of its splits (datamodules'
    fingerprints()); None when the run's data came without them (a DataModule of the user's)."""
    fingerprints = getattr(trainer.datamodule, "fingerprints", None)
    try:
        return fingerprints() if callable(fingerprints) else None
    except NotImplementedError:
        return None


def ngram_floors(trainer: L.Trainer) -> dict | None:
    """The unigram and bigram losses of the run's language-modelling data (datamodules/ngram_floors.py);
    None for other data."""
    floors = getattr(trainer.datamodule, "ngram_floors", None)
    return floors() if callable(floors) else None


def device_names(trainer: L.Trainer) -> list[str]:
    """The devices this node's ranks ran on: ["cpu"], ["NVIDIA H200", "NVIDIA H200"], ..."""
    device = trainer.strategy.root_device
    if device.type == "cuda":
        return [torch.cuda.get_device_name(index) for index in trainer.device_ids]
    return [device.type] * max(1, len(trainer.device_ids))


def batch_fingerprint(batch) -> str:
    """sha256 of a batch's tensors (and strings), in order: which examples, in which order, a run began with."""
    digest = hashlib.sha256()

    def feed(item) -> None:
        if isinstance(item, torch.Tensor):
            digest.update(item.detach().cpu().contiguous().numpy().tobytes())
        elif isinstance(item, dict):
            for key in sorted(item):
                feed(item[key])
        elif isinstance(item, (list, tuple)):
            for part in item:
                feed(part)
        else:
            digest.update(repr(item).encode())

    feed(batch)
    return digest.hexdigest()
