"""`--run.global_batch_size` keeps a recipe's sequences per optimizer step on any layout: the per-device
batch and the accumulation follow the number of processes (devices x nodes), `val_check_interval` follows
the accumulation, and a layout that cannot keep it is refused in one sentence before anything is built.
The GPT-3-small recipe states 480 windows a step (issue 49: on 2 x 8 GPUs it trained 960)."""

from pathlib import Path

import pytest
import yaml

from in_process import run_main  # tests/ is on sys.path under pytest

ROOT = Path(__file__).resolve().parents[1]
GPT3_SMALL = str(ROOT / "recipes/nonlinear_query/gpt3_small.yaml")
pytestmark = pytest.mark.slow  # each parses the recipe through LightningCLI (about 0.5 s of CPU, 5 s the first)


def resolved(capsys, *layout: str) -> dict:
    """The config `fit --print_config` shows for the recipe on `layout` (the data is not read: offline)."""
    assert run_main(["fit", "--config", GPT3_SMALL, *layout, "--print_config"]) == 0
    return yaml.safe_load(capsys.readouterr().out)


@pytest.mark.parametrize(
    "layout, batch, accumulation, interval",
    [
        ([], 12, 5, 5000),  # as it ships: 8 GPUs
        (["--trainer.devices=1"], 12, 40, 40000),
        (["--trainer.devices=4"], 12, 10, 10000),
        (["--config", str(ROOT / "recipes/trainer/multi_node.yaml")], 10, 3, 3000),  # 2 nodes x 8 GPUs
        (["--trainer.devices=8", "--trainer.num_nodes=4"], 5, 3, 3000),  # 15 a GPU: 5 x 3
    ],
)
def test_the_global_batch_is_kept_on_every_layout(layout, batch, accumulation, interval, capsys, in_tmp):
    config = resolved(capsys, *layout)
    processes = int(config["trainer"]["devices"]) * int(config["trainer"]["num_nodes"])
    assert config["data"]["init_args"]["batch_size"] == batch
    assert config["trainer"]["accumulate_grad_batches"] == accumulation
    assert batch * accumulation * processes == config["run"]["global_batch_size"] == 480
    assert config["trainer"]["val_check_interval"] == interval  # every 1,000 optimizer steps


def test_a_layout_that_cannot_keep_the_global_batch_is_refused(capsys, in_tmp):
    assert run_main(["fit", "--config", GPT3_SMALL, "--trainer.devices=7", "--print_config"]) == 2
    err = capsys.readouterr().err
    assert "--run.global_batch_size 480 cannot be split evenly over 7 training processes" in err
    assert not list(in_tmp.iterdir())  # refused before anything was written


def test_a_bad_global_batch_is_one_sentence(capsys, in_tmp):
    assert run_main(["fit", "--config", GPT3_SMALL, "--run.global_batch_size=0"]) == 2
    assert "--run.global_batch_size 0 is invalid" in capsys.readouterr().err


def test_a_layout_that_counts_no_process_here_is_one_sentence(capsys, in_tmp):
    """devices -1 of a GPU recipe on a machine without one (a login node that plans a sweep) counts no process."""
    assert run_main(["fit", "--config", GPT3_SMALL, "--trainer.devices=-1", "--print_config"]) == 2
    assert "give --trainer.devices and --trainer.num_nodes as numbers" in capsys.readouterr().err
