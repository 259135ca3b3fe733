"""The run's seed drives the training order of every DataModule, through the CLI as a user runs it:
seeds 0 and 1 start from different batches, the same seed twice from the same one (the fingerprint of
the first training batch is in every run's record.json), and `data_seed` fixes the order across seeds."""

from pathlib import Path

import pytest
from PIL import Image

from lit_attention.main import main
from lit_attention.training.records import read_record
from test_datamodules_text import write_pairs_json, write_reviews  # tests/ is on sys.path under pytest

ROOT = Path(__file__).resolve().parents[1]
ONE_STEP = [
    "--trainer.max_steps=1",
    "--trainer.limit_val_batches=0",
    "--trainer.enable_progress_bar=false",
    "--trainer.enable_checkpointing=false",
    "--model.net.dim=16",
    "--model.net.num_heads=2",
]


def image_folder(root: Path) -> str:
    for name, colour in {"cat": (200, 0, 0), "dog": (0, 200, 0)}.items():
        (root / "train" / name).mkdir(parents=True)
        for i in range(12):
            Image.new("RGB", (16, 16), (colour[0], i * 20, colour[2])).save(root / "train" / name / f"{i}.png")
    return str(root)


def data_args(kind: str, tmp: Path) -> list[str]:
    caches = [f"--data.data_dir={tmp / 'data'}", f"--data.hf_cache_dir={tmp / 'hf'}"]
    return {
        "digits": ["--model=ImageClassifier", "--data=ImageDataModule", "--model.net.patch_size=2", "--model.net.depth=1"],
        "imagefolder": [
            "--model=ImageClassifier",
            "--data=ImageDataModule",
            "--data.dataset=imagefolder",
            f"--data.data_dir={image_folder(tmp / 'images')}",
            "--model.net.patch_size=8",
            "--data.batch_size=4",
            "--model.net.depth=1",
        ],
        "text": [
            "--model=TextClassifier",
            "--data=TextClassificationDataModule",
            "--data.dataset=null",
            f"--data.data_files={write_reviews(tmp / 'reviews')}",
            "--data.max_len=24",
            "--data.batch_size=4",
            "--model.net.depth=1",
            *caches,
        ],
        "stdlib": [
            "--model=CausalLanguageModel",
            "--data=LanguageModelingDataModule",
            "--data.max_files=60",
            "--data.val_fraction=0.2",
            "--data.max_len=16",
            "--data.batch_size=4",
            "--data.val_windows=4",
            f"--data.data_dir={tmp / 'data'}",
            "--model.net.depth=1",
        ],
        "mqar": [
            "--model=CausalLanguageModel",
            "--data=MQARDataModule",
            "--data.num_kv_pairs=2",
            "--data.vocab_size=16",
            "--data.max_len=16",
            "--data.num_train=64",
            "--data.num_val=8",
            "--data.batch_size=4",
            "--model.net.depth=1",
        ],
        "translation": [
            "--model=Seq2SeqTranslator",
            "--data=TranslationDataModule",
            "--data.dataset=null",
            f"--data.data_files={{train: {write_pairs_json(tmp / 'pairs.jsonl', 40)}}}",
            "--data.tokenizer=bytes",
            "--data.batch_size=4",
            "--model.net.encoder_depth=1",
            "--model.net.decoder_depth=1",
            "--model.bleu_batches=1",
            *caches,
        ],
    }[kind]


def first_batch(args: list[str], seed: int, root: Path, monkeypatch) -> str:
    for name in ("PL_GLOBAL_SEED", "PL_SEED_WORKERS", "LIT_ATTENTION_TRACEBACK"):
        monkeypatch.delenv(name, raising=False)
    main(["fit", *args, *ONE_STEP, f"--seed_everything={seed}", f"--run.root={root}"])
    [path] = sorted(root.glob(f"**/seed_{seed}/version_*/record.json"))[-1:]
    return read_record(path)["first_batch_sha256"]


@pytest.mark.slow  # three runs each
@pytest.mark.parametrize("kind", ["digits", "imagefolder", "text", "stdlib", "mqar", "translation"])
def test_the_run_seed_orders_the_training_data(kind, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    args = data_args(kind, tmp_path)
    zero, one, zero_again = (first_batch(args, seed, tmp_path / "runs" / str(i), monkeypatch) for i, seed in enumerate((0, 1, 0)))
    assert zero == zero_again, "the same seed must give the same first batch"
    assert zero != one, "another seed must give another order"


@pytest.mark.slow
def test_data_seed_fixes_the_order_across_run_seeds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = [*data_args("stdlib", tmp_path), "--data.data_seed=5"]
    zero, one = (first_batch(args, seed, tmp_path / "runs" / str(seed), monkeypatch) for seed in (0, 1))
    assert zero == one


def test_neighbouring_seeds_share_no_epoch_order():
    """seed + epoch would make seed 1's epoch e seed 0's epoch e + 1: every shuffled epoch order of
    seeds 0 and 1 must differ."""
    from datamodules.loaders import EpochShuffleSampler

    def orders(seed):
        sampler = EpochShuffleSampler(200, seed=seed)
        return [(sampler.set_epoch(epoch), tuple(sampler))[1] for epoch in range(15)]

    zero, one = orders(0), orders(1)
    assert not set(zero) & set(one)
    assert len(set(zero)) == 15 and orders(0) == zero  # new each epoch, and the same when asked again
