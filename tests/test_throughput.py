"""What throughput and MFU are computed from: the FLOPs of every training batch (counted by its shape) and
the dense peak FLOP/s of the GPU as torch names it."""

import lightning as L
import pytest
import torch
from lightning.fabric.utilities.throughput import get_available_flops, measure_flops

from lit_attention.training.peak_flops import compute_dtype, dense_peak, peak_flops
from lit_attention.training.recorder import RunRecorder
from lit_attention.training.tasks import CausalLanguageModel
from test_tasks import SMALL

T = 1e12


@pytest.mark.parametrize(
    "name, dtype, gpu, value",
    [
        ("NVIDIA H200", "bfloat16", "H200 SXM", 989.4 * T),
        ("NVIDIA H200 NVL", "bfloat16", "H200 NVL", 835.5 * T),
        ("NVIDIA H100 NVL", "bfloat16", "H100 NVL", 835.5 * T),
        ("NVIDIA H100 80GB HBM3", "bfloat16", "H100 SXM", 989.4 * T),
        ("NVIDIA H100 80GB HBM3", "tfloat32", "H100 SXM", 494.7 * T),
        ("NVIDIA H100 PCIe", "float16", "H100 PCIe", 756 * T),
        ("NVIDIA A100-SXM4-80GB", "bfloat16", "A100", 312 * T),
        ("NVIDIA A100-PCIE-40GB", "tfloat32", "A100", 156 * T),
        ("NVIDIA A100 80GB PCIe", "float32", "A100", 19.5 * T),
        ("NVIDIA L4", "bfloat16", "L4", 121 * T),
        ("NVIDIA L40S", "bfloat16", "L40S", 362.05 * T),
        ("NVIDIA L40", "float16", "L40", 181 * T),
        ("NVIDIA A10", "bfloat16", "A10", 125 * T),
        ("NVIDIA GeForce RTX 4090", "bfloat16", "RTX 4090", 165.2 * T),
    ],
)
def test_dense_peaks_of_gpus_as_torch_names_them(name, dtype, gpu, value):
    found = dense_peak(name, dtype)
    assert found["gpu"] == gpu and found["flops_per_second"] == pytest.approx(value)
    assert "datasheet" in found["source"] or "whitepaper" in found["source"]


@pytest.mark.parametrize(
    "name, dtype",
    [("NVIDIA A10G", "bfloat16"), ("Tesla T4", "float16"), ("NVIDIA H100 80GB HBM3", "float64"), ("NVIDIA B200", "bfloat16")],
)
def test_gpus_and_dtypes_the_table_does_not_hold(name, dtype):
    assert dense_peak(name, dtype) is None


@pytest.mark.parametrize(
    "precision, dtype", [("bf16-mixed", "bfloat16"), ("bf16-true", "bfloat16"), ("16-mixed", "float16"), ("64-true", "float64")]
)
def test_compute_dtype_of_trainer_precisions(precision, dtype):
    assert compute_dtype(precision) == dtype


def test_float32_is_tf32_where_torch_allows_it():
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert compute_dtype("32-true") == "float32"
        torch.set_float32_matmul_precision("high")
        assert compute_dtype("32-true") == "tfloat32"
    finally:
        torch.set_float32_matmul_precision(before)


def test_our_peak_where_lightning_has_none_or_the_sparse_one_and_lightnings_elsewhere(monkeypatch):
    """The device name is what a GPU machine's torch reports; the lookup itself runs as on that machine."""
    gpu = torch.device("cuda", 0)
    for name, lightning_says in (("NVIDIA H200", None), ("NVIDIA H100 NVL", 1978.8 * T)):
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None, name=name: name)
        assert get_available_flops(gpu, torch.bfloat16) == (None if lightning_says is None else int(lightning_says))
        used = peak_flops(gpu, "bf16-mixed")
        assert used["source"].startswith("lit_attention: NVIDIA") and used["device"] == name
    assert used["flops_per_second"] == pytest.approx(835.5 * T) and used["dtype"] == "bfloat16"
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A10G")
    assert peak_flops(gpu, "bf16-mixed") == {
        "device": "NVIDIA A10G",
        "dtype": "bfloat16",
        "flops_per_second": 125e12,
        "source": "lightning",
    }
    assert peak_flops(torch.device("cpu"), "32-true") is None


def lm_batch(length: int, batch_size: int = 4):
    tokens = torch.arange(batch_size * (length + 1)).remainder(40).view(batch_size, length + 1)
    return tokens[:, :-1], tokens[:, 1:]


def counted(module, batch) -> int:
    with torch.device("meta"):
        model = module.build_model()
    meta = tuple(t.to("meta") for t in batch)
    return measure_flops(model, lambda: model(meta[0]), lambda out: out.float().sum())


def test_flops_are_counted_per_batch_shape():
    module = CausalLanguageModel(net=dict(vocab_size=40, max_len=12, depth=1, **SMALL))
    short, long = lm_batch(6), lm_batch(12)
    assert module.flops_of(short) == counted(module, short)
    assert module.flops_of(long) == counted(module, long) > module.flops_of(short)
    module.flops_of(lm_batch(6))
    assert len(module._flop_counting["by_shape"]) == 2  # one count per distinct shape


@pytest.mark.slow
def test_the_record_sums_the_flops_of_batches_of_different_lengths(tmp_path):
    module = CausalLanguageModel(net=dict(vocab_size=40, max_len=12, depth=1, **SMALL), warmup_steps=1)
    batches = [lm_batch(6), lm_batch(12), lm_batch(6)]
    recorder = RunRecorder()
    trainer = L.Trainer(
        default_root_dir=tmp_path,
        accelerator="cpu",
        devices=1,
        logger=False,
        max_epochs=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        callbacks=[recorder],
        limit_val_batches=0,
    )
    trainer.fit(module, torch.utils.data.DataLoader(batches, batch_size=None))
    record = recorder.record(trainer, module, None, {})
    expected = 2 * counted(module, lm_batch(6)) + counted(module, lm_batch(12))
    assert record["train_flops"] == expected
    assert record["flops_per_batch"] == counted(module, lm_batch(6))  # the first batch's, as before
    assert record["peak_flops"] is None  # a CPU: no MFU
