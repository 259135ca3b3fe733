"""Checkpoints a killed run can resume from without losing or changing anything.

* `atomic_save` / `AtomicCheckpointIO`: every checkpoint is written to a temporary file in its own
  directory, flushed to disk, then renamed over the old one, so a kill mid-write leaves the previous
  checkpoint intact, never a truncated one.
* `LastCheckpoint`: keeps `last.ckpt` current: every N optimizer steps, after every validation, at
  the end of every epoch, and when SIGTERM stops training (preemption.py).
* `ExactResume`: the global random states (random_states.py) travel with every checkpoint
  and are restored when training resumes, and so does the data position in a case Lightning misses.
* `read_checkpoint` / `checkpoint_mismatch`: a checkpoint passed to `--ckpt_path` is read and
  compared with the configured model before any data is prepared.

Model, optimizer, LR schedule and step counters are Lightning's own checkpoint content; the position
in the training data is the training DataLoader's state (see `datamodules/loaders.py`).
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.fabric.plugins import CheckpointIO, TorchCheckpointIO
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.exceptions import SIGTERMException

from lit_attention.modeling.attention import resolve_spec
from lit_attention.errors import ConfigError
from lit_attention.training.lightning_internals import load_pending_loader_states, validation_follows
from lit_attention.training.random_states import gathered_random_states, rank_and_world, restore_own_states, seed_own_stream
from lit_attention.atomic_files import replace_file
from lit_attention.training.run_dirs import CHECKPOINTS, LAST, newest_version
from lit_attention.training.tasks.base import TaskModule


# ---------------------------------------------------------------------------------------- writing


def atomic_save(checkpoint: Any, path: str | os.PathLike) -> None:
    """`torch.save` that never leaves a partial file at `path` (atomic_files.replace_file)."""
    replace_file(path, lambda file: torch.save(checkpoint, file))


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, with `atomic_save` for local paths (remote URLs keep Lightning's)."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        if storage_options is not None or "://" in str(path):
            return super().save_checkpoint(checkpoint, path, storage_options)
        atomic_save(checkpoint, path)


def with_atomic_checkpoints(plugins) -> list:
    """The trainer's plugins plus `AtomicCheckpointIO`, unless a checkpoint writer is configured already."""
    plugins = [] if plugins is None else list(plugins) if isinstance(plugins, (list, tuple)) else [plugins]
    if not any(isinstance(plugin, CheckpointIO) for plugin in plugins):
        plugins.append(AtomicCheckpointIO())
    return plugins


# ---------------------------------------------------------------------------------------- callbacks


class LastCheckpoint(Checkpoint):
    """Keeps `<checkpoint dir>/last.ckpt` current, so that a killed run loses at most `every_n_steps` steps.

    A `Checkpoint`, so that Lightning runs it after the `ModelCheckpoint` listed before it: at an
    epoch's end the best checkpoint is chosen first, and last.ckpt records that choice (a resumed
    run otherwise tests a best checkpoint that was already replaced and deleted).

    Written every `every_n_steps` optimizer steps (None: never in between), after every validation
    and at the end of every training epoch, each time at a point Lightning resumes from exactly:

    * a save due just before a validation waits for the validation's end (Lightning resumes a
      checkpoint taken before a validation *after* it, skipping it);
    * the epoch-end save is taken in `on_train_epoch_end` for epoch-based runs, but after the
      epoch's last batch for step-based runs (`max_steps` set), which Lightning would otherwise
      resume one batch into an epoch that is over (it re-enters the finished epoch).

    The directory is the one of the run's `ModelCheckpoint` (`<run>/checkpoints`).
    """

    def __init__(self, every_n_steps: int | None = 500, dirpath: str | None = None) -> None:
        if every_n_steps is not None and every_n_steps < 1:
            raise ConfigError(f"checkpoint_every_n_steps={every_n_steps} is invalid; give a positive number of steps or null.")
        self.every_n_steps, self.dirpath = every_n_steps, dirpath
        self._saved_at_step: int | None = None

    def path(self, trainer: L.Trainer) -> Path:
        if self.dirpath is None:
            model_checkpoint = trainer.checkpoint_callback
            if model_checkpoint is not None and model_checkpoint.dirpath:
                self.dirpath = model_checkpoint.dirpath  # already the same on every rank
            else:
                self.dirpath = os.path.join(trainer.log_dir or trainer.default_root_dir, "checkpoints")
            if trainer.is_global_zero:
                remove_partial_writes(Path(self.dirpath))
        return Path(self.dirpath) / LAST

    def save(self, trainer: L.Trainer) -> None:
        if trainer.fast_dev_run:
            return  # a debugging run (as Lightning's own ModelCheckpoint does): nothing to resume from
        if trainer.global_step == self._saved_at_step:
            return  # nothing new since the last save
        trainer.save_checkpoint(self.path(trainer), weights_only=False)  # on every rank: some strategies gather state
        self._saved_at_step = trainer.global_step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if _epoch_over(trainer):
            due = _step_based(trainer)  # epoch-based runs save the epoch's end in on_train_epoch_end
        else:
            due = self.every_n_steps is not None and trainer.global_step % self.every_n_steps == 0
        if due and not validation_follows(trainer):
            self.save(trainer)

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:
            return
        if _step_based(trainer) or not _epoch_over(trainer):
            self.save(trainer)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if not _step_based(trainer):
            self.save(trainer)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        """SIGTERM: Lightning stops after the step in progress and the validation it triggered, and that
        point is kept. Not when the signal stopped a validation midway, nor after the last batch of an
        epoch of an epoch-based run (a point this class never saves at, see above): last.ckpt then stays
        at the save before."""
        if not isinstance(exception, SIGTERMException) or trainer.state.fn != TrainerFn.FITTING:
            return
        if trainer.training and trainer.global_step > 0 and (_step_based(trainer) or not _epoch_over(trainer)):
            self.save(trainer)


def last_checkpoint(trainer: L.Trainer) -> Path | None:
    """The run's last.ckpt as its LastCheckpoint writes it (None: the run keeps no checkpoints)."""
    return next((c.path(trainer) for c in trainer.callbacks if isinstance(c, LastCheckpoint)), None)


def _step_based(trainer: L.Trainer) -> bool:
    """Whether the run's length is a number of steps (Lightning's "iteration-based training")."""
    return trainer.max_steps is not None and trainer.max_steps >= 0


def _epoch_over(trainer: L.Trainer) -> bool:
    """Whether the batch just trained ends the epoch (its last batch, or the last step of the run)."""
    max_steps_reached = _step_based(trainer) and trainer.global_step >= trainer.max_steps
    return trainer.fit_loop.epoch_loop.batch_progress.is_last_batch or max_steps_reached


def remove_partial_writes(directory: Path) -> None:
    """Delete temporary files `atomic_save` left behind when a process died mid-write."""
    for partial in directory.glob(".*.ckpt.*.tmp"):
        partial.unlink(missing_ok=True)


class ExactResume(L.Callback):
    """Restores what Lightning's own resume leaves out.

    * The global random states (torch, CUDA, numpy, Python) travel with every checkpoint and are set
      back the moment Lightning restores the callbacks, before anything of the resumed run draws from
      them: the sanity check draws inside Lightning's `isolate_rng`, and the first training batch
      (fetched ahead when the loop sets up its data) then gets the augmentation the uninterrupted run
      gave it. Under DDP the checkpoint holds every rank's states, and each rank resumes from its own.
    * A new run's ranks draw their own dropout masks (`seed_own_stream`, at fit start: after the
      model is built and sharded alike on every rank; a resumed run's states come from the checkpoint).
    * The training DataLoader's position: Lightning loads it only while it builds the loader during
      `fit`, but `trainer.estimated_stepping_batches` (read in `configure_optimizers` when no
      `max_steps` is given) builds the loader before the checkpoint is restored. The saved position
      is then loaded here, at train start, still before the first batch is drawn.
    """

    def state_dict(self) -> dict[str, Any]:
        return gathered_random_states()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for note in restore_own_states(state_dict):  # on every rank: what one rank lost is its own
            print(f"note (rank {rank_and_world()[0]}): {note}", file=sys.stderr, flush=True)

    def on_fit_start(self, trainer, pl_module) -> None:
        if trainer.ckpt_path is None:
            seed_own_stream(trainer.global_rank)

    def on_train_start(self, trainer, pl_module) -> None:
        load_pending_loader_states(trainer)


# ---------------------------------------------------------------------------------------- finding

# `--ckpt_path` values Lightning resolves itself, from places this suite's run layout does not use.
LIGHTNING_CHECKPOINT_NAMES = ("hpc", "registry")


def resolve_checkpoint(ckpt_path: str | None, base: Path, command: str) -> str | None:
    """The checkpoint file `--ckpt_path` names for `command` in the runs under `base`
    (`<root>/<recipe>/<variant>/seed_<n>`): `last` and `best` are the newest training run's
    `last.ckpt` and best checkpoint, anything else a path. `fit --ckpt_path last` with nothing to
    resume returns None (a new run), so a preemptible job can always pass it."""
    if ckpt_path is None:
        return None
    if not str(ckpt_path).strip():
        raise ConfigError(f"--ckpt_path {ckpt_path!r} is empty; give last, best or a checkpoint's path, or leave it out.")
    if str(ckpt_path).split(":")[0] in LIGHTNING_CHECKPOINT_NAMES:
        raise ConfigError(
            f"--ckpt_path {ckpt_path!r} names Lightning's own SLURM or registry checkpoints, which "
            "lit-attention runs do not write; give last (a preempted run resumes from it), best or a path."
        )
    if ckpt_path not in ("last", "best"):
        return str(ckpt_path)
    newest = newest_version(base)
    if ckpt_path == "best":
        if command == "fit":
            raise ConfigError(
                "fit --ckpt_path best would restart from an earlier point of a run; "
                "resume with --ckpt_path last, or pass a checkpoint's path."
            )
        found = sorted((newest / CHECKPOINTS).glob("best-*.ckpt"), key=os.path.getmtime) if newest else []
        if not found:
            raise ConfigError(
                f"--ckpt_path best: there is no best checkpoint in {str(newest or base)!r}; "
                "train the run first, or pass a checkpoint's path."
            )
        return str(found[-1])
    last = newest / CHECKPOINTS / LAST if newest else None
    if last is not None and last.is_dir():
        raise ConfigError(directory_sentence(last))
    if last is not None and last.is_file():
        rank_zero_info(f"--ckpt_path last: {last}")
        return str(last)
    if command != "fit":
        raise ConfigError(
            f"--ckpt_path last: there is no checkpoint in {str(newest or base)!r} to {command}; "
            "train the run first, or pass a checkpoint's path."
        )
    rank_zero_info(f"--ckpt_path last: nothing to resume in {newest or base}; starting a new run.")
    return None


# ---------------------------------------------------------------------------------------- reading


def directory_sentence(path: str | os.PathLike) -> str:
    """What to say of a checkpoint path that is a directory: a run directory's own last.ckpt when it has
    one (looked for without walking a big tree), else that a sharded checkpoint is not read."""
    inside = [Path(path) / CHECKPOINTS / LAST, Path(path) / LAST, *sorted(Path(path).glob("*.ckpt"))]
    found = next((file for file in inside if file.is_file()), None)
    if found is not None:
        return (
            f"Checkpoint {str(path)!r} is a directory; pass a checkpoint file, such as {str(found)!r}, "
            "or last or best for this recipe's newest run."
        )
    return (
        f"Checkpoint {str(path)!r} is a directory; pass a checkpoint file, such as a run directory's "
        "checkpoints/last.ckpt, or last or best for this recipe's newest run (a sharded checkpoint, as FSDP's "
        "state_dict_type 'sharded' writes, is neither written nor read by lit-attention)."
    )


def read_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """The checkpoint at `path`, memory-mapped (cheap even for big models), or a ConfigError saying why not."""
    if Path(path).is_dir():
        raise ConfigError(directory_sentence(path))
    if not Path(path).is_file():
        raise ConfigError(
            f"Checkpoint {str(path)!r} does not exist; pass the path of a .ckpt file, or 'last' to resume the latest run of this recipe."
        )
    try:
        checkpoint = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
    except Exception as error:  # truncated zip, garbage bytes, foreign pickle: all mean "unusable"
        reason = str(error).strip().splitlines()[0][:120] if str(error).strip() else type(error).__name__
        raise ConfigError(
            f"Checkpoint {str(path)!r} cannot be read ({reason}); it is corrupted or not a PyTorch checkpoint, "
            "so pass another one (e.g. an earlier checkpoint of the run) or start without --ckpt_path."
        ) from None
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("state_dict"), dict):
        raise ConfigError(
            f"Checkpoint {str(path)!r} holds no model state_dict, so it is not a Lightning checkpoint; pass a .ckpt written by lit-attention."
        )
    return checkpoint


# Hyper-parameters that shape only training, not the weights: a difference there is not a mismatch.
TRAINING_ONLY = {name for name in inspect.signature(TaskModule.__init__).parameters if name != "self"} | {
    "label_smoothing",
    "net.dropout",
    "net.drop_path",
    "beam_size",
    "bleu_batches",
    "monitor",
    "max_new_tokens",
    "temperature",
    "top_k",
    "top_p",
}


def read_fitting_checkpoint(path: str | Path, model) -> dict:
    """The checkpoint at `path` (read_checkpoint), refused in one sentence unless it fits `model`, the
    configured model on the meta device (checkpoint_mismatch)."""
    saved = read_checkpoint(path)
    differences = checkpoint_mismatch(saved, model)
    if differences:
        raise ConfigError(
            f"Checkpoint {str(path)!r} does not fit the configured model ({'; '.join(differences)}); "
            "configure the model it was trained with, or start without --ckpt_path."
        )
    return saved


def checkpoint_mismatch(checkpoint: dict[str, Any], model: torch.nn.Module) -> list[str]:
    """How the checkpoint's model differs from `model` (a LightningModule, possibly on the meta
    device), in words; empty when its weights fit. Two variants can have the same weight shapes
    (`standard` and `residual_query`), so the attention variant is compared by name too."""
    saved = _flat(checkpoint.get("hyper_parameters") or {})
    wanted = _flat(getattr(model, "hparams", {}))
    differences = []
    if "attention" in saved and "attention" in wanted:
        saved_name, wanted_name = _variant_name(saved["attention"]), _variant_name(wanted["attention"])
        if saved_name != wanted_name:
            differences.append(f"attention is {saved_name!r} in the checkpoint but {wanted_name!r} here")
    saved_shapes = {k: tuple(v.shape) for k, v in checkpoint["state_dict"].items() if hasattr(v, "shape")}
    wanted_shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if saved_shapes == wanted_shapes:
        return differences
    for key in sorted(set(saved) & set(wanted) - TRAINING_ONLY - {"attention"}):
        if saved[key] != wanted[key]:
            differences.append(f"{key} is {saved[key]!r} in the checkpoint but {wanted[key]!r} here")
    if not differences:  # no hyper-parameter explains it: name the weights themselves
        differences += _shape_differences(saved_shapes, wanted_shapes)
    return differences


def _flat(hparams) -> dict[str, Any]:
    """The hyper-parameters with the model config's fields as `net.<field>` (so a difference names the field)."""
    flat = {k: v for k, v in dict(hparams).items() if k != "net"}
    flat.update({f"net.{k}": v for k, v in dict(hparams.get("net") or {}).items()})
    return flat


def _variant_name(attention: Any) -> str:
    try:
        return resolve_spec(attention).name
    except ConfigError:
        return str(attention)


def _shape_differences(saved: dict[str, tuple], wanted: dict[str, tuple], limit: int = 3) -> list[str]:
    differences = [
        f"{k} has shape {list(saved[k])} in the checkpoint but {list(wanted[k])} here"
        for k in sorted(set(saved) & set(wanted))
        if saved[k] != wanted[k]
    ]
    differences += [f"weight {k} is missing from the checkpoint" for k in sorted(set(wanted) - set(saved))]
    differences += [f"the checkpoint has an extra weight {k}" for k in sorted(set(saved) - set(wanted))]
    return differences[:limit]


def trains_further(checkpoint: dict[str, Any], max_steps: int | None, max_epochs: int | None) -> bool:
    """Whether fitting from `checkpoint` with these limits would train at all: Lightning stops at
    `max_steps` optimizer steps or `max_epochs` processed epochs (1000 when neither is set)."""
    step = int(checkpoint.get("global_step") or 0)
    try:
        epochs = int(checkpoint["loops"]["fit_loop"]["epoch_progress"]["current"]["processed"])
    except (KeyError, TypeError, ValueError):
        epochs = int(checkpoint.get("epoch") or 0)
    if max_epochs is None:
        max_epochs = 1000 if max_steps in (None, -1) else -1
    steps_left = max_steps in (None, -1) or max_steps > step
    epochs_left = max_epochs == -1 or max_epochs > epochs
    return steps_left and epochs_left


def logging_step(checkpoint: dict[str, Any]) -> int | None:
    """The step at which the checkpoint's run logged its last TensorBoard point, if recorded."""
    try:
        return int(checkpoint["loops"]["fit_loop"]["epoch_loop.state_dict"]["_batches_that_stepped"])
    except (KeyError, TypeError, ValueError):
        return None
