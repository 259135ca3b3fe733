"""What every task shares: AdamW with warmup + cosine, parameter counts in the HParams tab, compile."""

from __future__ import annotations

import math

import lightning as L
import torch
from lightning.fabric.utilities.apply_func import apply_to_collection
from lightning.fabric.utilities.throughput import measure_flops
from torch import nn

from lit_attention.errors import ConfigError
from lit_attention.limits import LIMITS, check_limit
from lit_attention.modeling.config import ModelConfig
from lit_attention.modeling.variants import presets_help, resolve_spec

# 2-D parameters kept out of weight decay unless `decay_positions`: positions and the CLS token are
# lookup tables. W_A is never decayed: it starts at the identity, and decay would drag `super` toward
# zero mixing.
POSITION_NAMES = ("pos_embed", "src_pos", "tgt_pos", "cls_token")
VALUE_MIX_NAMES = ("value_mix",)
# What FSDP, activation checkpointing and torch.compile insert into parameter names of a wrapped model.
WRAPPER_PARTS = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod.")


class TaskModule(L.LightningModule):
    __doc__ = f"""Base LightningModule. A subclass takes its model family's config as `net` (ViTConfig,
    GPTConfig, ...: the architecture, defined once there), its own task arguments, and passes the rest
    here with `**optimization`; this class builds `self.model = model_class(config, attention)`.

    Args:
        attention: the attention variant: {presets_help()}
        lr: peak learning rate of AdamW (> 0).
        weight_decay: AdamW weight decay of the matrices (>= 0; biases and norms are never decayed, W_A
            and positions only when asked below).
        betas: AdamW betas.
        warmup_steps: linear warm-up from ~0 to `lr` over this many optimizer steps.
        min_lr_ratio: the cosine decays to lr * min_lr_ratio (in [0, 1]) at the trainer's last step.
        decay_positions: also decay position embeddings and the CLS token (nanoGPT and the
            nonlinear-query authors decay every parameter with two or more dimensions).
        decay_value_mix: also decay W_A, `super`'s position mixer, like the other matrices (the
            super-attention authors exempt it, so the default does too).
        compile: run the inner model under torch.compile.
    """

    def __init__(
        self,
        *,
        attention: str | dict = "standard",
        lr: float = 1e-3,
        weight_decay: float = 0.05,
        betas: tuple[float, float] = (0.9, 0.999),
        warmup_steps: int = 100,
        min_lr_ratio: float = 0.01,
        decay_positions: bool = False,
        decay_value_mix: bool = False,
        compile: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()  # the arguments of every __init__ of the subclass chain, `net` included
        self.config = self.config_class.of(self.hparams.net)  # a dict from a checkpoint or a Python caller
        # The hyper-parameters keep the config as plain values: checkpoints load with weights_only=True.
        self.save_hyperparameters({**self.hparams, "net": self.config.to_dict()})
        check_hyperparameters(self.hparams)
        self.spec = resolve_spec(attention)  # a bad variant fails here, in one sentence

    model: nn.Module
    monitor: str  # the validation metric that ranks runs and checkpoints
    monitor_mode: str  # "max" or "min"

    config_class: type[ModelConfig]  # the model family's config dataclass
    model_class: type[nn.Module]  # the plain model the task trains: model_class(config, attention)

    def build_model(self) -> nn.Module:
        """The plain model of this task's config and attention variant."""
        return self.model_class(self.config, self.spec)

    def new_copy(self) -> "TaskModule":
        """A new module of this task built from its saved hyper-parameters (its weights newly initialised).
        LightningCLI's own entries (`_class_path`, `_instantiator`) are left out."""
        return type(self)(**{name: value for name, value in self.hparams.items() if not name.startswith("_")})

    @staticmethod
    def forward_batch(model: nn.Module, batch):
        """The model's output for a batch (logits); used for FLOP counting and attention maps. The default
        is for batches `(inputs, targets)`; tasks with dict batches override it."""
        return model(batch[0])

    @staticmethod
    def batch_size_of(batch) -> int:
        return batch[0].shape[0]

    @staticmethod
    def tokens_of(batch) -> int | torch.Tensor | None:
        """Tokens (or other sequence items) in a batch, for items/s; None for images. A count that needs the
        batch's values is a tensor on the batch's device, read on the host only when it is logged."""
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
        # Throughput monitors read `flops_per_batch` for FLOP/s and MFU, and the run recorder sums it.
        self.flops_per_batch = self.flops_of(batch)

    def flops_of(self, batch) -> int:
        """FLOPs of one training step (forward + backward) on `batch`, counted by torch's FlopCounterMode on
        a meta-device copy of the model, once per distinct batch shape (lengths vary in text batches)."""
        counting = self.__dict__.setdefault("_flop_counting", {"model": None, "by_shape": {}})  # not a submodule
        shape = shape_signature(batch)
        if shape not in counting["by_shape"]:
            if counting["model"] is None:
                with torch.device("meta"):
                    counting["model"] = self.build_model()
            meta_model = counting["model"]
            meta_batch = apply_to_collection(batch, torch.Tensor, lambda t: t.to("meta"))
            counting["by_shape"][shape] = measure_flops(
                meta_model, lambda: self.forward_batch(meta_model, meta_batch), lambda out: out.float().sum()
            )
        return counting["by_shape"][shape]

    def _record_model_facts(self) -> None:
        """The parameter counts (total, non-embedding, attention) the logger and the run record report."""
        self.param_counts = self.model.parameter_counts()

    def configure_model(self) -> None:
        # Lightning calls this before FSDP wraps the model: the decay groups are decided here, while every
        # parameter still has its shape (FSDP makes each a 1-D view of its shard).
        if not hasattr(self, "_decayed_names"):
            self._decayed_names = self.decayed_parameter_names()
        # Compile the inner nn.Module in place: parameter names, and so checkpoints, stay the same.
        if self.hparams.get("compile") and not getattr(self, "_compiled", False):
            self.model.compile()
            self._compiled = True

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None) -> None:
        """Lightning's clipping, except by norm under FSDP, which Lightning refuses (its FSDP precision plugin
        has no handle on the root module): the root FSDP module's `clip_grad_norm_` computes the norm over
        every rank's shards, as `torch.nn.utils.clip_grad_norm_` does on one device."""
        root = sharded_root(self.trainer)
        if root is not None and gradient_clip_val and (gradient_clip_algorithm or "norm") == "norm":
            root.clip_grad_norm_(gradient_clip_val)
            return
        super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def configure_optimizers(self):
        # One source of truth for the schedule's length: the trainer's max_steps, or the optimizer
        # steps its epochs and accumulation make when max_steps is not set.
        optimizer, scheduler = self.optimizer_and_schedule(int(self.trainer.estimated_stepping_batches))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def optimizer_and_schedule(self, total_steps: int) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
        """AdamW over the model's parameters in two groups (decayed, not decayed) and the warm-up +
        cosine schedule that ends at `total_steps` (a step-wise LambdaLR)."""
        settings = self.hparams  # TaskModule.__init__'s arguments, as saved (and as a checkpoint restores them)
        decayed = getattr(self, "_decayed_names", None) or self.decayed_parameter_names()
        decay, no_decay = [], []
        for name, param in self.model.named_parameters():
            if not param.requires_grad:
                continue
            if name.endswith("_flat_param"):
                raise ConfigError(
                    "FSDP with use_orig_params=False merges parameters that are decayed with ones that "
                    "are not; use the strategy's default use_orig_params=True."
                )
            (decay if unwrapped_name(name) in decayed else no_decay).append(param)
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": settings.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=settings.lr,
            betas=tuple(settings.betas),
            fused=self.device.type == "cuda",
        )
        schedule = warmup_cosine(settings.warmup_steps, total_steps, settings.min_lr_ratio)
        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)

    def decayed_parameter_names(self) -> set[str]:
        """The names of the parameters AdamW decays: matrices (two or more dimensions), except, unless
        `decay_value_mix`, W_A and, unless `decay_positions`, the position embeddings and the CLS token.
        Read from the unwrapped model."""
        keep_out = (() if self.hparams.decay_value_mix else VALUE_MIX_NAMES) + (
            () if self.hparams.decay_positions else POSITION_NAMES
        )
        return {
            unwrapped_name(name)
            for name, param in self.model.named_parameters()
            if param.dim() >= 2 and not any(part in name for part in keep_out)
        }

    def log_loss(self, stage: str, loss: torch.Tensor, batch_size: int) -> None:
        """`<stage>/loss`, its epoch mean over every rank's batches (weighted by batch size) under DDP.
        Training logs `train/loss_step` (this rank's: syncing it would be an all-reduce every step) and
        `train/loss_epoch`, synced once, at the epoch's end."""
        if stage == "train":
            # Not prog_bar: Lightning would read it on the host every step (our ProgressBar shows it every N).
            self.log("train/loss_step", loss, on_step=True, on_epoch=False, batch_size=batch_size)
            self.log("train/loss_epoch", loss, on_step=False, on_epoch=True, sync_dist=True, batch_size=batch_size)
        else:
            self.log(f"{stage}/loss", loss, on_epoch=True, prog_bar=True, sync_dist=True, batch_size=batch_size)

    def log_learning_rate(self) -> None:
        # Only on the steps the loggers write: `self.log` copies a Python number to the device, and on a
        # GPU that copy waits for the device.
        if (self.trainer.global_step + 1) % max(1, self.trainer.log_every_n_steps) == 0:
            self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"], on_step=True, on_epoch=False)


def sharded_root(trainer) -> nn.Module | None:
    """The root FullyShardedDataParallel module a trainer's strategy trains, or None (no FSDP)."""
    from torch.distributed.fsdp import FullyShardedDataParallel

    model = getattr(trainer.strategy, "model", None)
    return model if isinstance(model, FullyShardedDataParallel) else None


def shape_signature(batch):
    """What a batch's FLOPs depend on: the shapes and dtypes of its tensors, where they are in the batch."""
    if isinstance(batch, torch.Tensor):
        return tuple(batch.shape), batch.dtype
    if isinstance(batch, dict):
        return tuple((key, shape_signature(value)) for key, value in sorted(batch.items()))
    if isinstance(batch, (list, tuple)):
        return tuple(shape_signature(item) for item in batch)
    return None  # texts and other values: no FLOPs


def unwrapped_name(name: str) -> str:
    """A parameter's name in the plain model, whatever wrapped it (FSDP, activation checkpointing, compile)."""
    for part in WRAPPER_PARTS:
        name = name.replace(part, "")
    return name


def check_hyperparameters(hparams) -> None:
    """One sentence for the first of the task's own hyper-parameters outside its limits (lit_attention/limits.py,
    shared with the model configs, which check theirs), checked when a task is built (on the meta device by
    the CLI, before any data work)."""
    for name in LIMITS:
        if name in hparams:
            check_limit(name, hparams[name])


def warmup_cosine(warmup_steps: int, total_steps: int, min_ratio: float):
    """Multiplier of the peak learning rate: linear from ~0 to 1 over `warmup_steps`, then cosine
    down to `min_ratio` at `total_steps`, flat afterwards."""

    def factor(step: int) -> float:
        if step < warmup_steps:  # warmup_steps > 0 here
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
