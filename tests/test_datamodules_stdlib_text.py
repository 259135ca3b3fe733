"""The embedded text-classification task (TextClassificationDataModule, dataset='stdlib'): byte windows
of the standard library's own files, labelled by package. Splits by file that never move, every class
in every split, fingerprints of the windows, sizes without reading, one-sentence errors, the byte and
byte-pair baselines, and a tiny fit through the CLI."""

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from datamodules import TextClassificationDataModule
from datamodules import stdlib_text_baselines as baselines
from datamodules.stdlib_corpus import split_of, stdlib_root
from datamodules.stdlib_text import STDLIB_PACKAGES, held_out_cap, package_of, spread, stdlib_windows, window_starts
from lit_attention.errors import ConfigError
from lit_attention.training.records import read_record
from in_process import run_main  # tests/ is on sys.path under pytest (in_tmp: conftest.py)

SMALL = {"max_len": 64, "windows_per_file": 8, "windows_per_class": 60, "batch_size": 16}
SPLITS = ("train", "validation", "test")


def small(**kwargs) -> TextClassificationDataModule:
    return TextClassificationDataModule(**{**SMALL, **kwargs})


@pytest.fixture(scope="module")
def windows():
    return stdlib_windows(list(STDLIB_PACKAGES), max_len=64, windows_per_file=8, windows_per_class=60)


def test_the_default_is_the_stdlib_and_its_sizes_come_from_the_arguments(monkeypatch):
    def no_reading(self, *args, **kwargs):
        raise AssertionError(f"read {self}")

    monkeypatch.setattr(Path, "read_bytes", no_reading)
    dm = TextClassificationDataModule()
    assert dm.hparams.dataset == "stdlib" and dm.val_fraction == 0.2
    assert dm.model_sizes() == {"vocab_size": 259, "max_len": 256, "num_classes": 6, "pad_id": 0}
    assert dm.class_names == sorted(STDLIB_PACKAGES)
    assert small(packages=["xml", "email"]).model_sizes()["num_classes"] == 2


def test_splits_are_disjoint_by_file_fixed_by_path_and_hold_every_class(windows):
    root = stdlib_root()
    files = {split: set(windows[split].paths) for split in SPLITS}
    assert not files["train"] & files["validation"] and not files["train"] & files["test"]
    assert not files["validation"] & files["test"]
    names = sorted(STDLIB_PACKAGES)
    for split in SPLITS:
        part = windows[split]
        assert part.windows.dtype == np.uint8 and part.windows.shape == (len(part.labels), 64)
        assert set(part.labels.tolist()) == set(range(len(names)))  # every class in every split
        assert all(split_of(path, 0.2) == split for path in files[split])
        for i in range(0, len(part.labels), 17):  # a window is the file's bytes at its start, labelled by package
            path, start = part.paths[i], int(part.starts[i])
            assert part.windows[i].tobytes() == (root / path).read_bytes()[start : start + 64]
            assert package_of(path) == names[part.labels[i]]


def test_windows_are_capped_per_file_and_balanced_per_class(windows):
    for split, cap in (("train", 60), ("validation", held_out_cap(60, 0.2)), ("test", held_out_cap(60, 0.2))):
        counts = np.bincount(windows[split].labels)
        assert counts.max() <= cap and counts.min() >= 1, (split, counts)
        per_file = {}
        for path, start in zip(windows[split].paths, windows[split].starts):
            per_file.setdefault(path, []).append(int(start))
        assert max(len(starts) for starts in per_file.values()) <= 8
        for starts in per_file.values():  # non-overlapping windows
            assert np.all(np.diff(sorted(starts)) >= 64) and all(s % 64 == 0 for s in starts)
    # Balanced training: unittest, with 7 training files of at most 8 windows each, is the one short of the cap.
    assert np.bincount(windows["train"].labels).tolist() == [60, 60, 60, 60, 56, 60]


def test_spread_and_window_starts():
    assert spread(10, [2, 50, 50]) == [2, 4, 4]
    assert spread(100, [2, 3]) == [2, 3] and spread(0, [5]) == [0] and spread(3, [0, 9]) == [0, 3]
    assert sum(spread(7, [3, 3, 3])) == 7
    assert window_starts(10 * 64 + 5, 64, 3).tolist() == [64, 320, 512]  # slots 1, 5, 8 of 10: evenly spaced
    assert window_starts(2 * 64, 64, 5).tolist() == [0, 64]
    assert held_out_cap(400, 0.2) == 133


def test_fingerprints_and_splits_do_not_move_with_the_seed(monkeypatch):
    found = {}
    for seed in (0, 1):
        monkeypatch.setenv("PL_GLOBAL_SEED", str(seed))
        dm = small()
        dm.setup("fit")
        found[seed] = (dm.fingerprints(), [dm.window_splits[s].paths for s in SPLITS])
    assert found[0] == found[1]
    prints = found[0][0]
    assert set(prints) == set(SPLITS) and all(re.fullmatch(r"[0-9a-f]{16}", v) for v in prints.values())
    dm.window_splits["test"].windows[3, 5] ^= 1  # one byte of one test window
    changed = dm.compute_fingerprints()
    assert {s for s in SPLITS if changed[s] != prints[s]} == {"test"}
    other = small(packages=list(reversed(STDLIB_PACKAGES)))  # the same classes, named in another order
    other.setup("fit")
    assert other.fingerprints() == prints


def first_batch(dm) -> torch.Tensor:
    dm.setup("fit")
    return next(iter(dm.train_dataloader()))["tokens"]


def test_the_run_seed_orders_the_training_windows(monkeypatch):
    batches = {}
    for seed in (0, 1):
        monkeypatch.setenv("PL_GLOBAL_SEED", str(seed))
        batches[seed] = (first_batch(small()), first_batch(small(data_seed=7)))
    assert not torch.equal(batches[0][0], batches[1][0])  # the run's seed orders training
    assert torch.equal(batches[0][1], batches[1][1])  # unless data_seed fixes the order
    dm = small()
    dm.setup("fit")
    batch = next(iter(dm.test_dataloader()))
    assert batch["tokens"].dtype == torch.int64 and not batch["padding_mask"].any()
    assert torch.equal(batch["tokens"][0] - 3, torch.from_numpy(dm.window_splits["test"].windows[0]).long())
    assert batch["labels"].tolist() == dm.window_splits["test"].labels[:16].tolist()


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda: small(packages=["asyncio", "emial"]), "packages ['emial'] are not packages of this Python's standard library"),
        (lambda: small(packages=["email"]), "must name at least two different"),
        (lambda: small(packages=["email", "email"]), "must name at least two different"),
        (lambda: small(tokenizer="bpe"), "tokenizer='bpe' does not apply to dataset='stdlib'"),
        (lambda: small(windows_per_class=0), "windows_per_class=0 is invalid"),
        (lambda: small(val_fraction=0.5), "val_fraction=0.5 leaves no training files"),
        (lambda: small(num_classes=2), "num_classes=2 disagrees with the 6 packages"),
        (lambda: TextClassificationDataModule(dataset="stanfordnlp/imdb", windows_per_file=4), "apply to dataset='stdlib' only"),
        (lambda: small(max_len=10**7).setup("fit"), "has no train file of at least max_len=10000000 bytes"),
    ],
)
def test_bad_options_fail_with_one_sentence(make, fragment):
    with pytest.raises(ConfigError) as caught:
        make()
    message = str(caught.value)
    assert fragment in message, message
    assert "\n" not in message and message.endswith(".") and not re.search(r"\.\s+[A-Z]", message), message


def test_baselines_on_a_small_subset(capsys):
    splits = stdlib_windows(["email", "xml"], max_len=64, windows_per_file=4, windows_per_class=40)
    scores = baselines.baseline_scores(splits)
    assert {(s.features, s.model, s.split) for s in scores} == {
        (f, m, s) for f in ("unigram", "bigram") for m in ("naive Bayes", "logistic regression") for s in ("validation", "test")
    }
    assert all(0.0 <= s.accuracy <= 1.0 and 0.0 <= s.macro_f1 <= 1.0 for s in scores)
    assert max(s.accuracy for s in scores if s.split == "validation") > 0.5  # two classes: above chance
    baselines.main(["--max_len", "64", "--packages", "email", "xml", "--windows_per_file", "4", "--windows_per_class", "40"])
    table = capsys.readouterr().out
    assert "classes: email, xml (chance 0.500)" in table and "| bigram | logistic regression |" in table
    with pytest.raises(SystemExit) as exit_:
        baselines.main(["--packages", "email", "nosuch"])
    assert exit_.value.code == 2 and "['nosuch'] are not packages" in capsys.readouterr().err


@pytest.mark.slow  # trains
def test_a_tiny_fit_through_the_cli_records_the_windows_fingerprints(in_tmp):
    args = [
        "fit",
        "--model=TextClassifier",
        "--data=TextClassificationDataModule",
        "--data.max_len=32",
        "--data.windows_per_file=2",
        "--data.windows_per_class=8",
        "--data.batch_size=8",
        "--model.net.dim=16",
        "--model.net.num_heads=2",
        "--model.net.depth=1",
        "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=2",
        "--trainer.limit_val_batches=1",
        "--trainer.enable_progress_bar=false",
        f"--run.root={in_tmp / 'runs'}",
    ]
    assert run_main(args) == 0
    [record_path] = in_tmp.glob("runs/**/standard/seed_*/version_0/record.json")
    record = read_record(record_path)
    assert record["monitor"] == "val/acc" and 0.0 <= record["best"]["value"] <= 1.0
    expected = TextClassificationDataModule(max_len=32, windows_per_file=2, windows_per_class=8)
    expected.setup("fit")
    assert record["data_fingerprints"] == expected.fingerprints()
