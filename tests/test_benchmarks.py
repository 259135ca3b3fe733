"""The benchmark scripts keep running and print what BENCHMARKS.md quotes. Nothing here asserts a
speed: timings belong to the benchmarks, and CI machines are too noisy for them."""

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from attention_layers import saved_for_backward_bytes  # noqa: E402
from benchmark_scripts import run_script, table  # noqa: E402  # tests/ is on sys.path under pytest

from lit_attention.modeling.attention import MultiHeadAttention, list_presets  # noqa: E402


@pytest.mark.slow  # runs the script
def test_attention_benchmark_prints_every_preset_for_every_size():
    out = run_script(
        "attention_layers.py",
        "--seq-lens",
        "8",
        "16",
        "--dims",
        "32",
        "--heads",
        "4",
        "--warmup",
        "1",
        "--steps",
        "1",
        "--repeats",
        "1",
    )
    rows, presets = table(out), list_presets()
    assert [row[4] for row in rows] == presets * 2
    assert [row[1] for row in rows] == ["8"] * len(presets) + ["16"] * len(presets)
    by_name = {row[4]: row for row in rows[len(presets) :]}
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


@pytest.mark.slow  # runs the script
def test_lightning_overhead_benchmark_runs_both_paths():
    out = run_script(
        "lightning_overhead.py",
        "--steps",
        "3",
        "--repeats",
        "1",
        "--dim",
        "32",
        "--depth",
        "1",
        "--heads",
        "2",
        "--context",
        "16",
        "--vocab",
        "64",
    )
    assert "plain PyTorch loop" in out and "Lightning Trainer.fit" in out


@pytest.mark.slow  # runs the script
def test_generation_benchmark_compares_every_path_at_every_length():
    out = run_script(
        "generation.py",
        "--dim",
        "32",
        "--depth",
        "1",
        "--heads",
        "2",
        "--vocab",
        "64",
        "--prompt",
        "4",
        "--new-tokens",
        "4",
        "8",
        "--repeats",
        "1",
    )
    rows = table(out)
    paths = [
        "transformers generate",
        "transformers forward loop",
        "ours standard, cached",
        "ours standard, uncached",
        "ours super, cached",
    ]
    assert [row[:2] for row in rows[:10]] == [[n, path] for n in ("4", "8") for path in paths]
    assert rows[0][3] == "1.00" and rows[1][4] == "1.00"  # each baseline against itself
    summary = rows[11:]  # after the second table's header
    assert [row[0] for row in summary] == ["4", "8"] and summary[0][5] == "yes"  # ours = transformers, token for token
    assert "load average" in out and "prompt logits agree with transformers" in out


@pytest.mark.slow  # runs the script
def test_compiled_training_benchmark_runs_every_configuration():
    out = run_script(
        "compiled_training.py",
        "--vit-dim",
        "16",
        "--vit-batch",
        "4",
        "--gpt-dim",
        "16",
        "--gpt-batch",
        "2",
        "--context",
        "8",
        "--compile-steps",
        "1",
        "--calls",
        "1",
        "--repeats",
        "1",
        "--backend",
        "eager",
    )
    rows = table(out)
    configurations = ["eager float32", "compiled float32", "eager bfloat16", "compiled bfloat16"]
    assert [row[1] for row in rows] == configurations * 2
    assert rows[0][3] == "1.00" and rows[1][4] != "" and rows[2][4] == ""  # compile time only where compiled


@pytest.mark.slow  # runs the script
def test_reference_model_benchmark_times_models_that_compute_the_same_function():
    out = run_script(
        "reference_models.py",
        "--batch",
        "2",
        "--vocab",
        "64",
        "--context",
        "16",
        "--gpt-dim",
        "32",
        "--gpt-depth",
        "1",
        "--gpt-heads",
        "4",
        "--vit-dim",
        "32",
        "--vit-depth",
        "1",
        "--vit-heads",
        "4",
        "--warmup",
        "1",
        "--calls",
        "1",
        "--repeats",
        "1",
    )
    rows = table(out)
    assert [row[0] for row in rows] == ["GPT vs transformers GPT2LMHeadModel", "ViT vs timm VisionTransformer"]
    assert all(row[1] == row[2] for row in rows)  # equal parameter counts: the same architecture


@pytest.mark.slow  # builds and times two models
def test_reference_model_benchmark_times_the_llama_style_gpt_against_llama(monkeypatch, capsys):
    """In this process, at a tiny size (the script itself runs in the GPT-2 and ViT rows' test)."""
    import reference_models

    monkeypatch.setattr(
        sys,
        "argv",
        [
            "reference_models.py",
            "--models",
            "llama",
            "--batch",
            "2",
            "--vocab",
            "64",
            "--context",
            "8",
            "--gpt-dim",
            "16",
            "--gpt-depth",
            "1",
            "--gpt-heads",
            "2",
            "--llama-kv-heads",
            "1",
            "--warmup",
            "0",
            "--calls",
            "1",
            "--repeats",
            "1",
        ],
    )
    reference_models.main()
    rows = table(capsys.readouterr().out)
    assert [row[0] for row in rows] == ["Llama-style GPT vs transformers LlamaForCausalLM"]
    assert rows[0][1] == rows[0][2]  # equal parameter counts: the same architecture, grouped heads included
