"""TextClassificationDataModule and TranslationDataModule on local parquet/json/csv files written
here and read through Hugging Face `datasets`, with byte and BPE tokenizers."""

import json

import pandas as pd
import pytest
import torch

from datamodules.text_tokenizers import BOS_ID, EOS_ID
from lit_attention.errors import ConfigError
from datamodules import TextClassificationDataModule, TranslationDataModule, text_tokenizers

WORDS = ["good", "bad", "plot", "actor", "café", "niño", "boring", "superb", "scene", "music"]


def review(i: int) -> str:
    """Texts of many lengths (some past max_len), with non-ASCII bytes; one is empty."""
    if i == 7:
        return ""
    return " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(1 + (i * 5) % 23))


def write_reviews(folder, fmt="parquet", n_train=60, n_test=12, string_labels=True):
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, n, offset in (("train", n_train, 0), ("test", n_test, 1000)):
        labels = [(i + offset) % 3 for i in range(n)]
        frame = pd.DataFrame(
            {
                "text": [review(i + offset) for i in range(n)],
                "label": [["neg", "neutral", "pos"][y] for y in labels] if string_labels else labels,
            }
        )
        path = folder / f"{split}.{fmt if fmt != 'json' else 'jsonl'}"
        if fmt == "parquet":
            frame.to_parquet(path)
        elif fmt == "csv":
            frame.to_csv(path, index=False)
        else:
            frame.to_json(path, orient="records", lines=True, force_ascii=False)
        files[split] = str(path)
    return files


def classification(tmp_path, files, **kwargs):
    caches = {"data_dir": str(tmp_path / "data"), "hf_cache_dir": str(tmp_path / "hf")}
    kwargs = {"max_len": 24, "batch_size": 8, **caches, **kwargs}
    return TextClassificationDataModule(data_files=files, **kwargs)


# ----------------------------------------------------------------------------- classification


def test_bytes_batches_match_the_texts(tmp_path):
    dm = classification(tmp_path, write_reviews(tmp_path / "raw"), tokenizer="bytes")
    # Known right after __init__, as the CLI links them into the model.
    assert dm.model_sizes() == {"vocab_size": 259, "pad_id": 0, "max_len": 24, "num_classes": 3}
    dm.prepare_data()
    dm.setup("fit")
    assert (len(dm.train_set), len(dm.val_set), len(dm.test_set)) == (54, 6, 12)

    rows = [dm.test_set[i] for i in range(len(dm.test_set))]
    batches = list(dm.test_dataloader())  # not shuffled: batch order is row order
    tokens = torch.cat([b["tokens"] for b in batches])
    mask = torch.cat([b["padding_mask"] for b in batches])
    labels = torch.cat([b["labels"] for b in batches])
    assert tokens.dtype == labels.dtype == torch.int64 and mask.dtype == torch.bool
    assert tokens.shape == mask.shape == (12, 24)
    names = ["neg", "neutral", "pos"]  # string labels become sorted ids
    assert labels.tolist() == [names.index(row["label"]) for row in rows]
    for row, ids, pad in zip(rows, tokens, mask):
        data = row["text"].encode()[:24]
        length = max(1, len(data))
        assert pad.tolist() == [False] * length + [True] * (24 - length)
        expected = [b + 3 for b in data] if data else [2]  # an empty text keeps one eos token
        assert ids[:length].tolist() == expected
        assert (ids[length:] == 0).all()


@pytest.mark.parametrize("fmt", ["parquet", "json", "csv"])
def test_local_formats_and_integer_labels(tmp_path, fmt):
    files = write_reviews(tmp_path / "raw", fmt=fmt, string_labels=False)
    dm = classification(tmp_path, files)
    assert dm.model_sizes()["num_classes"] == 3  # inferred from the label column
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    assert batch["tokens"].shape == (8, 24) and batch["labels"].shape == (8,)
    assert set(torch.cat([b["labels"] for b in dm.test_dataloader()]).tolist()) == {0, 1, 2}


@pytest.mark.slow
def test_bpe_is_trained_once_and_reloads_to_identical_ids(tmp_path, monkeypatch):
    files = write_reviews(tmp_path / "raw")
    first = classification(tmp_path, files, tokenizer="bpe", vocab_size=300)
    assert (first.model_sizes()["vocab_size"], first.model_sizes()["pad_id"]) == (300, 0)
    first.prepare_data()
    first.setup("fit")
    [cached] = (tmp_path / "data" / "tokenizers").iterdir()
    stamp = cached.stat().st_mtime_ns
    ids_first = [b["tokens"] for b in first.test_dataloader()]
    all_ids = torch.cat(ids_first)
    assert all_ids.max() < 300 and (all_ids >= 259).any()  # merges exist and fit the vocabulary

    # A fresh DataModule must load the cached file, not train again.
    def no_training(*args, **kwargs):
        raise AssertionError("the BPE was trained again")

    monkeypatch.setattr(text_tokenizers.trainers, "BpeTrainer", no_training)
    second = classification(tmp_path, files, tokenizer="bpe", vocab_size=300)
    second.prepare_data()
    second.setup("fit")
    assert cached.stat().st_mtime_ns == stamp
    for a, b in zip(ids_first, second.test_dataloader(), strict=True):
        assert torch.equal(a, b["tokens"])


def test_bad_inputs_fail_with_one_sentence(tmp_path):
    files = write_reviews(tmp_path / "raw")
    cases = [
        (lambda: classification(tmp_path, files, text_column="review").setup("fit"), "no text column 'review'"),
        (lambda: classification(tmp_path, files, label_column="stars").model_sizes(), "no label column 'stars'"),
        (lambda: classification(tmp_path, files, num_classes=2).setup("fit"), "3 classes but num_classes=2"),
        (lambda: classification(tmp_path, str(tmp_path / "missing.parquet")).model_sizes(), "missing.parquet.*does not exist"),
        (lambda: classification(tmp_path, files, tokenizer="bpe", vocab_size=100), "vocab_size=100 is too small"),
        # A misspelt or unknown hub name is named as such, not as a missing num_classes.
        (
            lambda: TextClassificationDataModule(dataset="stanfordnlp/imbd"),
            "'stanfordnlp/imbd' is not one of the hub datasets this suite knows",
        ),
    ]
    for make, message in cases:
        with pytest.raises(ConfigError, match=message) as caught:
            make()
        text = str(caught.value)
        assert text.endswith(".") and "\n" not in text


# ----------------------------------------------------------------------------- translation

PAIRS = [
    ("the cat sleeps", "el gato duerme"),
    ("a green house", "una casa verde"),
    ("we read books every day", "leemos libros todos los días"),
    ("where is the station", "dónde está la estación"),
]


def pair(i):
    en, es = PAIRS[i % len(PAIRS)]
    return f"{en} {i}", f"{es} {i}"


def write_pairs_json(path, n):
    """The hub layout: {"translation": {"en": ..., "es": ...}} rows, as JSON lines."""
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            en, es = pair(i)
            f.write(json.dumps({"id": str(i), "translation": {"en": en, "es": es}}, ensure_ascii=False) + "\n")
    return str(path)


def translation(tmp_path, files, **kwargs):
    caches = {"data_dir": str(tmp_path / "data"), "hf_cache_dir": str(tmp_path / "hf")}
    kwargs = {"vocab_size": 320, "batch_size": 6, **caches, **kwargs}
    return TranslationDataModule(data_files=files, **kwargs)


def check_translation_batch(batch, dm, max_src, max_tgt):
    src, tgt_in, tgt_out = batch["src"], batch["tgt_in"], batch["tgt_out"]
    assert src.shape[1] <= max_src and tgt_in.shape == tgt_out.shape and tgt_in.shape[1] <= max_tgt
    pad_id = dm.model_sizes()["pad_id"]
    assert torch.equal(batch["src_padding_mask"], src == pad_id)
    assert torch.equal(batch["tgt_padding_mask"], tgt_out == pad_id)
    assert torch.equal(batch["tgt_padding_mask"], tgt_in == pad_id)
    for s, s_pad, t_in, t_out, t_pad in zip(src, batch["src_padding_mask"], tgt_in, tgt_out, batch["tgt_padding_mask"]):
        n_src, n_tgt = int((~s_pad).sum()), int((~t_pad).sum())
        assert s[n_src - 1] == EOS_ID and (s[: n_src - 1] > EOS_ID).all()
        assert t_in[0] == BOS_ID and t_out[n_tgt - 1] == EOS_ID
        assert torch.equal(t_in[1:n_tgt], t_out[: n_tgt - 1])  # teacher forcing: shifted by one


def test_translation_from_hub_layout_json(tmp_path):
    files = {split: write_pairs_json(tmp_path / f"{split}.jsonl", n) for split, n in (("train", 80), ("test", 9))}
    dm = translation(tmp_path, files)
    assert dm.model_sizes() == {"vocab_size": 320, "pad_id": 0, "bos_id": 1, "eos_id": 2, "max_src_len": 64, "max_tgt_len": 64}
    dm.prepare_data()
    dm.setup("fit")
    assert (len(dm.train_set), len(dm.val_set), len(dm.test_set)) == (76, 4, 9)
    for batch in dm.test_dataloader():
        check_translation_batch(batch, dm, 64, 64)
    # Decoding the targets gives the Spanish sentences back (the byte-level BPE is lossless).
    decoded = [dm.decode(row.tolist()) for b in dm.test_dataloader() for row in b["tgt_out"]]
    assert decoded == [pair(i)[1] for i in range(9)]
    assert dm.decode([BOS_ID] + dm.tokenizer.encode_batch(["hola"])[0].tolist() + [EOS_ID, 7, 8]) == "hola"


def test_translation_from_two_columns_truncates_and_caches_bpe(tmp_path, monkeypatch):
    rows = [pair(i) for i in range(40)] + [("word " * 50, "palabra " * 50)]
    path = tmp_path / "pairs.parquet"
    pd.DataFrame(rows, columns=["en", "es"]).to_parquet(path)
    dm = translation(tmp_path, str(path), max_src_len=8, max_tgt_len=6, val_fraction=0.1)
    dm.setup("fit")
    assert len(dm.train_set) + len(dm.val_set) + len(dm.test_set) == 41
    assert not set(dm.test_set["source"]) & set(dm.train_set["source"])
    lengths = []
    for loader in (dm.train_dataloader(), dm.val_dataloader(), dm.test_dataloader()):
        for batch in loader:
            check_translation_batch(batch, dm, 8, 6)
            lengths.append(batch["src"].shape[1])
    assert max(lengths) == 8  # the long sentence was truncated, keeping its eos

    [cached] = (tmp_path / "data" / "tokenizers").iterdir()
    monkeypatch.setattr(text_tokenizers.trainers, "BpeTrainer", lambda *a, **k: pytest.fail("BPE retrained"))
    again = translation(tmp_path, str(path), max_src_len=8, max_tgt_len=6, val_fraction=0.1)
    again.setup("fit")
    first, second = next(iter(dm.val_dataloader())), next(iter(again.val_dataloader()))
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) if torch.is_tensor(first[k]) else first[k] == second[k] for k in first)
    assert [p.name for p in (tmp_path / "data" / "tokenizers").iterdir()] == [cached.name]


def test_translation_test_split_ignores_seed(tmp_path):
    path = write_pairs_json(tmp_path / "all.jsonl", 60)
    a, b = (translation(tmp_path, path, split_seed=s) for s in (0, 1))
    for dm in (a, b):
        dm.setup("fit")
    assert a.test_set["source"] == b.test_set["source"]
    assert a.val_set["source"] != b.val_set["source"]


def test_translation_wrong_languages(tmp_path):
    path = write_pairs_json(tmp_path / "all.jsonl", 10)
    with pytest.raises(ConfigError, match=r"translates between \['en', 'es'\], not 'en' and 'fr'"):
        translation(tmp_path, path, target_lang="fr").setup("fit")
    with pytest.raises(ConfigError, match="tokenizer='gpt2' is not supported"):
        translation(tmp_path, path, tokenizer="gpt2")


def test_pretrained_tokenizer_without_pad_gets_one_appended(tmp_path, monkeypatch):
    """A GPT-2-like tokenizer.json (no pad token) as the hub cache would hand it over."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    gpt_like = Tokenizer(models.BPE())
    gpt_like.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    gpt_like.train_from_iterator(
        [review(i) for i in range(50)],
        trainers.BpeTrainer(
            vocab_size=290,
            special_tokens=["<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    gpt_like.save(str(tmp_path / "tokenizer.json"))
    requested = []

    def from_cache(repo_id, filename, what):
        requested.append((repo_id, filename))
        return str(tmp_path / "tokenizer.json")

    monkeypatch.setattr(text_tokenizers, "download_hub_file", from_cache)
    dm = classification(tmp_path, write_reviews(tmp_path / "raw"), tokenizer="someone/gpt-like")
    size = gpt_like.get_vocab_size()
    assert (dm.model_sizes()["vocab_size"], dm.model_sizes()["pad_id"]) == (size + 1, size)  # the appended pad id
    assert requested == [("someone/gpt-like", "tokenizer.json")]  # read once
    dm.setup("fit")
    batch = next(iter(dm.test_dataloader()))
    assert batch["tokens"].max() == size and torch.equal(batch["padding_mask"], batch["tokens"] == size)
    row = batch["tokens"][0][~batch["padding_mask"][0]].tolist()
    assert row == gpt_like.encode(dm.test_set[0]["text"]).ids[:24]


@pytest.mark.slow
def test_worker_processes_give_the_same_batches(tmp_path):
    files = write_reviews(tmp_path / "raw")
    in_process = classification(tmp_path, files, tokenizer="bpe", vocab_size=300)
    with_workers = classification(tmp_path, files, tokenizer="bpe", vocab_size=300, num_workers=2)
    for dm in (in_process, with_workers):
        dm.setup("fit")
    for a, b in zip(in_process.test_dataloader(), with_workers.test_dataloader(), strict=True):
        assert all(torch.equal(a[key], b[key]) for key in ("tokens", "padding_mask", "labels"))


def test_translation_batch_writes_each_row_as_the_plain_per_row_layout():
    """The batch builder writes every row at once (datamodules/translation.py _pad); each row must be what
    writing the rows one by one gives: the specials around the ids, then padding. Empty and numpy-born rows
    included (the transduction hands over numpy arrays)."""
    import numpy as np

    from datamodules.text_tokenizers import PAD_ID
    from datamodules.translation import translation_batch

    generator = torch.Generator().manual_seed(0)
    lengths = [(5, 3), (0, 7), (9, 0), (1, 1), (9, 7)]
    sources = [torch.randint(3, 50, (n,), generator=generator) for n, _ in lengths]
    targets = [torch.from_numpy(np.arange(3, 3 + m, dtype=np.int64)) for _, m in lengths]
    batch = translation_batch(sources, targets)

    def by_rows(rows: list[list[int]]) -> torch.Tensor:
        width = max(len(r) for r in rows)
        return torch.tensor([r + [PAD_ID] * (width - len(r)) for r in rows])

    src = by_rows([s.tolist() + [EOS_ID] for s in sources])
    tgt_in = by_rows([[BOS_ID] + t.tolist() for t in targets])
    tgt_out = by_rows([t.tolist() + [EOS_ID] for t in targets])
    assert torch.equal(batch["src"], src) and torch.equal(batch["tgt_in"], tgt_in) and torch.equal(batch["tgt_out"], tgt_out)
    assert torch.equal(batch["src_padding_mask"], src == PAD_ID)
    assert torch.equal(batch["tgt_padding_mask"], tgt_in == PAD_ID)
    assert batch["src_padded"] and batch["tgt_padded"]
    assert batch["src"].dtype == batch["tgt_in"].dtype == torch.long
