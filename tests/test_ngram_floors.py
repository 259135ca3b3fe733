"""The n-gram floors beside a language model's tables: the unigram and bigram losses of its data, fitted
on the training split, equal a hand count on tiny real token files; they are kept in the cache's
meta.json, added to an older cache once, and printed as one line under the loss tables."""

import json
import math

import numpy as np

from datamodules import LanguageModelingDataModule, ngram_floors
from lit_attention.reports.floors import floor_values, floors_line


def hand_floors(train: list[int], held_out: list[int], vocab: int = 256) -> tuple[float, float]:
    """The unigram (add-one) and bigram (one pseudo-count spread by the unigram) losses, counted by hand."""
    unigram = {b: (train.count(b) + 1) / (len(train) + vocab) for b in range(vocab)}
    pairs, contexts = {}, {}
    for a, b in zip(train, train[1:]):
        pairs[(a, b)] = pairs.get((a, b), 0) + 1
        contexts[a] = contexts.get(a, 0) + 1
    uni = -sum(math.log(unigram[b]) for b in held_out) / len(held_out)
    bi = -math.log(unigram[held_out[0]])
    for a, b in zip(held_out, held_out[1:]):
        bi -= math.log((pairs.get((a, b), 0) + unigram[b]) / (contexts.get(a, 0) + 1))
    return uni, bi / len(held_out)


def test_the_floors_of_tiny_token_files_equal_a_hand_count(tmp_path):
    files = {"train": "abracadabra\nabc\n", "validation": "cabbage\nzz\n", "test": "abra\n"}
    for split, text in files.items():
        (tmp_path / f"{split}.txt").write_text(text)
    dm = LanguageModelingDataModule(
        dataset=None,
        data_files={s: str(tmp_path / f"{s}.txt") for s in files},
        data_dir=str(tmp_path / "data"),
        hf_cache_dir=str(tmp_path / "hf"),
        max_len=2,
        batch_size=1,
        num_workers=0,
    )
    dm.setup("fit")
    floors = dm.ngram_floors()
    dtype = json.loads((dm.cache_dir / "meta.json").read_text())["dtype"]
    tokens = {s: np.fromfile(dm.cache_dir / f"{s}.bin", dtype=dtype).tolist() for s in files}
    assert bytes(tokens["train"]).startswith(b"abracadabra")  # the files are the text's bytes
    assert floors["unit"] == "nats/byte" and floors["train_tokens"] == len(tokens["train"])
    for split in ("validation", "test"):
        uni, bi = hand_floors(tokens["train"], tokens[split])
        assert math.isclose(floors["unigram"][split], uni, rel_tol=1e-12)
        assert math.isclose(floors["bigram"][split], bi, rel_tol=1e-12)
    assert floors["bigram"]["test"] < floors["unigram"]["test"]  # "abra" is all pairs seen in training

    # An older cache without them gets them counted once and added to its meta.json.
    meta = json.loads((dm.cache_dir / "meta.json").read_text())
    assert {k: meta["ngram_floors"][k] for k in ("unigram", "bigram")} == {k: floors[k] for k in ("unigram", "bigram")}
    del meta["ngram_floors"]
    (dm.cache_dir / "meta.json").write_text(json.dumps(meta))
    again = LanguageModelingDataModule(
        dataset=None,
        data_files={s: str(tmp_path / f"{s}.txt") for s in files},
        data_dir=str(tmp_path / "data"),
        hf_cache_dir=str(tmp_path / "hf"),
        max_len=2,
        batch_size=1,
        num_workers=0,
    )
    again.setup("fit")
    assert again.ngram_floors() == floors
    assert "ngram_floors" in json.loads((dm.cache_dir / "meta.json").read_text())


def test_a_large_vocabulary_counts_the_same_pairs_sparsely(monkeypatch):
    rng = np.random.default_rng(0)
    train, held = rng.integers(0, 50, 400), {"validation": rng.integers(0, 50, 60)}
    dense = ngram_floors.ngram_floors(train, held, 50)
    monkeypatch.setattr(ngram_floors, "DENSE_PAIRS", 10)
    monkeypatch.setattr(ngram_floors, "CHUNK", 7)  # and across chunk boundaries
    sparse = ngram_floors.ngram_floors(train, held, 50)
    for model in ("unigram", "bigram"):
        assert math.isclose(dense[model]["validation"], sparse[model]["validation"], rel_tol=1e-12)


def test_the_report_line_is_given_only_for_records_that_have_floors():
    floors = {
        "unit": "nats/byte",
        "train_tokens": 9,
        "unigram": {"validation": 3.25, "test": 3.5},
        "bigram": {"validation": 2.375, "test": 2.5},
    }
    record = {"monitor": "val/loss", "ngram_floors": floors}
    assert floors_line([record, record]) == (
        "\nn-gram floors on this data (fitted on the training split, scored on "
        "validation / test): unigram 3.2500 / 3.5000, bigram 2.3750 / 2.5000 "
        "nats/byte.\n"
    )
    assert floors_line([{"monitor": "val/loss"}]) == ""  # a committed record from before floors
    assert floors_line([{"monitor": "val/acc", "ngram_floors": floors}]) == ""
    other = {"monitor": "val/loss", "ngram_floors": {**floors, "train_tokens": 10}}
    assert "differ" in floors_line([record, other])
    # the figure's lines: the same floors on one split, none where the records disagree or have none
    assert floor_values([record, record]) == {"unigram": 3.25, "bigram": 2.375}
    assert floor_values([record], "test") == {"unigram": 3.5, "bigram": 2.5}
    assert floor_values([record, other]) == {} == floor_values([{"monitor": "val/loss"}])
