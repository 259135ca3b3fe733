"""LanguageModelingDataModule: token files written once and reused, window shapes and shift,
deterministic validation, per-epoch / per-seed / per-rank training windows, the stdlib corpus, and
the epoch reaching the windows inside a real Lightning fit."""

import json
import math
import random

import lightning as L
import numpy as np
import pytest
import torch
from lightning.fabric.utilities.distributed import DistributedSamplerWrapper
from tokenizers import Tokenizer
from torch.utils.data import DistributedSampler

from lit_attention.errors import ConfigError
from datamodules import LanguageModelingDataModule, language_modeling
from datamodules.stdlib_corpus import EXCLUDED_DIRS, split_of, stdlib_files
from datamodules.text_tokenizers import HFTokenizer
from datamodules.token_windows import EpochSampler, token_dtype

MAX_LEN = 16


def corpus_text(seed: int, lines: int) -> str:
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "épsilon", "zeta", "eta", "theta"]
    return "".join(" ".join(rng.choice(words) for _ in range(rng.randint(0, 12))) + "\n" for _ in range(lines))


@pytest.fixture
def text_files(tmp_path):
    files = {"train": tmp_path / "train.txt", "validation": tmp_path / "validation.txt"}
    files["train"].write_text(corpus_text(0, 400), encoding="utf-8")
    files["validation"].write_text(corpus_text(1, 60), encoding="utf-8")
    return {split: str(path) for split, path in files.items()}


def make_dm(tmp_path, data_files, **kwargs):
    kwargs = {
        "max_len": MAX_LEN,
        "batch_size": 4,
        "train_windows_per_epoch": 40,
        "val_windows": 10,
        "data_dir": str(tmp_path / "data"),
        "hf_cache_dir": str(tmp_path / "hf"),
        **kwargs,
    }
    return LanguageModelingDataModule(dataset=None, data_files=data_files, **kwargs)


def windows(dataset, indices):
    return torch.stack([torch.cat([dataset[i][0], dataset[i][1][-1:]]) for i in indices])


def test_token_file_is_the_text_and_is_reused(tmp_path, text_files, monkeypatch):
    dm = make_dm(tmp_path, text_files)
    assert dm.model_sizes() == {"vocab_size": 256, "max_len": MAX_LEN}
    dm.prepare_data()
    dm.setup("fit")
    cache = dm.cache_dir
    assert json.loads((cache / "meta.json").read_text())["dtype"] == "uint16"

    def tokens(split):
        return np.fromfile(cache / f"{split}.bin", dtype=np.uint16)

    # Lines keep their breaks: the files are the texts' bytes. Without a test file, the last lines of
    # the training file (a val_fraction share) are the test split, never the validation one.
    as_bytes = {split: np.frombuffer(open(path, "rb").read(), dtype=np.uint8) for split, path in text_files.items()}
    assert np.array_equal(tokens("validation"), as_bytes["validation"])
    assert np.array_equal(np.concatenate([tokens("train"), tokens("test")]), as_bytes["train"])
    assert 0 < len(tokens("test")) < 0.1 * len(as_bytes["train"])
    stamps = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}

    def no_tokenizing(*args, **kwargs):
        raise AssertionError("the corpus was tokenized again")

    monkeypatch.setattr(language_modeling, "write_token_files", no_tokenizing)
    again = make_dm(tmp_path, text_files)
    again.prepare_data()
    again.setup("fit")
    assert again.cache_dir == cache
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == stamps
    assert torch.equal(windows(dm.val_set, range(10)), windows(again.val_set, range(10)))


def test_windows_have_the_right_shape_shift_and_content(tmp_path, text_files):
    dm = make_dm(tmp_path, text_files)
    dm.setup("fit")
    tokens = torch.from_numpy(dm.token_files["train"].tokens.astype(np.int64))
    loader = dm.train_dataloader()
    assert len(loader) == 10  # 40 windows, batches of 4
    for step, (inputs, targets) in enumerate(loader):
        assert inputs.shape == targets.shape == (4, MAX_LEN) and inputs.dtype == targets.dtype == torch.int64
        assert torch.equal(inputs[:, 1:], targets[:, :-1])
        for row in range(4):  # each window is max_len + 1 consecutive corpus tokens at its hashed start
            start = dm.train_set.start(dm.train_set.index(0, 4 * step + row))
            assert torch.equal(torch.cat([inputs[row], targets[row, -1:]]), tokens[start : start + MAX_LEN + 1])
    val_inputs, val_targets = next(iter(dm.val_dataloader()))
    assert val_inputs.shape == (4, MAX_LEN) and torch.equal(val_inputs[:, 1:], val_targets[:, :-1])


def test_validation_windows_are_fixed_and_cover_the_split(tmp_path, text_files):
    a = make_dm(tmp_path, text_files, data_seed=0)
    b = make_dm(tmp_path, text_files, data_seed=5)  # the seed moves training windows only
    for dm in (a, b):
        dm.setup("fit")
    assert torch.equal(windows(a.val_set, range(10)), windows(b.val_set, range(10)))
    assert a.val_set.starts[0] == 0 and a.val_set.starts[-1] == a.val_set.num_starts - 1

    everything = make_dm(tmp_path, text_files, val_windows=None)
    everything.setup("fit")
    starts = everything.val_set.starts  # non-overlapping: every target token predicted once
    assert (np.diff(starts) == MAX_LEN).all()
    assert starts[-1] + 2 * MAX_LEN >= everything.token_files["validation"].num_tokens - 1


def test_training_windows_depend_on_seed_and_epoch_and_are_reproducible(tmp_path, text_files):
    a, a_again, b = (make_dm(tmp_path, text_files, data_seed=s) for s in (0, 0, 1))
    for dm in (a, a_again, b):
        dm.setup("fit")

    def epoch_starts(dm, epoch):
        sampler = EpochSampler(dm.train_set)
        sampler.set_epoch(epoch)
        return [dm.train_set.start(k) for k in sampler]

    assert epoch_starts(a, 0) == epoch_starts(a_again, 0)  # a resumed run recomputes the same windows
    assert epoch_starts(a, 3) == epoch_starts(a_again, 3)
    assert epoch_starts(a, 0) != epoch_starts(a, 1)
    assert epoch_starts(a, 0) != epoch_starts(b, 0)
    assert len(set(epoch_starts(a, 0))) > 30  # spread over the corpus, not a handful of positions


def test_ddp_ranks_see_different_windows(tmp_path, text_files):
    dm = make_dm(tmp_path, text_files)
    dm.setup("fit")
    data = dm.train_set
    # Lightning's plain DistributedSampler over the dataset, and the wrapper it puts around our sampler.
    plain = [list(DistributedSampler(data, num_replicas=2, rank=r, shuffle=True, seed=0)) for r in range(2)]
    wrapped = []
    for rank in range(2):
        sampler = DistributedSamplerWrapper(EpochSampler(data), num_replicas=2, rank=rank, shuffle=True, seed=0)
        sampler.set_epoch(3)  # forwarded to our sampler
        wrapped.append(list(sampler))
    for ranks in (plain, wrapped):
        assert len(ranks[0]) == len(ranks[1]) == 20 and not set(ranks[0]) & set(ranks[1])
        assert not torch.equal(windows(data, ranks[0]), windows(data, ranks[1]))
    assert set(wrapped[0]) | set(wrapped[1]) == set(range(data.index(3, 0), data.index(4, 0)))


class RecordingModel(L.LightningModule):
    """A tiny bigram model that remembers the first training batch of every epoch."""

    def __init__(self):
        super().__init__()
        self.logits = torch.nn.Embedding(256, 256)
        self.first_inputs = {}

    def training_step(self, batch, batch_idx):
        inputs, targets = batch
        self.first_inputs.setdefault(self.current_epoch, inputs.clone())
        return torch.nn.functional.cross_entropy(self.logits(inputs).flatten(0, 1), targets.flatten())

    def validation_step(self, batch, batch_idx):
        inputs, targets = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self.logits(inputs).flatten(0, 1), targets.flatten()))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_lightning_fit_gives_each_epoch_new_windows(tmp_path, text_files):
    dm = make_dm(tmp_path, text_files)
    model = RecordingModel()
    trainer = L.Trainer(
        max_epochs=2,
        limit_train_batches=2,
        limit_val_batches=1,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
    )
    trainer.fit(model, datamodule=dm)
    for epoch in (0, 1):  # Lightning's set_epoch reached the sampler: epoch e reads windows e * N + i
        expected = torch.stack([dm.train_set[dm.train_set.index(epoch, i)][0] for i in range(4)])
        assert torch.equal(model.first_inputs[epoch], expected)
    assert not torch.equal(model.first_inputs[0], model.first_inputs[1])


def test_token_dtype_follows_vocabulary():
    assert token_dtype(256) == np.uint16 and token_dtype(65_536) == np.uint16
    assert token_dtype(65_537) == np.uint32 and token_dtype(100_277) == np.uint32


def test_too_short_corpus_and_bad_arguments(tmp_path, text_files):
    with pytest.raises(ConfigError, match=r"The training split has \d+ tokens, fewer than max_len \+ 1 = 100001"):
        make_dm(tmp_path, text_files, max_len=100_000).setup("fit")
    with pytest.raises(ConfigError, match="max_files applies only to dataset='stdlib'"):
        make_dm(tmp_path, text_files, max_files=3)
    with pytest.raises(ConfigError, match="train_windows_per_epoch=0 is invalid"):
        make_dm(tmp_path, text_files, train_windows_per_epoch=0)


# ----------------------------------------------------------------------------- stdlib corpus


def test_stdlib_files_leave_out_tests_and_packages():
    files = stdlib_files()
    assert len(files) > 300 and "os.py" in files and "json/decoder.py" in files
    assert not any(EXCLUDED_DIRS.intersection(f.split("/")[:-1]) for f in files)
    assert not any(f.startswith(("test/", "idlelib/idle_test/")) or "/tests/" in f for f in files)
    assert stdlib_files(max_files=50) == stdlib_files(max_files=50) and len(stdlib_files(max_files=50)) == 50


def test_stdlib_splits_are_disjoint_and_stable_by_path():
    files = stdlib_files()
    splits = {name: [f for f in files if split_of(f, 0.05) == name] for name in ("train", "validation", "test")}
    assert splits == {name: [f for f in files if split_of(f, 0.05) == name] for name in splits}
    assert 0.02 < len(splits["validation"]) / len(files) < 0.1 and 0.02 < len(splits["test"]) / len(files) < 0.1
    assert sum(map(len, splits.values())) == len(files)  # each file in exactly one split
    # Adding or removing other files never moves a file between splits.
    assert [f for f in files[::3] if split_of(f, 0.05) == "test"] == [f for f in splits["test"] if f in files[::3]]


def test_stdlib_subset_builds_identically_twice(tmp_path):
    built = []
    for run in range(2):
        dm = LanguageModelingDataModule(
            max_files=60, val_fraction=0.2, max_len=32, batch_size=2, data_dir=str(tmp_path / f"run{run}")
        )
        dm.setup("fit")
        built.append({s: (dm.cache_dir / f"{s}.bin").read_bytes() for s in ("train", "validation", "test")})
    assert built[0] == built[1] and all(len(v) > 1000 for v in built[0].values())
    tokens = np.frombuffer(built[0]["validation"], dtype=np.uint16)
    validation_files = [f for f in stdlib_files(max_files=60) if split_of(f, 0.2) == "validation"]
    assert tokens.max() < 256 and (tokens == 0).sum() == len(validation_files)  # NUL ends each file


@pytest.mark.slow
def test_stdlib_default_corpus(tmp_path):
    dm = LanguageModelingDataModule(data_dir=str(tmp_path), batch_size=8)  # the embedded default, whole library
    assert dm.model_sizes() == {"vocab_size": 256, "max_len": 256}
    dm.prepare_data()
    dm.setup("fit")
    assert dm.token_files["train"].num_tokens > 5_000_000 and dm.token_files["validation"].num_tokens > 100_000
    assert dm.token_files["test"].num_tokens > 100_000 and dm.test_set is not dm.val_set
    inputs, targets = next(iter(dm.train_dataloader()))
    assert inputs.shape == (8, 256) and torch.equal(inputs[:, 1:], targets[:, :-1])
    assert bytes(dm.val_set[0][0].tolist()).decode("utf-8", errors="strict")  # real source text


@pytest.mark.slow
def test_multiprocess_tokenizing_gives_the_same_file(tmp_path, text_files):
    files = {"train": text_files["train"]}  # no validation file: the last rows are held out
    one = make_dm(tmp_path / "one", files, num_proc=1, tokenizer="bpe", vocab_size=300)
    two = make_dm(tmp_path / "two", files, num_proc=2, tokenizer="bpe", vocab_size=300)
    for dm in (one, two):
        dm.setup("fit")
    for split in ("train", "validation"):
        a = (one.cache_dir / f"{split}.bin").read_bytes()
        assert len(a) > 0 and a == (two.cache_dir / f"{split}.bin").read_bytes()
    train = np.fromfile(one.cache_dir / "train.bin", dtype=np.uint16)
    assert train.max() < 300 and (train >= 259).any()  # BPE merges, within the declared vocabulary
    # The held-out rows are the file's last lines, and the cached BPE decodes them back exactly.
    lines = open(text_files["train"], encoding="utf-8").read().splitlines(keepends=True)
    held_out = "".join(lines[-math.ceil(len(lines) * 0.05) :])
    [bpe_file] = (tmp_path / "one" / "data" / "tokenizers").iterdir()
    bpe = HFTokenizer(Tokenizer.from_file(str(bpe_file)), "bpe")
    assert bpe.decode(np.fromfile(one.cache_dir / "validation.bin", dtype=np.uint16).tolist()) == held_out


def test_worker_processes_read_the_same_windows(tmp_path, text_files):
    """Workers get a pickled dataset without the memory map and open their own; batches are unchanged."""
    in_process, with_workers = make_dm(tmp_path, text_files), make_dm(tmp_path, text_files, num_workers=2)
    for dm in (in_process, with_workers):
        dm.setup("fit")
    loaders = (in_process.train_dataloader(), with_workers.train_dataloader())
    assert loaders[1].persistent_workers and not loaders[0].persistent_workers
    for (a_in, a_tgt), (b_in, b_tgt) in zip(*loaders, strict=True):
        assert torch.equal(a_in, b_in) and torch.equal(a_tgt, b_tgt)


@pytest.mark.parametrize(
    "content, words",
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "is not UTF-8 text (byte 0x89 at line 1)"),
        (b"a prompt\nthen\x00\x01binary\n", "holds NUL bytes, so it is a binary file, not text"),
    ],
    ids=["png", "nul-bytes"],
)
def test_a_binary_predict_file_is_refused_naming_it(tmp_path, text_files, content, words):
    binary = tmp_path / "picture.png"
    binary.write_bytes(content)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("def f(x):\r\nclass A:\n", encoding="utf-8")
    module = make_dm(tmp_path, text_files, tokenizer="bytes", predict_files=[str(prompts), str(binary)])
    with pytest.raises(ConfigError) as refused:
        module.setup("predict")
    assert f"predict_files {str(binary)!r} {words}; give text files with one input per line." == str(refused.value)
    text = make_dm(tmp_path, text_files, tokenizer="bytes", predict_files=str(prompts))
    text.setup("predict")
    assert text.predict_set == ["def f(x):", "class A:"]
