"""Every recipe under recipes/ parses through the real CLI, offline, without touching any data.

In-process: `main(["fit", ..., "--print_config"])` (the console script's entry point) prints each
recipe's resolved config, and `plan_run` (what `compare` checks runs with) builds each model on the
meta device with the data's sizes. One real `lit-attention` subprocess checks that the in-process
printing is what the console script prints.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import datasets
import huggingface_hub
import pytest
import yaml

import datamodules.language_modeling as language_modeling
from lit_attention.modeling.attention import MultiHeadAttention
from lit_attention.modeling.config import GROWABLE
from lit_attention.sweep.planning import plan_run
from lit_attention.main import main

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
TRAINER = RECIPES / "trainer"
CPU_DEBUG = TRAINER / "cpu_debug.yaml"
VIT_DIGITS = RECIPES / "quickstart" / "vit_digits.yaml"
NQ = RECIPES / "nonlinear_query"
NQ_BASE = NQ / "gpt3_small.yaml"
TOKENS_PER_STEP = 491_520  # the nonlinear-query paper's ~491k tokens per optimizer step
# Every nonlinear-query overlay: (attention, mlp_ratio, lr, weight decay, tied, half scale), as the
# authors' released configs run each arm (controlled/: only the query differs from the baseline).
NQ_ARMS = {
    "standard": ("standard", 4.0, 6e-4, 0.1, True, False),
    "identity_query": ("identity_query", 4.0, 6e-4, 2**-5, False, True),
    "residual_query": ("residual_query", 4.0, 6e-4, 0.1, True, True),
    "nonlinear_query": ("nonlinear_query", 4.0, 8e-4, 0.1, True, True),
    "param_matched_control": ("standard", 4.75, 6e-4, 0.1, True, False),
    "controlled/identity_query": ("identity_query", 4.0, 6e-4, 0.1, True, True),
    "controlled/nonlinear_query": ("nonlinear_query", 4.0, 6e-4, 0.1, True, True),
}


class OfflineTokenizer:
    """The GPT-2 tokenizer's sizes, for building models offline (the real one is a download)."""

    def __init__(self, name: str) -> None:
        assert name == "gpt2", name
        self.vocab_size, self.pad_id, self.bos_id, self.eos_id = 50258, 50257, None, 50256


def recipe_files() -> list[Path]:
    return sorted(p for p in RECIPES.rglob("*.yaml") if TRAINER not in p.parents)


def stack(recipe: Path) -> list[Path]:
    """The config files a recipe is parsed with: its base first when it is a nonlinear-query overlay."""
    return [NQ_BASE, recipe] if NQ in recipe.parents and recipe != NQ_BASE else [recipe]


def config_args(configs: list[Path]) -> list[str]:
    return [word for config in configs for word in ("--config", str(config))]


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.fixture(scope="module")
def offline_home(tmp_path_factory):
    """An empty working directory and a private home for every cache, for the whole module."""
    home = tmp_path_factory.mktemp("recipes")
    saved = dict(os.environ)
    os.environ.update(
        {
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "HF_HOME": str(home / "hf_home"),
            "TORCH_HOME": str(home / "torch_home"),
        }
    )
    # The libraries read HF_HUB_OFFLINE when imported, maybe before this module: set what they read, or
    # the GPT-2 tokenizer's lookup spends its network retries (about 20 s per recipe) before failing.
    flags = [(datasets.config, "HF_HUB_OFFLINE"), (huggingface_hub.constants, "HF_HUB_OFFLINE")]
    saved_flags = [getattr(owner, name) for owner, name in flags]
    for owner, name in flags:
        setattr(owner, name, True)
    (home / "cwd").mkdir()
    cwd = os.getcwd()
    os.chdir(home / "cwd")
    yield home
    os.chdir(cwd)
    for (owner, name), value in zip(flags, saved_flags):
        setattr(owner, name, value)
    os.environ.clear()
    os.environ.update(saved)


def print_config(configs: list[Path], capsys) -> dict:
    """The config `lit-attention fit --config ... --print_config` prints, run in-process."""
    with pytest.raises(SystemExit) as exit_:
        main(["fit", *config_args(configs), "--print_config"])
    printed = capsys.readouterr()
    assert exit_.value.code == 0, printed.err[-3000:]
    return yaml.safe_load(printed.out)


class Plans(dict):
    """{recipe: plan_run(recipe + cpu_debug)}, each planned when first read as plans[recipe] (the fast tier
    reads a few recipes; planning all of them costs 3.5-7 CPU-s), with a stand-in for the GPT-2 tokenizer
    download. Only indexing plans: `in`, len() and iteration see just the recipes read so far."""

    def __missing__(self, recipe: Path):
        original = language_modeling.pretrained_tokenizer
        language_modeling.pretrained_tokenizer = OfflineTokenizer
        try:
            self[recipe] = plan_run(config_args([*stack(recipe), CPU_DEBUG]))
        finally:
            language_modeling.pretrained_tokenizer = original
        return self[recipe]


@pytest.fixture(scope="module")
def plans(offline_home):
    return Plans()


# ---------------------------------------------------------------------------------------------- every recipe


@pytest.mark.parametrize("recipe", recipe_files(), ids=rel)
@pytest.mark.slow
def test_recipe_prints_its_config_and_builds_offline(recipe, plans, offline_home, capsys):
    config = print_config([*stack(recipe), CPU_DEBUG], capsys)
    raw = yaml.safe_load(recipe.read_text())
    is_overlay = stack(recipe) != [recipe]

    # A recipe names its run and seeds it (overlays inherit both from their base unless they rename).
    assert config["run"]["name"], "run.name is not set"
    assert isinstance(config["seed_everything"], int)
    if not is_overlay:
        assert raw["run"]["name"] == rel(recipe.with_suffix("")).removeprefix("recipes/")
        assert "seed_everything" in raw
        # The baseline variant, with settings that are not a variant (kv_heads of a Llama-style recipe).
        assert raw["model"]["init_args"]["attention"].split(",")[0] == "standard", "switch variants with --model.attention"
    # Sizes the DataModule defines are left to it, except a size deliberately larger than the data's.
    model_args = (raw.get("model") or {}).get("init_args") or {}
    net = model_args.get("net") or {}
    sizes = plans[recipe].datamodule.model_sizes()
    for key in set(net) & set(sizes):
        assert key in GROWABLE and net[key] > sizes[key], f"model.init_args.net repeats the data's {key}"
    # The schedule follows the trainer: no recipe repeats the number of steps in the model.
    assert "max_steps" not in model_args
    # cpu_debug (stacked last) really is in effect: a smoke run would stay on the CPU.
    assert config["trainer"]["accelerator"] == "cpu" and config["trainer"]["max_steps"] == 20

    # The model builds with the data's sizes copied in, before any data is read.
    counts = plans[recipe].model.param_counts
    assert counts["total"] > counts["attention"] > 0


@pytest.mark.slow
def test_printed_config_shows_the_sizes_the_run_uses(offline_home, capsys):
    config = print_config([VIT_DIGITS], capsys)
    net = config["model"]["init_args"]["net"]
    assert (net["num_classes"], net["image_size"], net["in_channels"]) == (10, 8, 1)  # the digits', not defaults


@pytest.mark.slow  # plans every recipe: 3.5-7 CPU-s
def test_nothing_was_downloaded_or_written(plans, offline_home):
    assert all(plans[recipe] for recipe in recipe_files())  # every recipe has been planned
    assert list((offline_home / "cwd").iterdir()) == [], "the CLI wrote files (data/ or runs/) while only parsing"
    hf_home = offline_home / "hf_home"
    assert not hf_home.exists() or not any(p.is_file() for p in hf_home.rglob("*"))
    assert not (offline_home / "torch_home").exists()


@pytest.mark.slow  # the console script itself, in a process of its own
def test_in_process_printing_is_what_the_console_script_prints(offline_home, capsys):
    configs = [*stack(NQ / "nonlinear_query.yaml"), CPU_DEBUG]
    in_process = print_config(configs, capsys)
    script = Path(sys.executable).with_name("lit-attention")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "lit_attention"]
    done = subprocess.run([*command, "fit", *config_args(configs), "--print_config"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert yaml.safe_load(done.stdout) == in_process


def test_the_super_attention_recipes_cover_the_papers_experiments(plans):
    expected = {
        "vit_mnist": ("ImageClassifier", "mnist"),
        "vit_cifar10": ("ImageClassifier", "cifar10"),
        "vit_cifar100": ("ImageClassifier", "cifar100"),
        "text_imdb": ("TextClassifier", "stanfordnlp/imdb"),
        "text_amazon_polarity": ("TextClassifier", "fancyzhx/amazon_polarity"),
        "translation_en_es": ("Seq2SeqTranslator", "Helsinki-NLP/opus_books"),
    }
    for name, (task, dataset) in expected.items():
        plan = plans[RECIPES / "super_attention" / f"{name}.yaml"]
        assert type(plan.model).__name__ == task
        assert plan.config.data.init_args.dataset == dataset
        if task == "ImageClassifier":
            model = plan.config.model.init_args
            assert model.net.image_size % model.net.patch_size == 0
        if name == "translation_en_es":
            assert plan.config.data.init_args.config == "en-es"


@pytest.mark.parametrize("preset", sorted(TRAINER.glob("*.yaml")), ids=rel)
@pytest.mark.slow
def test_trainer_preset_stacks_on_the_digits_recipe(preset, offline_home, capsys):
    config = print_config([VIT_DIGITS, preset], capsys)
    assert config["run"]["name"] == "quickstart/vit_digits"
    for key, value in yaml.safe_load(preset.read_text())["trainer"].items():
        shown = config["trainer"][key]
        if isinstance(value, dict):  # e.g. a strategy given by class_path + init_args
            assert shown["class_path"] == value["class_path"]
            for name, argument in value.get("init_args", {}).items():
                assert shown["init_args"][name] == argument, (key, name)
        else:
            assert shown == value, key


# ---------------------------------------------------------------------------------------------- the nonlinear-query arms


def test_nonlinear_query_arms_are_the_authors_settings(plans):
    """Each overlay selects its arm as the authors' released config runs it, and changes nothing else."""
    base = plans[NQ_BASE].config
    for arm, (attention, mlp_ratio, lr, weight_decay, tied, half) in NQ_ARMS.items():
        plan = plans[NQ / f"{arm}.yaml"]
        model = plan.config.model.init_args
        assert (model.attention, model.net.mlp_ratio, model.lr, model.weight_decay, model.net.tie_weights) == (
            attention,
            mlp_ratio,
            lr,
            weight_decay,
            tied,
        ), arm
        layer = next(m for m in plan.model.modules() if isinstance(m, MultiHeadAttention))
        assert layer.scale == pytest.approx((0.5 if half else 1.0) / 64**0.5), arm
        assert model.decay_positions, arm  # every >= 2-D parameter decayed, as nanoGPT and the authors
        for section in ("trainer", "data", "seed_everything"):
            assert plan.config[section] == base[section], (arm, section)
        changed = {k.removeprefix("net.") for k in model.keys() if model[k] != base.model.init_args[k]}  # nested keys
        assert changed <= {"attention", "mlp_ratio", "lr", "weight_decay", "tie_weights"}, (arm, changed)
    # Arms that share an attention name log under different run names (controls, controlled arms).
    names = {arm: plans[NQ / f"{arm}.yaml"].config.run.name for arm in NQ_ARMS}
    assert names["param_matched_control"] != names["standard"]
    assert names["controlled/identity_query"] != names["identity_query"]
    data = base.data.init_args
    assert (data.val_split, data.split_seed, data.val_fraction) == ("random", 2357, 0.0005)


def test_nonlinear_query_arms_have_the_parameter_counts_the_papers_compare(plans):
    counts = {arm: plans[NQ / f"{arm}.yaml"].model.param_counts for arm in NQ_ARMS}
    model = plans[NQ / "standard.yaml"].config.model.init_args
    d, depth = model.net.dim, model.net.depth
    assert (d, depth, model.net.num_heads, model.net.max_len, model.net.vocab_size) == (768, 12, 12, 1024, 50304)
    standard = counts["standard"]
    # GPT-2 small without biases, tied, with the 50304 vocabulary: 124.4M, nanoGPT's count plus positions.
    assert standard["total"] == 50304 * d + 1024 * d + depth * (12 * d * d + 2 * d) + d == 124_373_760
    # Per layer: attention 4d^2 + MLP 2*4d^2 = 12d^2 (+ two norm weights); the embeddings are apart.
    assert standard["non_embedding"] == depth * (12 * d * d + 2 * d) + d
    assert standard["attention"] == depth * 4 * d * d
    # identity_query drops W_Q; nonlinear_query swaps it for W_1 (d x d/2) + W_2 (d/2 x d) + 2 norms.
    assert standard["attention"] - counts["controlled/identity_query"]["attention"] == depth * d * d
    assert counts["nonlinear_query"]["attention"] - standard["attention"] == depth * 2 * d
    # The authors' identity arm is untied: its output head is a second 50304 x d matrix.
    assert counts["identity_query"]["total"] - counts["controlled/identity_query"]["total"] == 50304 * d
    # The control: MLP 2*4.75d^2 = 9.5d^2 -> 13.5d^2 per layer, +12.5% non-embedding parameters.
    control = counts["param_matched_control"]
    assert control["attention"] == standard["attention"]
    assert control["non_embedding"] - standard["non_embedding"] == depth * 2 * (int(4.75 * d) - 4 * d) * d
    assert math.isclose(control["non_embedding"] / standard["non_embedding"], 1.125, abs_tol=1e-3)


@pytest.mark.slow
def test_gpt3_small_base_trains_on_the_documented_tokens_per_step(offline_home, capsys):
    config = print_config([NQ_BASE], capsys)  # as shipped: its 8-GPU trainer, no cpu_debug
    trainer, model, data = config["trainer"], config["model"]["init_args"], config["data"]["init_args"]
    gpus = trainer["devices"] * trainer["num_nodes"]
    sequences = data["batch_size"] * trainer["accumulate_grad_batches"] * gpus
    assert sequences * data["max_len"] == TOKENS_PER_STEP

    # The arithmetic written in the recipe's comments is the configured one; the layouts it names keep the
    # global batch it states (tests/test_global_batch.py derives each).
    text = NQ_BASE.read_text()
    documented = re.search(r"Batch: (\d+) windows of ([\d,]+) tokens = ([\d,]+) tokens per optimizer step", text)
    assert documented, "the base recipe no longer documents its tokens per step"
    windows, length, total = (int(group.replace(",", "")) for group in documented.groups())
    assert windows == config["run"]["global_batch_size"] == sequences and length == data["max_len"]
    assert total == TOKENS_PER_STEP
    assert f"{data['batch_size']} x {trainer['accumulate_grad_batches']} accumulation steps x {gpus} GPUs" in text

    # The paper's optimisation: AdamW (0.9, 0.95), wd 0.1, 6e-4 -> 6e-5 cosine, 2,000 warm-up steps, bf16.
    assert trainer["precision"] == "bf16-mixed" and trainer["gradient_clip_val"] == 1.0
    assert model["lr"] == 6e-4 and math.isclose(model["lr"] * model["min_lr_ratio"], 6e-5)
    assert model["betas"] == [0.9, 0.95] and model["weight_decay"] == 0.1 and model["warmup_steps"] == 2000
    assert (data["dataset"], data["tokenizer"], data["max_len"]) == ("Skylion007/openwebtext", "gpt2", 1024)
    net = model["net"]
    assert (net["dim"], net["depth"], net["num_heads"], net["mlp_ratio"]) == (768, 12, 12, 4.0)
    # Validation every 1,000 optimizer steps on 2,400 windows, the authors' 200 x 12.
    assert trainer["val_check_interval"] == 1000 * trainer["accumulate_grad_batches"] and data["val_windows"] == 2400
    budget = re.search(r"max_steps ([\d,]+) x 491,520 = ([\d.]+)B tokens", text)
    assert budget and int(budget.group(1).replace(",", "")) == trainer["max_steps"]
    assert math.isclose(trainer["max_steps"] * TOKENS_PER_STEP / 1e9, float(budget.group(2)), abs_tol=0.05)


# ---------------------------------------------------------------------------------------------- the modern block


def test_modern_block_overlay_keeps_the_non_embedding_parameters_and_drops_the_positions(plans):
    classic, modern = plans[NQ / "standard.yaml"], plans[NQ / "modern_block.yaml"]
    net = modern.config.model.init_args.net
    assert (net.position, net.norm, net.mlp, net.mlp_hidden) == ("rope", "rmsnorm", "swiglu", None)
    assert modern.config.run.name == "nonlinear_query/gpt3_small_modern"  # apart from the classic block's runs
    mlp = next(m for m in modern.model.modules() if type(m).__name__ == "SwiGLU")
    assert mlp.fc2.in_features == 2048  # 2/3 of 4 x 768
    counts, standard = modern.model.param_counts, classic.model.param_counts
    assert counts["non_embedding"] == standard["non_embedding"] and counts["attention"] == standard["attention"]
    assert standard["total"] - counts["total"] == 1024 * 768  # the learned positions
    for section in ("trainer", "data", "seed_everything"):
        assert modern.config[section] == classic.config[section], section


def test_llama_style_quickstart_is_the_stdlib_quickstart_in_a_modern_block(plans):
    llama = plans[RECIPES / "quickstart" / "gpt_llama_stdlib.yaml"]
    classic = plans[RECIPES / "quickstart" / "gpt_stdlib.yaml"]
    net = llama.config.model.init_args.net
    assert (net.position, net.norm, net.mlp) == ("rope", "rmsnorm", "swiglu")
    layer = next(m for m in llama.model.modules() if isinstance(m, MultiHeadAttention))
    assert (layer.num_heads, layer.kv_heads) == (4, 2)
    for section in ("trainer", "data", "seed_everything"):
        assert llama.config[section] == classic.config[section], section
    model, base = llama.config.model.init_args, classic.config.model.init_args
    assert {k for k in model.keys() if model[k] != base[k]} == {"attention", "net.position", "net.norm", "net.mlp"}


@pytest.mark.parametrize(
    "overlay",
    sorted(p for p in (ROOT / "recipes").rglob("*.yaml") if p.read_text().startswith("# Overlay for")),
    ids=lambda p: str(p.relative_to(ROOT / "recipes")),
)
def test_an_overlay_run_alone_is_one_sentence_naming_the_recipe_it_stacks_on(overlay, in_tmp, capsys):
    from in_process import run_main

    assert run_main(["fit", "--config", str(overlay)]) == 2
    err = capsys.readouterr().err
    base = re.match(r"# Overlay for (\S+?):", overlay.read_text()).group(1)
    assert f"is an overlay: it changes {base}" in err and f"--config {base} --config {overlay}" in err
    assert (ROOT / base).is_file()
    assert run_main(["fit", "-c", str(overlay)]) == 2 and "is an overlay" in capsys.readouterr().err  # -c is --config
