"""benchmarks/gpu_check.py's dry mode runs every section on the CPU (apart from test_benchmarks.py:
it is one of the longest of the benchmark tests)."""

import sys
from pathlib import Path

import pytest
from benchmark_scripts import run_script_in_a_process, table  # tests/ is on sys.path under pytest

from lit_attention.modeling.attention import list_presets

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from gpu_check import OPTION_ROWS  # noqa: E402


FAMILIES = ("vit", "text, no padding", "text, padded", "gpt", "seq2seq, padded")


@pytest.mark.slow  # a process of its own
def test_gpu_check_dry_runs_every_section_on_cpu():
    out = run_script_in_a_process("gpu_check.py", "--dry")
    rows = table(out)
    kernel_rows = [row for row in rows if len(row) == 5 and row[0] in FAMILIES]
    options = [label for label, _, _ in OPTION_ROWS]
    assert {row[1] for row in kernel_rows} == set(list_presets()) | set(options)
    # every family for every preset and option, but ALiBi in the ViT (its positions are learned or rope)
    assert len(kernel_rows) == 5 * (len(list_presets()) + len(options)) - 1
    assert not [row for row in kernel_rows if row[0] == "vit" and row[1] == "standard, alibi"]
    assert all(row[2] != "none" and float(row[4]) < 0.1 for row in kernel_rows)  # an SDPA backend ran; bf16 is close
    generation = [row for row in rows if len(row) == 5 and row[0] in list_presets()]
    assert [row[0] for row in generation] == list_presets()
    assert "recompile count check: 3 forced (a function compiled for 4 input shapes, dynamic off), 3 counted" in out
    assert "skipped: sync debug mode needs CUDA" in out
    assert "(torch's FLOP count of every training batch)" in out and "Lightning knows no peak" not in out
    assert "exit status 0" in out and "weights identical" in out and "(deterministic algorithms)" in out


def test_gpu_check_skips_what_would_start_past_its_time_budget(capsys):
    import gpu_check

    gpu_check.main(["--dry", "--budget", "0"])  # in this process: every section is skipped, nothing runs
    out = capsys.readouterr().out
    assert out.count("the time budget is spent") == 6 and "# done in" in out
