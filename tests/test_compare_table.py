"""The comparison table that `compare` prints, built from finished runs (no training here)."""

import math

import pytest

from lit_attention.compare import RunResult, summarise, table_rows


def result(variant: str, seed: int, monitor: str, mode: str, values: list[float]) -> RunResult:
    curve = [(i, 100 * (i + 1), value) for i, value in enumerate(values)]
    return RunResult(variant, seed, monitor, mode, curve, params_total=1000, params_attention=100,
                     samples_per_second=50.0, seconds=1.0, log_dir="unused")


def test_language_model_table_adds_perplexity_of_each_seed():
    runs = [result("standard", 0, "val/loss", "min", [3.0, 2.0]), result("standard", 1, "val/loss", "min", [3.0, 2.2])]
    header, rows = table_rows(summarise(runs))
    assert header[:4] == ["variant", "final val/loss", "final val/ppl", "best val/loss"]
    # Mean of per-seed perplexities, not exp of the mean loss.
    per_seed = [math.exp(2.0), math.exp(2.2)]
    mean = sum(per_seed) / 2
    std = abs(per_seed[0] - per_seed[1]) / math.sqrt(2)
    assert rows[0][2] == f"{mean:.2f} ± {std:.2f}"
    assert rows[0][1] == "2.1000 ± 0.1414"


def test_accuracy_table_has_no_perplexity_column():
    runs = [result("efficient", 0, "val/acc", "max", [0.5, 0.9, 0.8])]
    header, rows = table_rows(summarise(runs))
    assert "final val/ppl" not in header
    assert rows[0][:4] == ["efficient", "0.8000 ± 0.0000", "0.9000 ± 0.0000", "200"]  # best at step 200


@pytest.mark.parametrize("n", [1, 3])
def test_seeds_column_counts_runs(n):
    runs = [result("super", seed, "val/acc", "max", [0.7]) for seed in range(n)]
    assert table_rows(summarise(runs))[1][0][-1] == str(n)
