"""The sweep engine behind `lit-attention compare`: plans arms x grid points x seeds, launches each
run as a `lit-attention fit` (locally or on SLURM), and reports paired statistics from the run
records on disk. Depends on `lit_attention.training` and `lit_attention.modeling`."""

from lit_attention.sweep.launchers import die_with_parent

__all__ = ["die_with_parent"]
