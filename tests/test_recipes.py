"""Every recipe under recipes/ parses through the real CLI, offline, without touching any data.

Starting `lit-attention` costs ~5 s of imports, and there are ~20 configurations to check, so one
subprocess (offline, in an empty directory) runs the CLI's own `main(["fit", ..., "--print_config"])`
once per configuration and, for each recipe, the CLI's own parse -> link data sizes -> build the model
(on the meta device) path that `fit` runs before any data is touched. One real `lit-attention`
subprocess checks that the batched runs print exactly what the console script prints.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
TRAINER = RECIPES / "trainer"
CPU_DEBUG = TRAINER / "cpu_debug.yaml"
VIT_DIGITS = RECIPES / "quickstart" / "vit_digits.yaml"
NQ = RECIPES / "nonlinear_query"
NQ_BASE = NQ / "gpt3_small.yaml"
NQ_ARMS = {  # overlay -> (attention, mlp_ratio) it must select
    "standard": ("standard", 4.0),
    "identity_query": ("identity_query", 4.0),
    "nonlinear_query": ("nonlinear_query", 4.0),
    "param_matched_control": ("standard", 4.75),
}
TOKENS_PER_STEP = 491_520  # the nonlinear-query paper's ~491k tokens per optimizer step
# Directories whose YAMLs other than the base are overlays, parsed stacked after the base.
OVERLAY_BASES = {NQ: NQ_BASE}
# What the CLI copies from the DataModule into the model: recipes must not repeat these.
DATA_TO_MODEL = {
    "num_classes", "image_size", "in_channels", "vocab_size", "max_len", "pad_id", "bos_id", "eos_id",
    "max_src_len", "max_tgt_len",
}
# Pretrained tokenizers cannot be fetched offline; for the model build only, they are replaced by a
# stand-in with the real vocabulary size (printing the config never loads them).
OFFLINE_VOCABS = {"gpt2": 50257}


def recipe_files() -> list[Path]:
    return sorted(p for p in RECIPES.rglob("*.yaml") if TRAINER not in p.parents)


def trainer_presets() -> list[Path]:
    return sorted(TRAINER.glob("*.yaml"))


def stack(recipe: Path) -> list[Path]:
    """The config files a recipe is parsed with: its base first when it is an overlay."""
    base = OVERLAY_BASES.get(recipe.parent)
    return [base, recipe] if base is not None and recipe != base else [recipe]


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def fit_args(configs: list[Path], print_config: bool = True) -> list[str]:
    args = ["fit"]
    for config in configs:
        args += ["--config", str(config)]
    return args + (["--print_config"] if print_config else [])


def jobs() -> dict[str, dict]:
    """id -> {"kind": "print" | "build", "args": [...]}."""
    found = {}
    for recipe in recipe_files():
        configs = [*stack(recipe), CPU_DEBUG]
        found[f"print:{rel(recipe)}"] = {"kind": "print", "args": fit_args(configs)}
        found[f"build:{rel(recipe)}"] = {"kind": "build", "args": fit_args(configs, print_config=False)[1:]}
    for preset in trainer_presets():
        found[f"print:{rel(preset)}"] = {"kind": "print", "args": fit_args([VIT_DIGITS, preset])}
    # The base as shipped (its 8-GPU trainer, no cpu_debug), for the tokens-per-step arithmetic.
    found["print:nq_base_as_shipped"] = {"kind": "print", "args": fit_args([NQ_BASE])}
    return found


DRIVER = textwrap.dedent(
    """
    import contextlib, io, json, sys, traceback

    jobs_path, out_path = sys.argv[1], sys.argv[2]
    sys.argv = sys.argv[:1]  # LightningCLI(args=...) warns when sys.argv also holds arguments
    jobs = json.load(open(jobs_path))
    offline_vocabs = json.loads(OFFLINE_VOCABS)

    import torch
    from lit_attention import cli

    results = {}
    # 1. The real entry point, exactly as `lit-attention fit ... --print_config` runs it.
    for key, job in jobs.items():
        if job["kind"] != "print":
            continue
        out, err = io.StringIO(), io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.main(job["args"])
            except SystemExit as exit:
                code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
            except BaseException:
                code, err = 1, io.StringIO(traceback.format_exc())
        results[key] = {"rc": code, "stdout": out.getvalue(), "stderr": err.getvalue()[-4000:]}

    # 2. What `fit` does before touching data: parse, copy the data's sizes into the model
    #    (`before_instantiate_classes`, which also builds the model once on the meta device).
    import datamodules.language_modeling as lm
    import datamodules.text_classification as tc

    class OfflineTokenizer:
        def __init__(self, name):
            if name not in offline_vocabs:
                raise RuntimeError(f"no offline stand-in for the pretrained tokenizer {name!r}; add it to OFFLINE_VOCABS")
            self.name, self.vocab_size = name, offline_vocabs[name]
            self.pad_id, self.bos_id, self.eos_id = None, None, self.vocab_size - 1

    lm.pretrained_tokenizer = tc.pretrained_tokenizer = OfflineTokenizer

    class BuildOnly(cli.LitAttentionCLI):
        def instantiate_classes(self):
            config = self._subcommand_config()
            with torch.device("meta"):
                self.task = cli._class_of(config.model)(**cli._init_args(config.model))

    for key, job in jobs.items():
        if job["kind"] != "build":
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                built = BuildOnly(args=job["args"], run=False)
            results[key] = {
                "rc": 0,
                "model": cli._init_args(built.config.model),
                "params": built.task.model.parameter_counts(),
            }
        except BaseException:
            results[key] = {"rc": 1, "stderr": traceback.format_exc()[-4000:]}

    json.dump(results, open(out_path, "w"), default=str)
    """
).replace("OFFLINE_VOCABS", repr(json.dumps(OFFLINE_VOCABS)), 1)


def offline_env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(home / "hf_home"),  # anything downloaded or cached would land here
        "TORCH_HOME": str(home / "torch_home"),
        "LIT_ATTENTION_TRACEBACK": "1",
    }


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """(empty working directory, private home for caches)."""
    base = tmp_path_factory.mktemp("recipes")
    (base / "cwd").mkdir()
    (base / "home").mkdir()
    return base / "cwd", base / "home"


@pytest.fixture(scope="module")
def results(workspace):
    cwd, home = workspace
    driver, jobs_file, out_file = home / "driver.py", home / "jobs.json", home / "results.json"
    driver.write_text(DRIVER)
    jobs_file.write_text(json.dumps(jobs()))
    done = subprocess.run(
        [sys.executable, str(driver), str(jobs_file), str(out_file)],
        cwd=cwd, env=offline_env(home), capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(out_file.read_text())


def printed(results, key: str) -> dict:
    result = results[key]
    assert result["rc"] == 0, f"{key} exited {result['rc']}:\n{result['stderr']}"
    return yaml.safe_load(result["stdout"])


def built(results, recipe: Path) -> dict:
    result = results[f"build:{rel(recipe)}"]
    assert result["rc"] == 0, f"{rel(recipe)} does not build:\n{result['stderr']}"
    return result


# ---------------------------------------------------------------------------------------------- (1)


@pytest.mark.parametrize("recipe", recipe_files(), ids=rel)
def test_recipe_prints_its_config_and_builds_offline(results, recipe):
    config = printed(results, f"print:{rel(recipe)}")
    raw = yaml.safe_load(recipe.read_text())
    is_overlay = stack(recipe) != [recipe]

    # A recipe names its run and seeds it (overlays inherit both from their base unless they rename).
    assert config["run"]["name"], "run.name is not set"
    assert isinstance(config["seed_everything"], int)
    if not is_overlay:
        assert raw["run"]["name"] == rel(recipe.with_suffix("")).removeprefix("recipes/")
        assert "seed_everything" in raw
        assert raw["model"]["init_args"]["attention"] == "standard", "switch variants with --model.attention"
    # Sizes that the DataModule defines are left to the CLI.
    repeated = DATA_TO_MODEL & set((raw.get("model") or {}).get("init_args") or {})
    assert not repeated, f"model.init_args repeats sizes the data defines: {sorted(repeated)}"
    # cpu_debug (stacked last) really is in effect: a smoke run would stay on the CPU.
    assert config["trainer"]["accelerator"] == "cpu" and config["trainer"]["max_steps"] == 20

    # The model builds with the data's sizes copied in, before any data is read.
    result = built(results, recipe)
    assert result["params"]["total"] > result["params"]["attention"] > 0


def test_nothing_was_downloaded_or_written(results, workspace):
    cwd, home = workspace
    assert results  # every configuration has been run
    assert list(cwd.iterdir()) == [], "the CLI wrote files (data/ or runs/) while only parsing"
    assert not (home / "hf_home").exists() or not any(p.is_file() for p in (home / "hf_home").rglob("*"))
    assert not (home / "torch_home").exists()


def test_batched_runs_print_what_the_console_script_prints(results, workspace):
    cwd, home = workspace
    recipe = NQ / "nonlinear_query.yaml"
    script = Path(sys.executable).with_name("lit-attention")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "lit_attention.cli"]
    done = subprocess.run(
        command + fit_args([*stack(recipe), CPU_DEBUG]), cwd=cwd, env=offline_env(home),
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == results[f"print:{rel(recipe)}"]["stdout"]
    assert list(cwd.iterdir()) == []


def test_the_super_attention_recipes_cover_the_papers_experiments(results):
    expected = {
        "vit_mnist": ("ImageClassifier", "mnist"),
        "vit_cifar10": ("ImageClassifier", "cifar10"),
        "vit_cifar100": ("ImageClassifier", "cifar100"),
        "text_imdb": ("TextClassifier", "stanfordnlp/imdb"),
        "text_amazon_polarity": ("TextClassifier", "fancyzhx/amazon_polarity"),
        "translation_en_es": ("Seq2SeqTranslator", "Helsinki-NLP/opus_books"),
    }
    for name, (task, dataset) in expected.items():
        recipe = RECIPES / "super_attention" / f"{name}.yaml"
        config = printed(results, f"print:{rel(recipe)}")
        assert config["model"]["class_path"].endswith(task)
        assert config["data"]["init_args"]["dataset"] == dataset
        model = built(results, recipe)["model"]
        if task == "ImageClassifier":
            assert model["image_size"] % model["patch_size"] == 0
        if name == "translation_en_es":
            assert config["data"]["init_args"]["config"] == "en-es"


# ---------------------------------------------------------------------------------------------- (2)


@pytest.mark.parametrize("preset", trainer_presets(), ids=rel)
def test_trainer_preset_stacks_on_the_digits_recipe(results, preset):
    config = printed(results, f"print:{rel(preset)}")
    assert config["run"]["name"] == "quickstart/vit_digits"
    for key, value in yaml.safe_load(preset.read_text())["trainer"].items():
        shown = config["trainer"][key]
        if isinstance(value, dict):  # e.g. a strategy given by class_path + init_args
            assert shown["class_path"] == value["class_path"]
            for name, argument in value.get("init_args", {}).items():
                assert shown["init_args"][name] == argument, (key, name)
        else:
            assert shown == value, key


# ---------------------------------------------------------------------------------------------- (3)


def nq_config(results, arm: str) -> dict:
    return printed(results, f"print:{rel(NQ / f'{arm}.yaml')}")


def test_nonlinear_query_overlays_select_their_arm_and_change_nothing_else(results):
    configs = {arm: nq_config(results, arm) for arm in NQ_ARMS}
    reference = configs["standard"]
    for arm, (attention, mlp_ratio) in NQ_ARMS.items():
        model = configs[arm]["model"]["init_args"]
        assert (model["attention"], model["mlp_ratio"]) == (attention, mlp_ratio), arm
        for section in ("trainer", "data", "seed_everything"):
            assert configs[arm][section] == reference[section], (arm, section)
        others = {k: v for k, v in model.items() if k not in ("attention", "mlp_ratio")}
        assert others == {k: v for k, v in reference["model"]["init_args"].items() if k not in ("attention", "mlp_ratio")}
    # Each arm logs under its own directory: the control must not land in the baseline's standard/.
    assert configs["param_matched_control"]["run"]["name"] != reference["run"]["name"]
    assert nq_config(results, "nonlinear_query")["run"]["name"] == reference["run"]["name"]


def test_nonlinear_query_arms_have_the_parameter_counts_the_papers_compare(results):
    counts = {arm: built(results, NQ / f"{arm}.yaml")["params"] for arm in NQ_ARMS}
    model = built(results, NQ / "standard.yaml")["model"]
    d, depth = model["dim"], model["depth"]
    assert (d, depth, model["num_heads"], model["max_len"], model["vocab_size"]) == (768, 12, 12, 1024, 50257)
    standard = counts["standard"]
    # Per layer: attention 4d^2 + MLP 2*4d^2 = 12d^2 (+ two norm weights); the embeddings are apart.
    assert standard["non_embedding"] == depth * (12 * d * d + 2 * d) + d
    assert standard["attention"] == depth * 4 * d * d
    # identity_query drops W_Q; nonlinear_query swaps it for W_1 (d x d/2) + W_2 (d/2 x d) + 2 norms.
    assert standard["attention"] - counts["identity_query"]["attention"] == depth * d * d
    assert counts["nonlinear_query"]["attention"] - standard["attention"] == depth * 2 * d
    # The control: MLP 2*4.75d^2 = 9.5d^2 -> 13.5d^2 per layer, +12.5% non-embedding parameters.
    control = counts["param_matched_control"]
    assert control["attention"] == standard["attention"]
    assert control["non_embedding"] - standard["non_embedding"] == depth * 2 * (int(4.75 * d) - 4 * d) * d
    assert math.isclose(control["non_embedding"] / standard["non_embedding"], 1.125, abs_tol=1e-3)


def test_gpt3_small_base_trains_on_the_documented_tokens_per_step(results):
    config = printed(results, "print:nq_base_as_shipped")
    trainer, model, data = config["trainer"], config["model"]["init_args"], config["data"]["init_args"]
    gpus = trainer["devices"] * trainer["num_nodes"]
    sequences = data["batch_size"] * trainer["accumulate_grad_batches"] * gpus
    assert sequences * data["max_len"] == TOKENS_PER_STEP

    # The arithmetic written in the recipe's comments is the configured one, and every alternative it
    # documents keeps the same tokens per step.
    text = NQ_BASE.read_text()
    documented = re.search(r"tokens per optimizer step = (\d+) x (\d+) x (\d+) x (\d+) GPUs = ([\d,]+)", text)
    assert documented, "the base recipe no longer documents its tokens per step"
    batch, length, accumulation, devices, total = documented.groups()
    assert (int(batch), int(length), int(accumulation), int(devices)) == (
        data["batch_size"], data["max_len"], trainer["accumulate_grad_batches"], gpus)
    assert int(total.replace(",", "")) == TOKENS_PER_STEP
    for match in re.finditer(r"(\d+) x 1024 x (\d+) x (\d+)", text):
        assert math.prod(map(int, match.groups())) * 1024 == TOKENS_PER_STEP, match.group(0)
    for match in re.finditer(r"--trainer\.devices (\d+) --trainer\.accumulate_grad_batches (\d+)", text):
        gpus_alt, accumulation_alt = map(int, match.groups())
        assert data["batch_size"] * data["max_len"] * gpus_alt * accumulation_alt == TOKENS_PER_STEP, match.group(0)

    # The paper's optimisation: AdamW (0.9, 0.95), wd 0.1, 6e-4 -> 6e-5 cosine, 2,000 warm-up steps, bf16.
    assert trainer["precision"] == "bf16-mixed" and trainer["gradient_clip_val"] == 1.0
    assert model["lr"] == 6e-4 and math.isclose(model["lr"] * model["min_lr_ratio"], 6e-5)
    assert model["betas"] == [0.9, 0.95] and model["weight_decay"] == 0.1 and model["warmup_steps"] == 2000
    assert model["max_steps"] == trainer["max_steps"], "the cosine must end where training ends"
    assert (data["dataset"], data["tokenizer"], data["max_len"]) == ("Skylion007/openwebtext", "gpt2", 1024)
    assert (model["dim"], model["depth"], model["num_heads"], model["mlp_ratio"]) == (768, 12, 12, 4.0)
    # One epoch (validation + checkpoint) is 2,000 optimizer steps, as the comment says.
    assert data["train_windows_per_epoch"] == 2000 * sequences
    budget = re.search(r"max_steps ([\d,]+) x 491,520 = ([\d.]+)B tokens", text)
    assert budget and int(budget.group(1).replace(",", "")) == trainer["max_steps"]
    assert math.isclose(trainer["max_steps"] * TOKENS_PER_STEP / 1e9, float(budget.group(2)), abs_tol=0.05)
