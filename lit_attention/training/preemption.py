"""What a run does when it is sent SIGTERM (what SLURM and most schedulers send before a preemption or at
a time limit, and what `kill` sends by default).

Lightning's own mechanism does the stopping: its signal handler sets `trainer.received_sigterm`, and the
training loop raises `SIGTERMException` once the step in progress is done (and the validation it
triggers, if any). `LastCheckpoint.on_exception` then writes last.ckpt (atomically, like every
checkpoint); `PredictionWriter` stops `predict` after the batch it has just written, a check Lightning's
prediction loop lacks. `stop` says in one sentence what was kept and the command that goes on from
there, and exits with SIGTERM_STATUS, so that no scheduler, job script or `compare` reads the run as done.
"""

from __future__ import annotations

import shlex
import signal
import sys
from pathlib import Path

import torch
from lightning.pytorch.utilities.exceptions import SIGTERMException

from lit_attention.training.run_dirs import CHECKPOINTS, LAST

# 128 + 15: what a shell reports for a process ended by SIGTERM; SLURM's RequeueExit can name it.
SIGTERM_STATUS = 128 + signal.SIGTERM

__all__ = ["SIGTERMException", "SIGTERM_STATUS", "resume_command", "stop"]


def resume_command(words: list[str]) -> str:
    """`lit-attention <words>` (the command line, its subcommand first) with `--ckpt_path last` in place
    of any --ckpt_path given."""
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word == "--ckpt_path":
            skip = True
        elif not word.startswith("--ckpt_path="):
            kept.append(word)
    return shlex.join(["lit-attention", *kept, "--ckpt_path", "last"])


def checkpoint_step(path: Path) -> int | None:
    try:
        return int(torch.load(path, map_location="cpu", mmap=True, weights_only=True).get("global_step"))
    except Exception:  # noqa: BLE001  (unreadable: the sentence then names no step)
        return None


def sentence(command: str, words: list[str], trainer, directory: Path | None, predicted: int | None) -> str:
    """What a run stopped by SIGTERM kept, and how to go on, in one sentence."""
    if command == "predict" and trainer is not None and trainer.world_size > 1:
        where = f" in {directory}" if directory is not None else ""
        return (
            f"predict stopped on SIGTERM; each rank's predictions so far are kept{where} in "
            f"predictions.rank<r>.jsonl (input index and row per line); run the same command again to predict every input."
        )
    if command == "predict":
        where = f" {directory / 'predictions.jsonl'}" if directory is not None else ""
        return (
            f"predict stopped on SIGTERM after {predicted or 0} input(s); the predictions file{where} keeps "
            "theirs; run the same command again to predict every input."
        )
    if command != "fit":
        return f"{command} stopped on SIGTERM before it finished, so nothing was recorded; run the same command again."
    step = trainer.global_step if trainer is not None else 0
    last = directory / CHECKPOINTS / LAST if directory is not None else None
    saved = checkpoint_step(last) if last is not None and last.is_file() else None
    again = resume_command(words)
    if saved is None:
        return f"fit stopped on SIGTERM at step {step}, before any checkpoint was written; start it again with `{again}`."
    return f"fit stopped on SIGTERM at step {step}; {last} holds step {saved}; resume the run with `{again}`."


def stop(command: str, words: list[str], trainer, directory: Path | None, predicted: int | None = None) -> None:
    """Say (on rank 0) what was kept and how to go on, and exit with SIGTERM_STATUS."""
    if trainer is None or trainer.is_global_zero:
        print(sentence(command, words, trainer, directory, predicted), file=sys.stderr, flush=True)
    raise SystemExit(SIGTERM_STATUS)
