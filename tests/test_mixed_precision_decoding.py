"""Decoding under bf16 autocast: prompts of different lengths for every variant, and caches that hold
keys and values in the dtype attention computes in, so no step re-casts the cached prefix."""

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from in_process import run_main  # tests/ is on sys.path under pytest
from test_generation import IDS, VARIANTS, VOCAB, gpt, left_padding, seq2seq, translation_batch

ROOT = Path(__file__).resolve().parents[1]
BF16 = dict(device_type="cpu", dtype=torch.bfloat16)


@pytest.fixture
def sdpa_inputs(monkeypatch) -> list[tuple[torch.dtype, torch.dtype, torch.dtype]]:
    """(q, k, v) dtypes of every SDPA call, as the caller hands them over (before autocast casts them)."""
    seen, real = [], F.scaled_dot_product_attention

    def spy(q, k, v, *args, **kwargs):
        seen.append((q.dtype, k.dtype, v.dtype))
        return real(q, k, v, *args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    return seen


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
def test_gpt_generates_from_ragged_prompts_under_bf16_autocast(variant, sdpa_inputs):
    model = gpt(variant).float()
    torch.manual_seed(4)
    tokens = torch.randint(0, VOCAB, (3, 6))
    with torch.autocast(**BF16):
        out = model.generate(tokens, 5, temperature=0, padding_mask=left_padding([6, 4, 1], 6))
    assert out.shape == (3, 11) and torch.equal(out[:, :6], tokens)
    # Every decoding step attends to the cache: its keys and values already in bf16, none cast per step.
    assert sdpa_inputs and all(k == v == torch.bfloat16 for _, k, v in sdpa_inputs), set(sdpa_inputs)


@pytest.mark.parametrize("variant", VARIANTS, ids=IDS)
@pytest.mark.parametrize("beam_size", [1, 3])
def test_seq2seq_decoder_caches_hold_bf16_under_autocast(variant, beam_size, sdpa_inputs):
    model = seq2seq(variant).float()
    src, padding = translation_batch()
    with torch.autocast(**BF16):
        memory = model.encode(src, padding)
        sdpa_inputs.clear()  # the encoder's calls are not decoding
        out = model._greedy(memory, padding, 6) if beam_size == 1 else model.beam_search(memory, padding, 6, beam_size)
    assert out.shape[0] == src.shape[0]
    assert sdpa_inputs and all(k == v == torch.bfloat16 for _, k, v in sdpa_inputs), set(sdpa_inputs)


@pytest.mark.slow
def test_predict_in_bf16_mixed_continues_prompts_of_different_lengths(in_tmp):
    tiny = [
        "--config",
        str(ROOT / "recipes/quickstart/gpt_stdlib.yaml"),
        "--trainer.max_steps=2",
        "--trainer.limit_val_batches=0",
        "--data.max_files=40",
        "--data.val_fraction=0.2",
        "--data.max_len=16",
        "--model.net.dim=16",
        "--model.net.num_heads=2",
        "--model.net.depth=1",
        f"--data.data_dir={in_tmp / 'data'}",
        "--trainer.enable_progress_bar=false",
    ]
    prompts = in_tmp / "prompts.txt"
    prompts.write_text("def f():\nx\n  return 1\n")  # all cached: 8 + 4 bytes fit max_len
    assert run_main(["fit", *tiny]) == 0
    assert (
        run_main(
            [
                "predict",
                *tiny,
                "--ckpt_path=last",
                f"--data.predict_files={prompts}",
                "--trainer.precision=bf16-mixed",
                "--model.max_new_tokens=4",
                "--model.temperature=0",
            ]
        )
        == 0
    )
    [path] = Path.cwd().glob("runs/**/evaluations/predict_*/predictions.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [row["prompt"] for row in rows] == ["def f():", "x", "  return 1"]
