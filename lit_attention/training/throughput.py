"""Training throughput in TensorBoard: samples/s, items/s (tokens), FLOP/s and MFU, read every
`log_every_n_steps` steps.

Lightning's ThroughputMonitor waits for the GPU (`torch.cuda.synchronize`) and reads the batch's length
on the host after every batch, so every training step stalls the host once or twice. This callback
counts batches, samples and FLOPs on the host from shapes alone, keeps token counts on the device, and
waits for the device only when it logs, timing the whole interval since the last log.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import lightning as L
import torch
from lightning.fabric.utilities.throughput import Throughput

from lit_attention.training.peak_flops import peak_flops


class TrainingThroughput(L.Callback):
    """Rates of the last `log_every_n_steps` optimizer steps of this device (rank 0's), validation time
    left out. MFU is logged where the peak FLOP/s of the GPU is known (peak_flops.py). `batch_size_fn` and
    `length_fn` read a batch's samples and items (tokens; a tensor is summed on the device)."""

    def __init__(self, batch_size_fn: Callable, length_fn: Callable | None = None) -> None:
        self.batch_size_fn, self.length_fn = batch_size_fn, length_fn
        self.peak: dict | None = None
        self._throughput: Throughput | None = None

    def setup(self, trainer, pl_module, stage: str) -> None:
        self.peak = peak_flops(trainer.strategy.root_device, trainer.precision)
        available = self.peak["flops_per_second"] if self.peak else None
        # Two readings make a rate: each is logged over the interval since the one before.
        self._throughput = Throughput(available_flops=available, world_size=trainer.world_size, window_size=2)

    def on_train_start(self, trainer, pl_module) -> None:
        self._throughput.reset()
        self._started = time.perf_counter()
        self._paused = 0.0  # seconds spent validating, not training
        self._batches = self._samples = 0
        self._items: int | torch.Tensor = 0
        self._flops = 0  # since the last reading
        self._read_at_step = trainer.global_step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not trainer.is_global_zero:
            return
        self._batches += 1
        self._samples += self.batch_size_fn(batch)
        if self.length_fn is not None:
            self._items = self._items + self.length_fn(batch)
        self._flops += getattr(pl_module, "flops_per_batch", 0) or 0
        step = trainer.global_step
        if step != self._read_at_step and step % max(1, trainer.log_every_n_steps) == 0:
            self._read_at_step = step
            self._read(trainer)

    def _read(self, trainer) -> None:
        if trainer.strategy.root_device.type == "cuda":
            torch.cuda.synchronize()  # the interval's work is done: only now is the clock right
        self._throughput.update(
            time=time.perf_counter() - self._started - self._paused,
            batches=self._batches,
            samples=self._samples,
            lengths=None if self.length_fn is None else int(self._items),
            flops=self._flops or None,
        )
        self._flops = 0
        metrics = {f"train/{name}": value for name, value in self._throughput.compute().items()}
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=trainer.global_step)

    def on_validation_start(self, trainer, pl_module) -> None:
        self._validation_started = time.perf_counter()

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking and hasattr(self, "_paused"):
            self._paused += time.perf_counter() - self._validation_started
