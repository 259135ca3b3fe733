"""benchmarks/gpu_check.py's dry mode runs every section on the CPU (apart from test_benchmarks.py:
it is one of the longest of the benchmark tests)."""

import pytest
from benchmark_scripts import run_script_in_a_process, table  # tests/ is on sys.path under pytest

from lit_attention.modeling.attention import list_presets


@pytest.mark.slow  # a process of its own
def test_gpu_check_dry_runs_every_section_on_cpu():
    out = run_script_in_a_process("gpu_check.py", "--dry")
    rows = table(out)
    kernel_rows = [row for row in rows if len(row) == 5 and row[0] in ("vit", "text, no padding", "text, padded", "gpt", "seq2seq, padded")]
    assert {row[1] for row in kernel_rows} == set(list_presets()) and len(kernel_rows) == 5 * len(list_presets())
    assert all(row[2] != "none" and float(row[4]) < 0.1 for row in kernel_rows)  # an SDPA backend ran; bf16 is close
    generation = [row for row in rows if len(row) == 5 and row[0] in list_presets()]
    assert [row[0] for row in generation] == list_presets()
    assert "skipped: sync debug mode needs CUDA" in out
    assert "exit status 0" in out and "weights identical" in out
