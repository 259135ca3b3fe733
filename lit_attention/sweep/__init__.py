"""Planning, running and launching a sweep: the runs a sweep is made of and their folders (runs), the
plan checked before anything trains (planning), each run launched as a `lit-attention fit`, locally or
on SLURM (launchers, running, preload), the re-runs of `--verify` (verify), and the output directory
compare owns and the report files it writes whole (output_dir, report_files).

May import: lit_attention.stats, lit_attention.analysis, lit_attention.training, lit_attention.modeling,
datamodules. Never reports/, scaling/ or the compare command, which are built on it."""

from lit_attention.sweep.launchers import die_with_parent

__all__ = ["die_with_parent"]
