"""The benchmark scripts keep running and print what BENCHMARKS.md quotes. Nothing here asserts a
speed: timings belong to the benchmarks, and CI machines are too noisy for them."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from attention_layers import saved_for_backward_bytes  # noqa: E402

from lit_attention.modeling.attention import MultiHeadAttention, list_presets  # noqa: E402


def run_script(name: str, *args: str) -> str:
    # This checkout's package first: an editable install elsewhere (another worktree) would shadow it.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args], capture_output=True,
                            text=True, timeout=300, cwd=ROOT, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def table(stdout: str) -> list[list[str]]:
    rows = [line.strip("|").split("|") for line in stdout.splitlines() if line.startswith("| ") and "---" not in line]
    return [[cell.strip() for cell in row] for row in rows[1:]]  # without the header


@pytest.mark.slow  # a process of its own
def test_attention_benchmark_prints_every_preset_for_every_size():
    out = run_script("attention_layers.py", "--seq-lens", "8", "16", "--dims", "32", "--heads", "4",
                     "--warmup", "1", "--steps", "1", "--repeats", "1")
    rows, presets = table(out), list_presets()
    assert [row[4] for row in rows] == presets * 2
    assert [row[1] for row in rows] == ["8"] * len(presets) + ["16"] * len(presets)
    by_name = {row[4]: row for row in rows[len(presets):]}
    assert by_name["standard"][6] == "1.00" and by_name["standard"][7] == "1.00"
    assert float(by_name["efficient"][7]) < float(by_name["optimized"][7]) < 1.0  # the cost model's order


def test_saved_activation_memory_follows_the_kept_projections():
    torch.manual_seed(0)
    x = torch.randn(2, 16, 32, requires_grad=True)
    saved = {name: saved_for_backward_bytes(MultiHeadAttention(32, 4, name, max_len=16), x) for name in list_presets()}
    # Each removed projection is one (B, T, d) float32 output fewer kept for backward.
    one = 2 * 16 * 32 * 4
    assert saved["standard"] - saved["optimized"] == one
    assert saved["standard"] - saved["efficient"] == 2 * one
    assert saved["nonlinear_query"] > saved["standard"]


@pytest.mark.slow  # a process of its own
def test_lightning_overhead_benchmark_runs_both_paths():
    out = run_script("lightning_overhead.py", "--steps", "3", "--repeats", "1", "--dim", "32", "--depth", "1",
                     "--heads", "2", "--context", "16", "--vocab", "64")
    assert "plain PyTorch loop" in out and "Lightning Trainer.fit" in out


@pytest.mark.slow  # a process of its own
def test_generation_benchmark_compares_every_path_at_every_length():
    out = run_script("generation.py", "--dim", "32", "--depth", "1", "--heads", "2", "--vocab", "64", "--prompt", "4",
                     "--new-tokens", "4", "8", "--repeats", "1")
    rows = table(out)
    paths = ["transformers generate", "transformers forward loop", "ours standard, cached", "ours standard, uncached",
             "ours super, cached"]
    assert [row[:2] for row in rows[:10]] == [[n, path] for n in ("4", "8") for path in paths]
    assert rows[0][3] == "1.00" and rows[1][4] == "1.00"  # each baseline against itself
    summary = rows[11:]  # after the second table's header
    assert [row[0] for row in summary] == ["4", "8"] and summary[0][5] == "yes"  # ours = transformers, token for token
    assert "load average" in out and "prompt logits agree with transformers" in out


@pytest.mark.slow  # a process of its own
def test_compiled_training_benchmark_runs_every_configuration():
    out = run_script("compiled_training.py", "--vit-dim", "16", "--vit-batch", "4", "--gpt-dim", "16", "--gpt-batch", "2",
                     "--context", "8", "--compile-steps", "1", "--calls", "1", "--repeats", "1", "--backend", "eager")
    rows = table(out)
    configurations = ["eager float32", "compiled float32", "eager bfloat16", "compiled bfloat16"]
    assert [row[1] for row in rows] == configurations * 2
    assert rows[0][3] == "1.00" and rows[1][4] != "" and rows[2][4] == ""  # compile time only where compiled


@pytest.mark.slow  # a process of its own
def test_reference_model_benchmark_times_models_that_compute_the_same_function():
    out = run_script("reference_models.py", "--batch", "2", "--vocab", "64", "--context", "16", "--gpt-dim", "32",
                     "--gpt-depth", "1", "--gpt-heads", "4", "--vit-dim", "32", "--vit-depth", "1", "--vit-heads", "4",
                     "--warmup", "1", "--calls", "1", "--repeats", "1")
    rows = table(out)
    assert [row[0] for row in rows] == ["GPT vs transformers GPT2LMHeadModel", "ViT vs timm VisionTransformer"]
    assert all(row[1] == row[2] for row in rows)  # equal parameter counts: the same architecture


def test_reference_model_benchmark_times_the_llama_style_gpt_against_llama(monkeypatch, capsys):
    """In this process, at a tiny size (the script itself runs in the GPT-2 and ViT rows' test)."""
    import reference_models

    monkeypatch.setattr(sys, "argv", ["reference_models.py", "--models", "llama", "--batch", "2", "--vocab", "64",
                                      "--context", "8", "--gpt-dim", "16", "--gpt-depth", "1", "--gpt-heads", "2",
                                      "--llama-kv-heads", "1", "--warmup", "0", "--calls", "1", "--repeats", "1"])
    reference_models.main()
    rows = table(capsys.readouterr().out)
    assert [row[0] for row in rows] == ["Llama-style GPT vs transformers LlamaForCausalLM"]
    assert rows[0][1] == rows[0][2]  # equal parameter counts: the same architecture, grouped heads included


@pytest.mark.slow  # two sweeps, two runs at a time
def test_compare_parallel_benchmark_runs_its_sweeps():
    """Its serial and parallel sweeps (the fresh-process one is left out here: a forked run's record
    equals a fresh process's in test_launchers.py, and its row is the same code as the others')."""
    out = run_script("compare_parallel.py", "--variants", "standard,super", "--seeds", "1", "--skip-fresh", "--extra",
                     "--trainer.max_epochs=1", "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1",
                     "--model.net.dim=16", "--model.net.num_heads=2", "--model.net.depth=1")
    rows = table(out)
    assert rows[0][0].startswith("serial") and rows[0][2] == "1.00" and rows[1][0].startswith("--parallel 2")
    assert len(rows) == 2 and float(rows[1][1]) > 0 and "results.csv identical, serial and parallel:" in out


@pytest.mark.slow  # a process of its own
def test_gpu_check_dry_runs_every_section_on_cpu():
    out = run_script("gpu_check.py", "--dry")
    rows = table(out)
    kernel_rows = [row for row in rows if len(row) == 5 and row[0] in ("vit", "text, no padding", "text, padded", "gpt", "seq2seq, padded")]
    assert {row[1] for row in kernel_rows} == set(list_presets()) and len(kernel_rows) == 5 * len(list_presets())
    assert all(row[2] != "none" and float(row[4]) < 0.1 for row in kernel_rows)  # an SDPA backend ran; bf16 is close
    generation = [row for row in rows if len(row) == 5 and row[0] in list_presets()]
    assert [row[0] for row in generation] == list_presets()
    assert "skipped: sync debug mode needs CUDA" in out
    assert "exit status 0" in out and "weights identical" in out
