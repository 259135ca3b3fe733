"""`lit-attention prepare`: a recipe's data prepared once, in one process without a process group,
before a multi-device run, which refuses data that is not prepared yet."""

from pathlib import Path

import pytest
import torch

from lit_attention.errors import ConfigError
from lit_attention.sweep.planning import plan_run
from lit_attention.training.cli_input import check_data_prepared
from in_process import run_main  # tests/ is on sys.path under pytest (in_tmp: conftest.py)

ROOT = Path(__file__).resolve().parents[1]
GPT = str(ROOT / "recipes/quickstart/gpt_stdlib.yaml")
SMALL_GPT = [
    "--config",
    GPT,
    "--data.max_files=40",
    "--data.max_len=16",
    "--model.net.dim=16",
    "--model.net.num_heads=2",
    "--model.net.depth=1",
    "--trainer.accelerator=cpu",
]
TWO_PROCESSES = ["--trainer.devices=2", "--trainer.strategy=ddp"]


@pytest.mark.parametrize("devices", [TWO_PROCESSES, ["--trainer.num_nodes=2"]], ids=["devices", "nodes"])
@pytest.mark.slow
def test_a_multi_device_run_on_unprepared_token_files_is_one_sentence_naming_prepare(devices, in_tmp, capsys):
    assert run_main(["fit", *SMALL_GPT, *devices]) == 2
    error = capsys.readouterr().err
    assert "not prepared yet" in error and "lit-attention prepare" in error, error[-2000:]
    assert not (in_tmp / "data").exists() and not (in_tmp / "runs").exists()  # nothing tokenized, no run started


@pytest.mark.slow
def test_prepare_tokenizes_once_says_where_and_the_multi_device_run_then_goes_ahead(in_tmp, capsys):
    plan = plan_run([*SMALL_GPT, *TWO_PROCESSES])
    with pytest.raises(ConfigError, match="not prepared yet"):
        check_data_prepared(plan.config.trainer, plan.datamodule)
    assert run_main(["prepare", *SMALL_GPT, *TWO_PROCESSES]) == 0  # the fit's own arguments
    [meta] = in_tmp.glob("data/tokens/*/meta.json")
    assert f"Prepared data: {meta.parent}" in capsys.readouterr().out
    assert not (in_tmp / "runs").exists() and not torch.distributed.is_initialized()
    check_data_prepared(plan_run([*SMALL_GPT, *TWO_PROCESSES]).config.trainer, plan.datamodule)
    before = meta.stat().st_mtime_ns
    assert run_main(["prepare", *SMALL_GPT]) == 0  # prepared already: nothing is made again
    assert meta.stat().st_mtime_ns == before and "Prepared data:" in capsys.readouterr().out


@pytest.mark.slow
def test_a_one_device_run_is_not_asked_to_prepare_first(in_tmp):
    check_data_prepared(plan_run([*SMALL_GPT, "--trainer.devices=1"]).config.trainer, plan_run(SMALL_GPT).datamodule)


@pytest.mark.slow  # the prepare command imports Lightning's CLI
def test_prepare_without_a_recipe_says_it_takes_the_fits_config(in_tmp, capsys):
    assert run_main(["prepare"]) == 2
    err = capsys.readouterr().err
    assert "prepare takes the fit's recipe and options" in err and "--config recipes/" in err
    assert run_main(["prepare", "-c", GPT, "--model.attention", "bogus"]) == 2  # -c is --config
    assert "bogus" in capsys.readouterr().err


@pytest.mark.slow  # parses the recipe through LightningCLI
def test_prepare_refuses_what_the_fit_would_refuse_before_preparing_anything(in_tmp, capsys):
    assert run_main(["prepare", "--config", GPT, "--model.attention", "bogus"]) == 2
    assert "bogus" in capsys.readouterr().err
    assert not (in_tmp / "data").exists()  # nothing was prepared
