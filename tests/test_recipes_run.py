"""Every recipe under recipes/ trains: a fast_dev_run (one training and one validation batch) through the
real CLI, in this process, on the CPU. Recipes whose data are a download run on offline data of the same
kind (digits for images, a review fixture for text, short sentence pairs for translation, the stdlib bytes for
the GPT-3 small arms, whose model is also shrunk to one narrow block), in batches of 2; everything else is the recipe's."""

from pathlib import Path

import pytest

from lit_attention.main import main
from test_datamodules_text import write_pairs_json, write_reviews  # tests/ is on sys.path under pytest

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
NQ = RECIPES / "nonlinear_query"
SMALL_GPT = [
    "--model.net.dim=64",
    "--model.net.depth=1",
    "--model.net.num_heads=2",
    "--model.net.vocab_size=null",
    "--data.dataset=stdlib",
    "--data.tokenizer=bytes",
    "--data.max_len=64",
    "--data.max_files=20",
    "--data.val_fraction=0.2",
]
CPU_FAST_DEV_RUN = [
    "--trainer.accelerator=cpu",
    "--trainer.devices=1",
    "--trainer.num_nodes=1",
    "--trainer.strategy=auto",
    "--trainer.precision=32",
    "--trainer.fast_dev_run=true",
]
# A batch of 2 meets every part of the recipe a batch of 64 meets, at a fraction of the CPU (translation
# decodes each validation item greedily, token by token).
SMALL_BATCH = ["--data.batch_size=2"]


def recipes() -> list[Path]:
    """Every recipe but those tests/test_multiprocess_matrix.py trains, resumes and tests as they ship."""
    from matrix_recipes import MATRIX

    covered = {RECIPES / name for name in MATRIX}
    return sorted(p for p in RECIPES.rglob("*.yaml") if "trainer" not in p.relative_to(RECIPES).parts and p not in covered)


def write_offline_data(folder: Path, pairs: int = 60) -> Path:
    """The files `offline_data` points at: reviews (parquet) and translation pairs (JSON lines)."""
    write_reviews(folder / "reviews")
    write_pairs_json(folder / "pairs.jsonl", pairs)
    return folder


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """One folder for the module: the fixtures' files, and the stdlib corpus built once for all recipes."""
    return write_offline_data(tmp_path_factory.mktemp("recipes_run"))


SYNTHETIC = ("MQARDataModule", "SelectiveCopyDataModule", "TransductionDataModule")  # generated: nothing to download


def offline_data(recipe: Path, folder: Path) -> list[str]:
    """The data arguments that replace a download by offline data of the same kind ([] for offline recipes)."""
    if NQ in recipe.parents:
        return SMALL_GPT
    text = recipe.read_text()
    if "dataset: digits" in text or "dataset: stdlib" in text or any(name in text for name in SYNTHETIC):
        return []
    if "ImageDataModule" in text:
        return ["--data.dataset=digits", "--data.rand_augment=false"]
    if "TextClassificationDataModule" in text:
        return [
            f"--data.data_files={{train: {folder / 'reviews' / 'train.parquet'}, test: {folder / 'reviews' / 'test.parquet'}}}",
            "--data.dataset=null",
            "--data.max_len=32",
            "--data.vocab_size=300",
        ]
    if "TranslationDataModule" in text:
        # Targets of up to 32 tokens: validation decodes (beam search) to the longest target the model takes.
        return [
            f"--data.data_files={{train: {folder / 'pairs.jsonl'}}}",
            "--data.dataset=null",
            "--data.vocab_size=320",
            "--data.max_tgt_len=32",
        ]
    raise AssertionError(f"{recipe}: which offline data stands in for its download?")


@pytest.mark.slow
@pytest.mark.parametrize("recipe", recipes(), ids=lambda p: str(p.relative_to(RECIPES)))
def test_every_recipe_runs_a_fast_dev_run(recipe, workdir, monkeypatch, capsys):
    monkeypatch.chdir(workdir)  # data/ and the runs land here, not in the repository
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    stack = [NQ / "gpt3_small.yaml", recipe] if NQ in recipe.parents and recipe.name != "gpt3_small.yaml" else [recipe]
    argv = [
        "fit",
        *[w for c in stack for w in ("--config", str(c))],
        *CPU_FAST_DEV_RUN,
        f"--run.root={workdir / 'runs'}",
        *offline_data(recipe, workdir),
        *SMALL_BATCH,
    ]
    try:
        main(argv)
    except SystemExit as exit_:
        assert exit_.code == 0, capsys.readouterr().err[-2000:]
