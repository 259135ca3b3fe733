"""The callback that keeps a run's per-example outcomes (outcome_files.py writes them beside its record).

A task's validation and test steps return `{"per_example": {name: tensor of one value per item}}`
(classification: whether each item was right and its loss; language models: each window's loss and
counts). This callback pairs each batch with the dataset indices its loader's batch sampler gave it
(under DDP, Lightning's distributed sampler: each rank its own share), gathers every rank's share at the
end of the loop, and orders them by index, each item once (the distributed sampler repeats a few items
to even the shares), so a file holds the same items in the same order in every run on the same data.

Validation outcomes are kept from the validation the record calls best (RunRecorder.best, the one the
best checkpoint was saved at, the weights the test scores); they travel with every checkpoint, so a
resumed run keeps them. Test outcomes are those of the last test.
"""

from __future__ import annotations

import lightning as L
import numpy as np
import torch
from lightning.pytorch.trainer.states import TrainerFn


def gather_from_ranks(trainer: L.Trainer, share):
    """Every rank's `share` (any picklable value), in rank order: one collective on every rank, however
    many batches each ran; [share] in a run of one process."""
    if trainer.world_size == 1:
        return [share]
    shares = [None] * trainer.world_size
    torch.distributed.all_gather_object(shares, share)
    return shares


class PerExampleOutcomes(L.Callback):
    """Collects the per-example outcomes of validation and test loops (see the module's docstring).
    `recorder`: the run's RunRecorder (recorder.py, which imports this module), whose best point says
    which validation to keep; None keeps the latest."""

    def __init__(self, recorder=None) -> None:
        self.recorder = recorder
        self.validation: dict[str, np.ndarray] | None = None  # of the best validation so far
        self.test: dict[str, np.ndarray] | None = None
        self._batches: list[list[int]] | None = None  # the current loop's dataset indices, batch by batch
        self._pending: list[tuple[list[int], dict[str, torch.Tensor]]] = []
        self._curve_length = 0  # of the recorder's curve when the current validation began

    def state_dict(self) -> dict:
        kept = self.validation or {}
        return {"validation": {name: torch.from_numpy(values) for name, values in kept.items()} or None}

    def load_state_dict(self, state: dict) -> None:
        kept = state.get("validation")
        self.validation = {name: values.numpy() for name, values in kept.items()} if kept else None

    def _start(self, loaders) -> None:
        self._pending = []
        # A single loader with a batch sampler is what the DataModules give; anything else is not recorded.
        sampler = getattr(loaders, "batch_sampler", None)
        self._batches = None if sampler is None else [list(indices) for indices in sampler]

    def _keep_batch(self, outputs, batch_idx: int) -> None:
        if self._batches is None or not isinstance(outputs, dict) or "per_example" not in outputs:
            return
        if batch_idx < len(self._batches):  # values stay on the device until the loop ends: one copy then
            self._pending.append((self._batches[batch_idx], {k: v.detach() for k, v in outputs["per_example"].items()}))

    def _gathered(self, trainer: L.Trainer) -> dict[str, np.ndarray] | None:
        """Every rank's outcomes as arrays "index", "<name>"..., ordered by index, each index once."""
        share = None
        if self._pending:
            names = self._pending[0][1].keys()
            share = {
                "index": np.asarray([i for indices, _ in self._pending for i in indices], dtype=np.int64),
                **{name: torch.cat([values[name].reshape(-1) for _, values in self._pending]).cpu().numpy() for name in names},
            }
        self._pending, self._batches = [], None
        shares = [s for s in gather_from_ranks(trainer, share) if s is not None]
        if not shares:
            return None
        merged = {name: np.concatenate([s[name] for s in shares]) for name in shares[0]}
        _, first = np.unique(merged["index"], return_index=True)  # sorted by index, first occurrence of each
        return {name: values[first] for name, values in merged.items()}

    def on_validation_epoch_start(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            self._batches = None
            return
        recorder = self.recorder
        self._curve_length = len(recorder.curve) if recorder is not None else 0
        self._start(trainer.val_dataloaders)

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self._keep_batch(outputs, batch_idx)

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or self._batches is None:
            return
        outcomes = self._gathered(trainer)
        if outcomes is not None and self._is_best_validation(trainer, pl_module):
            self.validation = outcomes

    def _is_best_validation(self, trainer, pl_module) -> bool:
        """Whether the validation just done is the record's best point (the recorder, listed before this
        callback, has already added it to the curve); outside fit, or where nothing records a curve, the
        latest validation."""
        recorder = self.recorder
        if recorder is None or trainer.state.fn != TrainerFn.FITTING:
            return True
        if len(recorder.curve) <= self._curve_length:  # the recorder did not add this validation
            return False
        return recorder.best(pl_module.monitor_mode, getattr(pl_module, "monitor_tie_breaker", None)) is recorder.curve[-1]

    def on_test_epoch_start(self, trainer, pl_module) -> None:
        self._start(trainer.test_dataloaders)

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self._keep_batch(outputs, batch_idx)

    def on_test_end(self, trainer, pl_module) -> None:
        if self._batches is not None:
            self.test = self._gathered(trainer)

    def arrays(self, validation: dict[str, np.ndarray] | None) -> dict[str, np.ndarray]:
        """What the file holds: `validation`'s arrays as "val_<name>" and the last test's as "test_<name>"."""
        found = {}
        for split, outcomes in (("val", validation), ("test", self.test)):
            for name, values in (outcomes or {}).items():
                found[f"{split}_{name}"] = values
        return found
