"""`lit-attention inspect`: the measures on constructed inputs whose answers are known, the
per-head products against the layer's own math, the hooks on real models, and the command on a
checkpoint of every task (slow: each trains one step of a tiny model first)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
import torch

from lit_attention.analysis import measures
from lit_attention.analysis.collect import Collector, run_batches
from lit_attention.analysis.weights import Geometry, head_products, projection_report, value_mix_report, value_mix_used
from lit_attention.modeling.attention import MultiHeadAttention
from lit_attention.modeling.gpt import GPT, GPTConfig

from in_process import run_main  # tests/ is on sys.path under pytest
from test_recipes_run import offline_data, write_offline_data

ROOT = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------ W_A


def test_an_identity_value_mix_is_at_distance_zero_with_all_mass_on_the_diagonal():
    report = value_mix_report(torch.eye(17, dtype=torch.float64), Geometry(cls=True, grid=4))
    assert report["identity_distance"] == 0.0
    assert all(share == 1.0 for share in report["band_mass"].values())  # k = 0 is the diagonal itself
    assert all(share == 1.0 for share in report["patch_band_mass"].values())
    assert report["mass_above_diagonal"] == 0.0 and report["effective_rank"] == 17


def test_a_banded_value_mix_gives_the_bandedness_of_its_band():
    n = 8
    offsets = measures.sequence_distance(n, n)
    banded = torch.where(offsets == 0, 1.0, torch.where(offsets == 1, -0.5, torch.where(offsets == 2, 0.25, 0.0)))
    mass = measures.band_mass(banded, measures.band_widths(n))
    total = n * 1.0 + 2 * (n - 1) * 0.5 + 2 * (n - 2) * 0.25  # |entries|: a negative band counts by its size
    assert mass[0] == pytest.approx(n / total) and mass[1] == pytest.approx((n + (n - 1)) / total)
    assert mass[2] == mass[4] == 1.0
    assert measures.identity_distance(banded) == pytest.approx(math.sqrt(2 * 7 * 0.25 + 2 * 6 * 0.0625) / math.sqrt(n))


def test_a_convolution_like_value_mix_is_banded_by_patch_distance():
    """On a 3 x 3 grid, mixing each patch with its 3 x 3 neighbourhood: all mass within Chebyshev distance 1,
    9 of the 49 neighbour pairs on the diagonal, though far from banded by |i - j| in the flattened order."""
    distance = measures.patch_distance(3, "chebyshev")
    mixing = (distance <= 1).double()
    with_cls = torch.zeros(10, 10, dtype=torch.float64)
    with_cls[0, 0], with_cls[1:, 1:] = 1.0, mixing
    report = value_mix_report(with_cls, Geometry(cls=True, grid=3))
    assert report["patch_band_mass"] == {0: pytest.approx(9 / 49), 1: 1.0, 2: 1.0}
    assert report["band_mass"][1] < 0.6  # the row above sits 3 positions away in the flattened order


def test_patch_distance_is_measured_on_the_grid():
    euclid = measures.patch_distance(2)
    assert euclid[0].tolist() == pytest.approx([0.0, 1.0, 1.0, math.sqrt(2)])
    uniform = torch.full((4, 4), 0.25, dtype=torch.float64)
    assert measures.expected_distance(uniform, euclid).tolist() == pytest.approx([(2 + math.sqrt(2)) / 4] * 4)


# ------------------------------------------------------------------ attention weights


def test_uniform_attention_has_entropy_one_and_one_hot_attention_zero():
    t = 6
    assert measures.normalised_entropy(torch.full((2, t, t), 1 / t)).flatten().tolist() == pytest.approx([1.0] * 2 * t)
    assert measures.normalised_entropy(torch.eye(t)).tolist() == [0.0] * t
    causal = torch.ones(t, t).tril()
    uniform_causal = causal / causal.sum(dim=-1, keepdim=True)
    entropy = measures.normalised_entropy(uniform_causal, causal.bool())
    assert math.isnan(entropy[0]) and entropy[1:].tolist() == pytest.approx([1.0] * (t - 1))  # row 0 has one key


def test_diagonal_and_above_diagonal_weight():
    t = 5
    assert measures.diagonal_weight(torch.eye(t)).tolist() == [1.0] * t
    assert float(measures.mass_above_diagonal(torch.ones(t, t).tril())) == 0.0
    assert float(measures.mass_above_diagonal(torch.ones(t, t))) == pytest.approx(10 / 25)


# ------------------------------------------------------------------ spectra


@pytest.mark.parametrize("rank", [1, 3, 7])
def test_a_rank_r_product_has_effective_rank_r(rank):
    generator = torch.Generator().manual_seed(rank)
    product = torch.randn(12, rank, generator=generator) @ torch.randn(rank, 12, generator=generator)
    assert measures.effective_rank(measures.singular_values(product)) == rank
    left, _ = torch.linalg.qr(torch.randn(12, rank, generator=generator, dtype=torch.float64))
    right, _ = torch.linalg.qr(torch.randn(12, rank, generator=generator, dtype=torch.float64))
    flat = 3.0 * left @ right.T  # r equal singular values
    assert measures.entropy_rank(measures.singular_values(flat)) == pytest.approx(rank)


def test_head_products_are_the_layers_own_scores_and_value_path():
    """Per head, softmax(s X W_Q,i W_K,iᵀ Xᵀ) is the layer's attention and Σ_i A_i X W_V,i W_O,i its output."""
    torch.manual_seed(0)
    # Grouped heads too: query head i reads key/value head i // (h / kv_heads), its W_K and W_V (d, kv·d_h).
    for variant, num_heads in (
        ("standard", 2),
        ("residual_query", 2),
        ("standard,kv_heads=2", 4),
        ("residual_query,kv_heads=1", 4),
    ):
        layer = MultiHeadAttention(8, num_heads, variant, fused=False).double().eval()
        x = torch.randn(3, 5, 8, dtype=torch.float64)
        layer.record_weights = True
        y = layer(x)
        products = head_products(layer)
        scores = torch.stack([x @ m @ x.transpose(-2, -1) for m in products["W_Q,i W_K,iᵀ"]], dim=1) * layer.scale
        assert torch.allclose(scores.softmax(dim=-1), layer.recorded_weights, atol=1e-12)
        heads = sum(layer.recorded_weights[:, i] @ x @ m for i, m in enumerate(products["W_V,i W_O,i"]))
        assert torch.allclose(heads, y, atol=1e-12)
        kv_width = (layer.spec.kv_heads or num_heads) * layer.head_dim
        shapes = {name: tuple(w.shape) for name, w in layer.projection_weights().items()}
        assert shapes == {"q": (8, 8), "k": (8, kv_width), "v": (8, kv_width), "o": (8, 8)}
        report = projection_report(layer)
        assert [len(report[f"W_{n}"]["singular_values"]) for n in "QKVO"] == [8, kv_width, kv_width, 8]
        assert [len(report[k]["singular_values"]) for k in ("W_Q,i W_K,iᵀ", "W_V,i W_O,i")] == [num_heads] * 2
    assert set(head_products(MultiHeadAttention(8, 2, "optimized"))) == {"W_Q,i W_K,iᵀ"}
    assert head_products(MultiHeadAttention(8, 2, "efficient")) == {}


# ------------------------------------------------------------------ CKA


def test_cka_of_features_with_themselves_is_one_and_invariant_to_a_rotation():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(200, 8, generator=generator, dtype=torch.float64)
    rotation, _ = torch.linalg.qr(torch.randn(8, 8, generator=generator, dtype=torch.float64))
    assert measures.linear_cka(x, x) == pytest.approx(1.0)
    assert measures.linear_cka(x, 3.0 * x @ rotation + 1.0) == pytest.approx(1.0)
    assert measures.linear_cka(x, torch.randn(200, 8, generator=generator, dtype=torch.float64)) < 0.3
    streamed = measures.LinearCKA()
    y = torch.tanh(x[:, :5])
    streamed.update(x[:120], y[:120])
    streamed.update(x[120:], y[120:])
    assert streamed.value() == pytest.approx(measures.linear_cka(x, y))


# ------------------------------------------------------------------ hooks on a model


def tiny_gpt(variant: str) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=11, max_len=9, dim=16, depth=2, num_heads=2), variant).eval()


def test_causal_super_reports_no_mass_above_the_diagonal():
    """xavier-initialised W_A has entries above the diagonal that a causal layer never uses: neither W_A as
    used nor the attention weights put any mass there."""
    model = tiny_gpt("super,value_mix_init=xavier")
    tokens = torch.randint(0, 11, (4, 9))
    expected = model(tokens)
    with Collector(model) as collector:
        run_batches([model], lambda m, b: m(b), [tokens], lambda b: b)
    assert torch.equal(model(tokens), expected)  # hooks gone, fused path back
    for name, layer in collector.layers.items():
        assert layer.fused and not layer.record_weights
        assert float(measures.mass_above_diagonal(layer.value_mix.detach())) > 0.1  # the raw parameter has some
        assert value_mix_report(value_mix_used(layer), Geometry())["mass_above_diagonal"] == 0.0
        result = collector.attention[name].result()
        assert result["above_diagonal"] == [0.0, 0.0]
        assert all(0.0 < e <= 1.0 for e in result["entropy"])
        assert torch.all(result["map"].triu(diagonal=1) == 0)
    assert set(collector.features) == {"blocks.0", "blocks.1"} and collector.features["blocks.0"].shape == (36, 16)


def test_a_report_of_grouped_heads_names_the_shared_key_value_heads():
    from types import SimpleNamespace

    from lit_attention.analysis.inspect import summarise
    from lit_attention.analysis.report import markdown

    sentences = []
    for variant in ("standard,kv_heads=1", "standard"):
        model = tiny_gpt(variant)
        with Collector(model) as collector:
            run_batches([model], lambda m, b: m(b), [torch.randint(0, 11, (2, 9))], lambda b: b)
        run = SimpleNamespace(name="run", checkpoint="last.ckpt", step=1, task=SimpleNamespace(spec=model.blocks[0].attn.spec))
        summary, _, _ = summarise(run, collector, 1)
        assert [layer["kv_heads"] for layer in summary["layers"].values()] == [1 if "kv" in variant else 2] * 2
        assert len(summary["layers"]["blocks.0.attn"]["projections"]["W_K"]["singular_values"]) == (8 if "kv" in variant else 16)
        sentences.append(
            "Key/value heads are shared (kv_heads = 1): W_K and W_V are d × kv_heads·d_h" in markdown(summary, ["spectra.png"])
        )
    assert sentences == [True, False]


@pytest.mark.slow  # some 28 models through the reference path and the per-head measures
def test_every_block_option_value_with_every_preset_is_inspected():
    """The collector and the weight report over the option cases (option_cases.py): every attention layer
    measured, finite, weights leaving the forward as it was; q_norm, k_norm and the MLPs are no projections."""
    from option_cases import option_cases

    for case in option_cases():
        model = case.build().eval()
        expected = model(*case.inputs())
        with Collector(model) as collector:
            run_batches([model], lambda m, b: m(*b), [case.inputs()], lambda b: b)
        torch.testing.assert_close(model(*case.inputs()), expected)
        assert collector.layers, case
        for name, layer in collector.layers.items():
            result = collector.attention[name].result()
            assert all(math.isfinite(e) for e in result["entropy"]) and len(result["entropy"]) == layer.num_heads, case
            kept = {"W_Q", "W_K", "W_V", "W_O", "W_Q,i W_K,iᵀ", "W_V,i W_O,i"}
            report = projection_report(layer)
            assert "W_O" in report and set(report) <= kept, (case, set(report))
            if "W_K" in report:
                assert len(report["W_K"]["singular_values"]) == layer.kv_heads * layer.head_dim, case


def test_the_nonlinear_query_ratio_is_the_size_of_f():
    model = tiny_gpt("nonlinear_query")
    tokens = torch.randint(0, 11, (2, 9))

    def ratios() -> dict[str, float]:
        with Collector(model) as collector:
            run_batches([model], lambda m, b: m(b), [tokens], lambda b: b)
        return collector.query_ratios()

    before = ratios()
    assert set(before) == {"blocks.0.attn", "blocks.1.attn"} and all(r > 0 for r in before.values())
    with torch.no_grad():
        model.blocks[0].attn.query_mlp.norm_out.weight.mul_(2.0)  # f(X) doubles; X does not change
    assert ratios()["blocks.0.attn"] == pytest.approx(2 * before["blocks.0.attn"])


# ------------------------------------------------------------------ the command

TINY_NET = ["--model.net.dim=16", "--model.net.num_heads=2"]
# No progress bar in these in-process runs: its redraws would fill the output the test reads; the bar's own
# path (every rank, every mode) is tests/test_multiprocess_matrix.py's.
ONE_STEP = [
    "--trainer.max_steps=1",
    "--trainer.limit_val_batches=0",
    "--trainer.enable_progress_bar=false",
    "--trainer.accelerator=cpu",
    "--trainer.devices=1",
]


def recipe_arguments(task: str, folder: Path) -> list[str]:
    """A recipe of each task, shrunk to one block of width 16, on offline data (as test_recipes_run)."""
    if task == "image":
        return ["--config", str(ROOT / "recipes/quickstart/vit_digits.yaml"), *TINY_NET, "--model.net.depth=1"]
    if task == "lm":
        return [
            "--config",
            str(ROOT / "recipes/quickstart/gpt_stdlib.yaml"),
            *TINY_NET,
            "--model.net.depth=1",
            "--trainer.val_check_interval=null",
            "--data.max_files=20",
            "--data.val_fraction=0.2",
            "--data.val_windows=4",
            "--data.max_len=16",
            "--data.batch_size=4",
        ]
    if task == "mqar":
        return ["--config", str(ROOT / "recipes/diagnostics/mqar.yaml"), *TINY_NET, "--model.net.depth=1"]
    if task == "text":
        recipe = ROOT / "recipes/super_attention/text_imdb.yaml"
        return [
            "--config",
            str(recipe),
            *TINY_NET,
            "--model.net.depth=1",
            *offline_data(recipe, folder),
            "--data.num_workers=0",
            "--data.batch_size=8",
        ]
    recipe = ROOT / "recipes/super_attention/translation_en_es.yaml"
    return [
        "--config",
        str(recipe),
        *TINY_NET,
        "--model.net.encoder_depth=1",
        "--model.net.decoder_depth=1",
        *offline_data(recipe, folder),
        "--data.num_workers=0",
        "--data.batch_size=8",
    ]


# task -> (variant, attention layers, whether a CLS / patch grid, whether causal)
TASKS = {
    "image": ("super", {"blocks.0.attn"}, True),
    "lm": ("super", {"blocks.0.attn"}, False),
    "mqar": ("nonlinear_query", {"blocks.0.attn"}, False),
    "text": ("super", {"blocks.0.attn"}, True),
    "translation": ("super", {"encoder.0.attn", "decoder.0.attn", "decoder.0.cross_attn"}, False),
}


def checksums(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def data_folder(tmp_path_factory) -> Path:
    return write_offline_data(tmp_path_factory.mktemp("inspect_data"), pairs=40)


@pytest.mark.slow
@pytest.mark.parametrize("task", list(TASKS))
def test_inspect_reads_a_checkpoint_of_every_task(task, data_folder, monkeypatch):
    monkeypatch.chdir(data_folder)  # data/ lands here
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    variant, layers, cls = TASKS[task]
    root = data_folder / "runs" / task
    assert (
        run_main(["fit", *recipe_arguments(task, data_folder), *ONE_STEP, f"--model.attention={variant}", f"--run.root={root}"])
        == 0
    )
    [run] = root.glob(f"*/*/{variant}/seed_0/version_0")
    before = checksums(run)
    compare = ["--compare-to", str(run)] if task == "image" else []
    assert run_main(["inspect", "--ckpt_path", str(run), "--batches=2", "--no-progress", *compare]) == 0
    assert {k: v for k, v in checksums(run).items() if not k.startswith("inspect/")} == before  # checkpoints untouched
    summary = json.loads((run / "inspect" / "summary.json").read_text())
    assert set(summary["layers"]) == layers and summary["variant"] == variant and summary["cls"] == cls
    assert (run / "inspect" / "inspect.md").is_file() and (run / "inspect" / "attention.png").is_file()
    assert list((run / "inspect" / "tensorboard").glob("events.out.tfevents.*"))
    for name, layer in summary["layers"].items():
        assert all(0.0 <= e <= 1.0 + 1e-9 for e in layer["attention"]["entropy"]), (name, layer["attention"])
        if variant == "super":
            assert layer["value_mix"]["size"] >= 2 and (run / "inspect" / "value_mix.png").is_file()
        if layer["causal"]:
            assert layer["attention"]["above_diagonal"] == [0.0, 0.0]
            if layer["value_mix"]:
                assert layer["value_mix"]["mass_above_diagonal"] == 0.0
    if task == "image":
        assert summary["grid"] == 4 and "patch_band_mass" in summary["layers"]["blocks.0.attn"]["value_mix"]
        assert summary["cka"]["values"] == [[pytest.approx(1.0)]]  # the run against itself
        from lit_attention.analysis import compare_runs

        table = compare_runs([run / "inspect", run / "inspect"], data_folder / "side_by_side", labels=["a", "b"])
        assert (table.parent / "compare.png").is_file()
        assert [
            line.split(" | ")[0] for line in table.read_text().splitlines() if line.startswith("| ") and "`super`" in line
        ] == ["| a", "| b"]
        # Written before the tasks moved and the architecture went into `net` (the study runs
        # committed under results/): the same model loads from the old layout of the hyper-parameters.
        from lit_attention.analysis.loading import checkpoint_file, load_run

        checkpoint = torch.load(checkpoint_file(run), weights_only=False)
        kept = checkpoint["hyper_parameters"]
        checkpoint["hyper_parameters"] = {
            **{k: v for k, v in kept.items() if k != "net"},
            **kept["net"],
            "_class_path": "lit_attention.tasks.ImageClassifier",
        }
        torch.save(checkpoint, data_folder / "old_layout.ckpt")
        old, new = load_run(data_folder / "old_layout.ckpt"), load_run(checkpoint_file(run))
        assert type(old.task) is type(new.task) and old.task.config == new.task.config
        assert all(torch.equal(a, b) for a, b in zip(old.task.state_dict().values(), new.task.state_dict().values()))
    if task == "lm":  # the cached token file read from another folder, as given
        monkeypatch.chdir(data_folder.parent)
        assert (
            run_main(
                [
                    "inspect",
                    "--ckpt_path",
                    str(run),
                    "--batches=1",
                    "--no-progress",
                    "--output",
                    str(data_folder / "lm"),
                    f"--data_dir={data_folder / 'data'}",
                ]
            )
            == 0
        )
        assert not (data_folder.parent / "data").exists()
    if task == "mqar":
        assert run_main(["inspect", "--ckpt_path", str(run), "--data_dir=elsewhere"]) == 2  # it generates its data
        assert summary["layers"]["blocks.0.attn"]["query_ratio"] > 0
        assert set(summary["layers"]["blocks.0.attn"]["projections"]) == {"W_K", "W_V", "W_O", "W_V,i W_O,i"}
    if task == "translation":
        assert summary["layers"]["decoder.0.attn"]["causal"] and not summary["layers"]["encoder.0.attn"]["causal"]


@pytest.mark.parametrize("problem", ["garbage", "missing", "empty_run", "bad_batches", "unknown_option"])
def test_a_checkpoint_or_option_inspect_cannot_use_is_one_sentence(problem, tmp_path, capsys):
    argv = ["inspect", "--ckpt_path", str(tmp_path / "model.ckpt")]
    if problem == "garbage":
        (tmp_path / "model.ckpt").write_bytes(b"not a checkpoint at all")
    elif problem == "empty_run":
        (tmp_path / "version_0" / "checkpoints").mkdir(parents=True)
        argv[-1] = str(tmp_path / "version_0")
    elif problem == "bad_batches":
        argv.append("--batches=0")
    elif problem == "unknown_option":
        argv.append("--batch=3")
    capsys.readouterr()
    assert run_main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [sentence] = [line for line in err.splitlines() if line.startswith("error: ")]
    expected = {
        "garbage": "cannot be read",
        "missing": "does not exist",
        "empty_run": "holds no checkpoint",
        "bad_batches": "--batches 0 is invalid",
        "unknown_option": "--batch=3",
    }[problem]
    assert expected in sentence, sentence
    assert not list(tmp_path.rglob("inspect*"))


def test_padded_rows_and_keys_are_left_out():
    """Uniform attention over each row's real keys: entropy 1 and first-token weight 1 / (real keys), whatever
    the padded query rows hold."""
    from lit_attention.analysis.collect import AttentionSums

    padding = torch.tensor([[False, False, True, True], [False, False, False, False]])
    real = (~padding).double()
    weights = (real[:, None, :] / real.sum(dim=1)[:, None, None]).expand(2, 4, 4).clone()
    weights[0, 2:] = torch.tensor([1.0, 0.0, 0.0, 0.0])  # padded queries: anything
    sums = AttentionSums(1, Geometry(), causal=False, self_attention=True)
    sums.update(weights[:, None], padding, padding)
    result = sums.result()
    assert result["entropy"] == [pytest.approx(1.0)]
    assert result["first"] == [pytest.approx((2 * 0.5 + 4 * 0.25) / 6)]  # 6 real rows


@pytest.mark.slow  # trains a tiny run once (shared), then inspects copies of it
def test_a_run_copied_under_another_name_is_inspected_beside_its_checkpoints_and_without_config_says_so(
    finished_run, tmp_path, capsys
):
    """A run copied to a folder not named version_<k>: its report goes beside its checkpoints/ (it was refused
    as an --output inside them, an option never given); without its config.yaml, the sentence names that."""
    import shutil

    trained = finished_run(
        ["--config", str(ROOT / "recipes/quickstart/vit_digits.yaml"), *TINY_NET, "--model.net.depth=1", *ONE_STEP]
    )
    [run] = trained.glob("runs/**/version_0")
    copied = Path(shutil.copytree(run, tmp_path / "my_run"))
    assert run_main(["inspect", "--ckpt_path", str(copied), "--batches=1", "--no-progress"]) == 0
    assert (copied / "inspect" / "inspect.md").is_file()
    shutil.rmtree(copied / "inspect")
    (copied / "config.yaml").unlink()
    assert run_main(["inspect", "--ckpt_path", str(copied), "--batches=1"]) == 2
    err = capsys.readouterr().err
    assert f"The run {str(copied)!r} has no config.yaml" in err and "--output" not in err
    assert not (copied / "inspect").exists()  # nothing written
