"""`lit-attention export`: a trained run becomes a folder (safetensors weights, config.json, the run's tokenizer,
a model card) that `from_pretrained` loads into the same model, from the folder or from the Hub's cache."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch

from in_process import run_main  # tests/ is on sys.path under pytest (in_tmp: conftest.py)
from lit_attention.analysis.loading import load_run
from lit_attention.errors import ConfigError
from lit_attention.modeling.pretrained import from_pretrained

ROOT = Path(__file__).resolve().parents[1]
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
GPT = str(ROOT / "recipes/quickstart/gpt_stdlib.yaml")
# No progress bar in these in-process runs: its redraws would fill the output the test reads; the bar's own
# path (every rank, every mode) is tests/test_multiprocess_matrix.py's.
QUIET = ["--trainer.enable_progress_bar=false", "--trainer.log_every_n_steps=1"]
TINY = ["--model.net.dim=16", "--model.net.num_heads=2", "--model.net.depth=1", *QUIET]


def trained(args: list[str], variant: str) -> Path:
    assert run_main(["fit", *args, "--model.attention", variant]) == 0
    [run] = Path("runs").glob(f"*/*/{variant}/seed_0/version_0")
    return run


def files_of(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.mark.slow  # trains a run
def test_an_exported_vit_loads_with_identical_logits_and_its_card_quotes_the_record(in_tmp, capsys, monkeypatch):
    run = trained(
        [
            "--config",
            VIT,
            "--trainer.max_epochs=1",
            "--trainer.limit_train_batches=4",
            "--trainer.limit_val_batches=2",
            "--run.test=true",
            "--trainer.limit_test_batches=2",
            *TINY,
        ],
        "super",
    )
    assert run_main(["export", str(run), "--to", "exported/vit_super", "--transformers"]) == 2  # no GPT-2 counterpart
    assert "Only a GPT has a transformers counterpart (GPT-2, Llama, Qwen3)" in capsys.readouterr().err
    assert not (in_tmp / "exported").exists()  # refused before anything was written
    assert run_main(["export", str(run), "--to", "exported/vit_super"]) == 0
    assert "Exported" in capsys.readouterr().out
    folder = in_tmp / "exported" / "vit_super"
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    config = json.loads((folder / "config.json").read_text())
    assert config["model"] == "VisionTransformer" and config["attention"]["value_mix"] is True
    model, original = from_pretrained(folder), load_run(run).task.model
    images = torch.randn(3, 1, 8, 8)
    assert torch.equal(model(images), original(images))  # the same weights, the same math: bit for bit
    record = json.loads((run / "record.json").read_text())
    card = (folder / "README.md").read_text()
    assert 'from_pretrained("exported/vit_super")' in card and "the best checkpoint, test split" in card
    assert "`super`" in card and "`quickstart/vit_digits`" in card and "ImageDataModule" in card
    assert f"{record['best']['value']:.6g}" in card and f"{record['test']['test/acc']:.6g}" in card
    before = files_of(folder)
    assert run_main(["export", str(run), "--to", "exported/vit_super"]) == 0  # an earlier export's folder: replaced
    assert files_of(folder) == before
    # --push: the Hub is not reachable here, so offline mode makes huggingface_hub refuse at once (no retries);
    # the export is written first and stays, and the sentence says how to push it later.
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    assert run_main(["export", str(run), "--to", "exported/vit_super", "--push", "someone/vit-super"]) == 2
    error = capsys.readouterr().err
    assert "The export is written to 'exported/vit_super', but pushing it to 'someone/vit-super' failed" in error
    assert "OfflineModeIsEnabled" in error and "`hf upload someone/vit-super exported/vit_super`" in error
    assert files_of(folder) == before


@pytest.mark.slow  # trains a run with a BPE tokenizer
def test_a_gpt_run_keeps_its_tokenizer_and_the_export_carries_it_and_loads_from_the_hub_cache(in_tmp, monkeypatch):
    from tokenizers import Tokenizer

    run = trained(
        [
            "--config",
            GPT,
            "--trainer.max_steps=2",
            "--trainer.val_check_interval=2",
            "--data.max_files=60",
            "--data.val_fraction=0.2",
            "--data.val_windows=4",
            "--data.max_len=16",
            "--data.tokenizer=bpe",
            "--data.vocab_size=300",
            *TINY,
        ],
        "standard",
    )
    [trained_bpe] = (in_tmp / "data" / "tokenizers").iterdir()  # the data folder's cached tokenizer
    assert (run / "tokenizer.json").read_text() == Tokenizer.from_file(str(trained_bpe)).to_str(pretty=True)
    folder = in_tmp / "exported"
    assert run_main(["export", str(run), "--to", str(folder), "--transformers"]) == 0
    from transformers import GPT2LMHeadModel  # the recipe's GPT has GPT-2's shape: transformers computes it too

    gpt2 = GPT2LMHeadModel.from_pretrained(folder / "transformers").eval()
    tokens = torch.randint(0, 300, (2, 16))
    torch.testing.assert_close(gpt2(tokens).logits, load_run(run).task.model(tokens), rtol=1e-4, atol=1e-5)
    assert (folder / "transformers" / "tokenizer.json").is_file()
    assert run_main(["export", str(run), "--to", str(folder)]) == 0  # again, without --transformers:
    assert not (folder / "transformers").exists() and (folder / "tokenizer.json").is_file()  # no stale copy left
    text = "def answer():\n    return 42\n"
    assert (
        Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids
        == Tokenizer.from_file(str(trained_bpe)).encode(text).ids
    )
    assert "`tokenizer.json`" in (folder / "README.md").read_text()
    # The Hub's cache as huggingface_hub writes it (models--user--name/snapshots/<commit>, refs/main): a
    # repository pulled once loads offline by its id.
    cache, commit = in_tmp / "hub", "0123456789abcdef0123456789abcdef01234567"
    snapshot = cache / "models--someone--tiny-gpt" / "snapshots" / commit
    shutil.copytree(folder, snapshot)
    (cache / "models--someone--tiny-gpt" / "refs").mkdir()
    (cache / "models--someone--tiny-gpt" / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    assert torch.equal(from_pretrained("someone/tiny-gpt")(tokens), load_run(run).task.model(tokens))
    with pytest.raises(ConfigError, match="'someone/elsewhere' could not be fetched"):
        from_pretrained("someone/elsewhere")


@pytest.mark.slow  # trains a run
def test_a_llama_shaped_run_exports_to_transformers_llama_with_the_same_logits(in_tmp):
    """The Llama-style quickstart (rope, rmsnorm, swiglu, grouped keys and values) as transformers'
    LlamaForCausalLM: loaded back by transformers, it computes the GPT's logits (to float32 rounding: transformers
    computes RoPE's frequencies in float32)."""
    from transformers import LlamaForCausalLM

    llama = str(ROOT / "recipes/quickstart/gpt_llama_stdlib.yaml")
    run = trained(
        [
            "--config",
            llama,
            "--trainer.max_steps=2",
            "--trainer.val_check_interval=2",
            "--data.max_files=60",
            "--data.val_fraction=0.2",
            "--data.val_windows=4",
            "--data.max_len=16",
            "--model.net.dim=16",
            "--model.net.num_heads=4",
            "--model.net.depth=1",
            *QUIET,
        ],
        "standard,kv_heads=2",
    )
    assert run_main(["export", str(run), "--to", "exported", "--transformers"]) == 0
    reference = LlamaForCausalLM.from_pretrained(in_tmp / "exported" / "transformers").eval()
    assert reference.config.num_key_value_heads == 2 and reference.config.num_attention_heads == 4
    tokens = torch.randint(0, 256, (2, 16))
    torch.testing.assert_close(reference(tokens).logits, load_run(run).task.model(tokens), rtol=1e-4, atol=1e-5)


def test_export_refuses_a_folder_it_did_not_write_and_from_pretrained_a_folder_without_a_model(tmp_path, capsys):
    from lit_attention.sharing.command import run as export

    with pytest.raises(ConfigError, match="^export: 'nowhere' does not exist; pass a trained run's directory"):
        export(["nowhere", "--to", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
    for bad in ("vit-super", "some one/vit", "a/b/c"):  # refused before the run is read or anything written
        with pytest.raises(ConfigError, match=f"^--push {bad!r} is not a Hub repository's id; give user/name"):
            export([str(tmp_path), "--to", str(tmp_path / "out"), "--push", bad])
    with pytest.raises(ConfigError, match="^export: --private applies to --push"):
        export([str(tmp_path), "--to", str(tmp_path / "out"), "--private"])
    assert not (tmp_path / "out").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    from lit_attention.sharing.command import check_destination

    with pytest.raises(ConfigError, match="holds files that no export wrote"):
        check_destination(mine)
    assert (mine / "notes.txt").read_text() == "keep me"
    with pytest.raises(ConfigError, match="holds no readable config.json"):
        from_pretrained(mine)
    with pytest.raises(ConfigError, match="is neither a folder nor a Hub repository's id"):
        from_pretrained(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="is neither a folder nor a valid Hub repository's id"):
        from_pretrained("exported/my run")  # a missing folder that is no repository id either
