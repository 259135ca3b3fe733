"""A prepared token cache is checked before a run reads it (datamodules/token_cache.py): a token file cut
short, grown or rewritten after it was prepared, or a meta.json cut mid-string, is one sentence naming the
file and the command that rebuilds it, from `fit` and from `prepare`, and the cache is left as it was."""

import shutil
from pathlib import Path

import pytest

from in_process import run_main, tree  # tests/ is on sys.path under pytest

ROOT = Path(__file__).resolve().parents[1]
GPT = [
    "--config",
    str(ROOT / "recipes/quickstart/gpt_stdlib.yaml"),
    "--data.max_files=40",
    "--data.max_len=16",
    "--data.val_windows=4",
    "--model.net.dim=16",
    "--model.net.num_heads=2",
    "--model.net.depth=1",
    "--trainer.max_steps=2",
    "--trainer.limit_val_batches=1",
]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """A prepared stdlib cache, once for the module (tests damage copies of it)."""
    folder = tmp_path_factory.mktemp("prepared")
    assert run_main(["prepare", *GPT, f"--data.data_dir={folder / 'data'}"]) == 0
    return folder / "data"


def damaged(prepared: Path, tmp_path: Path, damage) -> tuple[Path, dict]:
    data = Path(shutil.copytree(prepared, tmp_path / "data"))
    [cache] = (data / "tokens").iterdir()
    damage(cache)
    return data, tree(data)


def cut(cache: Path) -> None:
    path = cache / "train.bin"
    path.write_bytes(path.read_bytes()[:2000])


def odd(cache: Path) -> None:  # not a whole number of tokens
    path = cache / "train.bin"
    path.write_bytes(path.read_bytes()[:1001])


def rewritten(cache: Path) -> None:  # the same size, other bytes at its start
    path = cache / "train.bin"
    data = bytearray(path.read_bytes())
    data[:64] = bytes(64)
    path.write_bytes(bytes(data))


def meta_cut(cache: Path) -> None:
    path = cache / "meta.json"
    path.write_text(path.read_text()[:40])


def meta_without_counts(cache: Path) -> None:
    import json

    meta = json.loads((cache / "meta.json").read_text())
    del meta["tokens"]["validation"]
    (cache / "meta.json").write_text(json.dumps(meta))


@pytest.mark.slow  # prepares a corpus, then parses and refuses a fit and a prepare per damage
@pytest.mark.parametrize(
    "damage, words",
    [
        (cut, "holds 2,000 bytes"),
        (odd, "holds 1,001 bytes"),
        (rewritten, "differs from the one written"),
        (meta_cut, "cannot be read"),
        (meta_without_counts, "cannot be read (ValueError)"),
    ],
    ids=["cut", "not whole tokens", "rewritten", "meta.json cut", "a count missing"],
)
def test_a_damaged_token_cache_is_one_sentence_from_fit_and_prepare(damage, words, prepared, in_tmp, capsys):
    data, before = damaged(prepared, in_tmp, damage)
    for command in (["fit", *GPT, "--run.root=runs"], ["prepare", *GPT]):
        assert run_main([*command, f"--data.data_dir={data}"]) == 2, command[0]
        err = capsys.readouterr().err
        assert words in err and "lit-attention prepare" in err and "Traceback" not in err, err[-2000:]
    assert tree(data) == before  # the cache as it was
    assert not list(in_tmp.glob("runs/**/record.json"))


@pytest.mark.slow
def test_an_intact_cache_trains_and_a_cache_without_digests_gains_them(prepared, in_tmp, capsys):
    import json

    data = Path(shutil.copytree(prepared, in_tmp / "data"))
    [cache] = (data / "tokens").iterdir()
    meta = json.loads((cache / "meta.json").read_text())
    assert set(meta["samples"]) == set(meta["splits"])
    del meta["samples"]  # a cache prepared before the digests
    (cache / "meta.json").write_text(json.dumps(meta))
    assert run_main(["fit", *GPT, f"--data.data_dir={data}", "--run.root=runs"]) == 0, capsys.readouterr().err[-2000:]
    assert set(json.loads((cache / "meta.json").read_text())["samples"]) == set(meta["splits"])


@pytest.mark.slow
def test_a_multi_process_run_on_a_damaged_cache_is_refused_before_its_processes_start(prepared, in_tmp, capsys):
    data, before = damaged(prepared, in_tmp, cut)
    assert (
        run_main(
            [
                "fit",
                *GPT,
                f"--data.data_dir={data}",
                "--run.root=runs",
                "--trainer.accelerator=cpu",
                "--trainer.devices=2",
                "--trainer.strategy=ddp",
            ]
        )
        == 2
    )  # no second process was started
    assert "holds 2,000 bytes" in capsys.readouterr().err and tree(data) == before
