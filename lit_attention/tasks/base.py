"""What every task shares: AdamW with warmup + cosine, parameter counts in the HParams tab, compile."""

from __future__ import annotations

import math

import lightning as L
import torch
from lightning.fabric.utilities.apply_func import apply_to_collection
from lightning.fabric.utilities.throughput import measure_flops
from torch import nn

from lit_attention.attention import resolve_spec
from lit_attention.errors import ConfigError

# 2-D parameters that are still kept out of weight decay: positions and the CLS token are lookup
# tables, and W_A starts at the identity, so decay would drag `super` toward zero mixing.
NO_DECAY_NAMES = ("pos_embed", "src_pos", "tgt_pos", "cls_token", "value_mix")


class TaskModule(L.LightningModule):
    """Base LightningModule. Subclasses build `self.model` (a plain nn.Module with
    `parameter_counts()`) after calling `self.save_hyperparameters()` with these optimizer arguments:
    lr, weight_decay, betas, warmup_steps, max_steps, min_lr_ratio, compile."""

    model: nn.Module
    monitor: str  # the validation metric that ranks runs and checkpoints
    monitor_mode: str  # "max" or "min"

    def build_model(self) -> nn.Module:
        """The plain model described by `self.hparams`."""
        raise NotImplementedError

    @staticmethod
    def forward_batch(model: nn.Module, batch):
        """The model's output for a batch (logits); used for FLOP counting and attention maps."""
        raise NotImplementedError

    @staticmethod
    def batch_size_of(batch) -> int:
        raise NotImplementedError

    @staticmethod
    def tokens_of(batch) -> int | None:
        """Tokens (or other sequence items) in a batch, for items/s; None for images."""
        return None

    def check_batch(self, batch) -> None:
        """Raise a ConfigError when a batch does not fit the model (token ids past the vocabulary,
        sequences past max_len, images of another size). Subclasses call the helpers below."""

    def _check_first_batch(self, batch, stage: str) -> None:
        # Only the first batch of each stage: one device sync per run, not one per step.
        checked = self.__dict__.setdefault("_checked_stages", set())
        if stage not in checked:
            self.check_batch(batch)
            checked.add(stage)

    def on_validation_batch_start(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        self._check_first_batch(batch, "validation")  # the sanity check runs first: before any training

    def on_test_batch_start(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        self._check_first_batch(batch, "test")

    def on_train_batch_start(self, batch, batch_idx: int) -> None:
        self._check_first_batch(batch, "train")
        # FLOPs of one training step (forward + backward) counted by torch's FlopCounterMode on a
        # meta-device copy, from the real batch shape: Lightning's ThroughputMonitor reads
        # `flops_per_batch` to log FLOP/s and, on GPUs, MFU.
        if not hasattr(self, "flops_per_batch"):
            with torch.device("meta"):
                meta_model = self.build_model()
            meta_batch = apply_to_collection(batch, torch.Tensor, lambda t: t.to("meta"))
            self.flops_per_batch = measure_flops(
                meta_model, lambda: self.forward_batch(meta_model, meta_batch), lambda out: out.float().sum()
            )

    def _record_model_facts(self) -> None:
        """Add the variant's name and parameter counts to the hyper-parameters the logger sees.

        They go to `hparams_initial` only (what Lightning logs), not to `hparams` (what
        `load_from_checkpoint` passes back to `__init__`).
        """
        self.param_counts = self.model.parameter_counts()
        facts = {f"params/{name}": count for name, count in self.param_counts.items()}
        facts["attention_name"] = resolve_spec(self.hparams.attention).name
        self._hparams_initial.update(facts)

    def configure_model(self) -> None:
        # Compile the inner nn.Module in place: parameter names, and so checkpoints, stay the same.
        if self.hparams.get("compile") and not getattr(self, "_compiled", False):
            self.model.compile()
            self._compiled = True

    def configure_optimizers(self):
        decay, no_decay = [], []
        for name, param in self.model.named_parameters():
            if not param.requires_grad:
                continue
            keep_out = param.dim() < 2 or any(part in name for part in NO_DECAY_NAMES)
            (no_decay if keep_out else decay).append(param)
        hp = self.hparams
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": hp.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=hp.lr,
            betas=tuple(hp.betas),
            fused=self.device.type == "cuda",
        )
        total = hp.max_steps or int(self.trainer.estimated_stepping_batches)
        schedule = warmup_cosine(hp.warmup_steps, total, hp.min_lr_ratio)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def log_learning_rate(self) -> None:
        self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"], on_step=True, on_epoch=False)


def warmup_cosine(warmup_steps: int, total_steps: int, min_ratio: float):
    """Multiplier of the peak learning rate: linear from ~0 to 1 over `warmup_steps`, then cosine
    down to `min_ratio` at `total_steps`, flat afterwards."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def check_token_ids(what: str, ids: torch.Tensor, vocab_size: int, ignore: int | None = None) -> None:
    """Every id of `ids` (except `ignore`) is a row of a vocab_size embedding."""
    if ignore is not None:
        ids = ids[ids != ignore]
    if ids.numel() == 0:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ConfigError(
            f"The {what} hold token id {bad}, out of range for the model's vocab_size={vocab_size} (valid ids are "
            f"0 to {vocab_size - 1}); build the model with vocab_size > {max(high, 0)} or re-tokenize the data with its tokenizer."
        )


def check_length(what: str, length: int, max_len: int, attention) -> None:
    """A sequence fits the positions the model was built for (and W_A's size for value-mixing variants)."""
    if length > max_len:
        spec = resolve_spec(attention)
        limit = f"max_len={max_len}" + (f", the size of W_A of {spec.name!r}" if spec.value_mix else "")
        raise ConfigError(
            f"The {what} have {length} positions, more than {limit}; use at most {max_len} positions "
            f"or build the model with max_len >= {length}."
        )
