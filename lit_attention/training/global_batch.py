"""`--run.global_batch_size`: the sequences (or images) of one optimizer step, kept on any layout.

A recipe that states its global batch (recipes/nonlinear_query/gpt3_small.yaml: 480 windows of 1,024
tokens) keeps it on 1 GPU, 8 GPUs or 2 nodes x 8: the per-device batch and the gradient accumulation are
derived from it and the number of training processes, before anything is built, so that

    data.batch_size x trainer.accumulate_grad_batches x processes = run.global_batch_size.

The per-device batch is the largest that divides the processes' share and is at most the recipe's
`batch_size` (what one device is known to hold); the accumulation makes up the rest. A layout whose
processes do not divide the global batch is refused in one sentence. `val_check_interval`, when a number
of batches, counts micro-batches, so it is rescaled to validate after the same optimizer steps.
"""

from __future__ import annotations

from lit_attention.errors import ConfigError


def apply_global_batch(config, processes: int) -> str | None:
    """Set the per-device batch and the accumulation of `config` (a parsed run config) from its
    `run.global_batch_size`, for `processes` training processes; a line saying what was chosen (None
    when the recipe states no global batch)."""
    wanted = config.run.get("global_batch_size")
    if wanted is None:
        return None
    if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 1:
        raise ConfigError(
            f"--run.global_batch_size {wanted!r} is invalid; give a whole number of sequences per "
            "optimizer step (e.g. 480), or null to use batch_size and accumulate_grad_batches as given."
        )
    if processes < 1:  # devices auto or -1 on GPUs where none is visible (a login node planning a sweep)
        raise ConfigError(
            f"--run.global_batch_size {wanted} is shared out over the training processes, and the trainer "
            "settings count none here (devices auto or -1 with no GPU visible); give --trainer.devices "
            "and --trainer.num_nodes as numbers."
        )
    share, left = divmod(wanted, processes)
    if left or share == 0:
        raise ConfigError(
            f"--run.global_batch_size {wanted} cannot be split evenly over {processes} training processes "
            f"(devices x nodes); use a number of processes that divides {wanted}, or another global batch size."
        )
    data = config.data.init_args
    most = int(data.get("batch_size") or share)
    batch = max(size for size in range(1, min(most, share) + 1) if share % size == 0)
    accumulation = share // batch
    trainer = config.trainer
    before = int(trainer.get("accumulate_grad_batches") or 1)
    interval = trainer.get("val_check_interval")
    if isinstance(interval, int) and not isinstance(interval, bool) and accumulation != before:
        steps, part = divmod(interval, before)
        if part:
            raise ConfigError(
                f"--trainer.val_check_interval {interval} is not a whole number of optimizer steps at "
                f"accumulate_grad_batches {before}, so it cannot follow the accumulation "
                f"--run.global_batch_size {wanted} needs here ({accumulation}); give a multiple of {before}."
            )
        trainer.val_check_interval = max(1, steps) * accumulation
    data.batch_size, trainer.accumulate_grad_batches = batch, accumulation
    return (
        f"--run.global_batch_size {wanted} on {processes} process(es): batch_size {batch} per device x "
        f"accumulate_grad_batches {accumulation}."
    )
