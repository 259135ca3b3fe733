"""What trained variants learned (docs/DESIGN.md §2 names the matrices): attention patterns, W_A, the kept
projections' spectra, the nonlinear query's size and CKA across runs. Above `training` (it reads its
checkpoints), below `sweep` and `main`. Entry points: `inspect_run` and `compare_runs` (inspect.py),
imported on first use so that `measures` stays free of Lightning."""

__all__ = ["compare_runs", "inspect_run"]


def __getattr__(name: str):
    if name in __all__:
        from lit_attention.analysis import inspect

        return getattr(inspect, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
