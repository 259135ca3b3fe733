"""What a record says about where it came from: each DataModule's fingerprints of its splits
change when one byte of a split changes and never with the run seed; provenance names the commit, a
dirty tree's diff, the torch build, the CPU, the thread count at record time and the devices."""

import json
import re

import pytest
import sklearn.datasets
import torch

from datamodules import (
    ImageDataModule,
    LanguageModelingDataModule,
    MQARDataModule,
    TextClassificationDataModule,
    TranslationDataModule,
)
from datamodules.hub import split_fingerprints
from lit_attention.training.records import provenance
from test_datamodules_images import write_image_folder  # tests/ is on sys.path under pytest
from test_datamodules_text import write_pairs_json, write_reviews

SPLITS = {"train", "validation", "test"}


def fingerprints(make, monkeypatch, seed: int = 0) -> dict:
    """The fingerprints of a freshly set-up DataModule under run seed `seed`."""
    monkeypatch.setenv("PL_GLOBAL_SEED", str(seed))
    dm = make()
    dm.setup("fit")
    found = dm.fingerprints()
    assert found.keys() == SPLITS and all(re.fullmatch(r"[0-9a-f]{16}", v) for v in found.values()), found
    return found


def change_one_byte(path, old: bytes, new: bytes) -> None:
    """Replace the last occurrence of `old` by `new`, a text of the same length."""
    data = open(path, "rb").read()
    at = data.rindex(old)
    open(path, "wb").write(data[:at] + new + data[at + len(old) :])


def changed(before: dict, after: dict) -> set[str]:
    return {split for split in SPLITS if before[split] != after[split]}


def test_digits_fingerprints_follow_the_pixels_not_the_seed(monkeypatch):
    make = lambda: ImageDataModule(random_affine=True)  # noqa: E731
    first = fingerprints(make, monkeypatch, seed=0)
    assert fingerprints(make, monkeypatch, seed=1) == first
    real = sklearn.datasets.load_digits

    def one_pixel_brighter():
        digits = real()
        digits.images[1796, 3, 3] += 1
        return digits

    monkeypatch.setattr(sklearn.datasets, "load_digits", one_pixel_brighter)
    assert len(changed(first, fingerprints(make, monkeypatch))) == 1  # the split that image is in


def test_image_folder_fingerprints_follow_the_files(tmp_path, monkeypatch):
    write_image_folder(tmp_path, per_class=4)
    make = lambda: ImageDataModule("imagefolder", data_dir=str(tmp_path), image_size=8)  # noqa: E731
    first = fingerprints(make, monkeypatch, seed=0)
    assert fingerprints(make, monkeypatch, seed=1) == first
    with open(tmp_path / "val" / "dog" / "2.png", "ab") as image:  # one byte more: the file's size changes
        image.write(b"\0")
    assert changed(first, fingerprints(make, monkeypatch)) == {"validation"}


def test_mqar_fingerprints_follow_the_generated_data(monkeypatch):
    make = lambda: MQARDataModule(num_kv_pairs=2, vocab_size=16, max_len=16, num_train=64, num_val=8)  # noqa: E731
    first = fingerprints(make, monkeypatch, seed=0)
    assert fingerprints(make, monkeypatch, seed=1) == first
    dm = make()
    dm.setup("fit")
    dm.val_set.tensors[0][3, 5] += 1
    assert changed(first, dm.compute_fingerprints()) == {"validation"}


def test_language_modeling_fingerprints_follow_the_tokens(tmp_path, monkeypatch):
    files = {"train": tmp_path / "train.txt", "validation": tmp_path / "validation.txt"}
    files["train"].write_text("".join(f"line {i} of the training text\n" for i in range(200)))
    files["validation"].write_text("".join(f"held-out line {i}\n" for i in range(40)))
    make = lambda: LanguageModelingDataModule(  # noqa: E731
        dataset=None,
        data_files={k: str(v) for k, v in files.items()},
        max_len=16,
        val_windows=4,
        data_dir=str(tmp_path / "data"),
        hf_cache_dir=str(tmp_path / "hf"),
    )
    first = fingerprints(make, monkeypatch, seed=0)
    assert fingerprints(make, monkeypatch, seed=1) == first

    # A cache written before the digests were kept in its meta.json gets them, the same, once.
    dm = make()
    meta_path = dm.cache_dir / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({k: v for k, v in meta.items() if k != "sha256"}))
    assert fingerprints(make, monkeypatch) == first
    assert json.loads(meta_path.read_text())["sha256"] == meta["sha256"]

    change_one_byte(files["validation"], b"39", b"93")
    assert changed(first, fingerprints(make, monkeypatch)) == {"validation"}
    change_one_byte(files["train"], b"199", b"919")  # the last lines are the carved test split
    assert changed(first, fingerprints(make, monkeypatch)) == {"validation", "test"}


@pytest.mark.slow
def test_text_classification_fingerprints_follow_the_files(tmp_path, monkeypatch):
    files = write_reviews(tmp_path / "reviews", fmt="json")
    make = lambda: TextClassificationDataModule(  # noqa: E731
        dataset=None, data_files=files, data_dir=str(tmp_path / "data"), hf_cache_dir=str(tmp_path / "hf")
    )
    first = fingerprints(make, monkeypatch, seed=0)
    assert fingerprints(make, monkeypatch, seed=1) == first
    change_one_byte(files["test"], b"boring", b"borinG")
    assert changed(first, fingerprints(make, monkeypatch)) == {"test"}
    change_one_byte(files["train"], b"boring", b"borinG")  # validation is carved from train
    assert changed(first, fingerprints(make, monkeypatch)) == SPLITS


def test_translation_fingerprints_follow_the_file(tmp_path, monkeypatch):
    path = write_pairs_json(tmp_path / "pairs.jsonl", 40)
    make = lambda: TranslationDataModule(  # noqa: E731
        dataset=None,
        data_files={"train": path},
        tokenizer="bytes",
        data_dir=str(tmp_path / "data"),
        hf_cache_dir=str(tmp_path / "hf"),
    )
    first = fingerprints(make, monkeypatch, seed=0)
    assert fingerprints(make, monkeypatch, seed=1) == first
    change_one_byte(path, b"gato", b"gata")
    assert changed(first, fingerprints(make, monkeypatch)) == SPLITS  # all three come from the one file


def test_hub_splits_are_named_by_datasets_fingerprints_and_how_they_are_carved():
    hub = {"train": "a1", "test": "b2"}
    first = split_fingerprints(hub, None, val_fraction=0.1, seed=0)
    assert changed(first, split_fingerprints({**hub, "test": "b3"}, None, val_fraction=0.1, seed=0)) == {"test"}
    # validation is carved from train with split_seed: another one moves rows between the two
    assert changed(first, split_fingerprints(hub, None, val_fraction=0.1, seed=1)) == {"train", "validation"}
    with_validation = split_fingerprints({**hub, "validation": "c3"}, None, val_fraction=0.1, seed=0)
    assert len(set(with_validation.values())) == 3 and with_validation["test"] == first["test"]


def test_provenance_has_the_commit_the_build_the_machine_and_the_threads_now():
    torch.set_num_threads(1)  # the test's guard puts the thread count back
    found = provenance(devices=["cpu"])
    assert {
        "commit",
        "dirty",
        "diff_sha256",
        "python",
        "torch",
        "torch_build",
        "lightning",
        "cpu",
        "threads",
        "devices",
    } <= found.keys()
    assert re.fullmatch(r"[0-9a-f]{40}", found["commit"])  # a bare hash: no "+dirty" any more
    assert isinstance(found["dirty"], bool)
    assert (found["diff_sha256"] is None) == (not found["dirty"])
    assert found["torch_build"] == (f"cuda {torch.version.cuda}" if torch.version.cuda else "cpu")
    assert found["cpu"] and found["devices"] == ["cpu"] and found["threads"] == 1
    torch.set_num_threads(2)
    assert provenance()["threads"] == 2  # read at record time, never cached
