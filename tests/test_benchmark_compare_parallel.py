"""benchmarks/compare_parallel.py keeps running and prints what BENCHMARKS.md quotes (apart from
test_benchmarks.py: its two sweeps are the longest of the benchmark tests)."""

import pytest
from benchmark_scripts import run_script_in_a_process, table  # tests/ is on sys.path under pytest


@pytest.mark.slow  # two sweeps, two runs at a time
def test_compare_parallel_benchmark_runs_its_sweeps():
    """Its serial and parallel sweeps (the fresh-process one is left out here: a forked run's record
    equals a fresh process's in test_launchers.py, and its row is the same code as the others')."""
    out = run_script_in_a_process(
        "compare_parallel.py",
        "--variants",
        "standard,super",
        "--seeds",
        "1",
        "--skip-fresh",
        "--extra",
        "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=2",
        "--trainer.limit_val_batches=1",
        "--model.net.dim=16",
        "--model.net.num_heads=2",
        "--model.net.depth=1",
    )
    rows = table(out)
    assert rows[0][0].startswith("serial") and rows[0][2] == "1.00" and rows[1][0].startswith("--parallel 2")
    assert len(rows) == 2 and float(rows[1][1]) > 0 and "results.csv identical, serial and parallel:" in out
