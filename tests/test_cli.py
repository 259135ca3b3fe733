"""The `lit-attention` command as a user runs it: real files, real event files, a real TensorBoard
server. Through `main(argv)`, the console script's entry point, in this process (conftest.py), except
DDP, whose second rank Lightning starts as a new process running the same command (test_ddp_results.py,
whose DDP runs also check what such a run writes)."""

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from in_process import run_main  # tests/ is on sys.path under pytest (in_tmp, finished_run: conftest.py)
from test_commands import TINY_VIT as SHARED_TINY_VIT  # the tiny run test_commands shares through finished_run

ROOT = Path(__file__).resolve().parents[1]
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
GPT = str(ROOT / "recipes/quickstart/gpt_stdlib.yaml")
# No progress bar in these in-process runs: its redraws would fill the output the test reads; the bar's own
# path (every rank, every mode) is tests/test_multiprocess_matrix.py's.
TINY_VIT = [
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=4",
    "--trainer.limit_val_batches=2",
    "--trainer.enable_progress_bar=false",
    "--trainer.log_every_n_steps=1",
    "--model.net.dim=32",
    "--model.net.depth=1",
]


def only_run_dir(root: Path, pattern: str) -> Path:
    found = sorted(root.glob(pattern))
    assert len(found) == 1, found
    return found[0]


def scalars(run_dir: Path) -> dict[str, list[float]]:
    events = EventAccumulator(str(run_dir))
    events.Reload()
    return {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


@pytest.mark.slow
def test_vit_quickstart_writes_checkpoints_config_and_readable_scalars(in_tmp, capsys):
    status = run_main(["fit", "--config", VIT, *TINY_VIT, "--model.attention=super", "--run.attention_maps=true"])
    result = capsys.readouterr()
    assert status == 0, result.err[-3000:]
    run_dir = only_run_dir(in_tmp, "runs/quickstart/vit_digits/super/seed_0/version_*")
    assert (run_dir / "checkpoints/last.ckpt").is_file()
    assert list((run_dir / "checkpoints").glob("best-*.ckpt"))
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["model"]["init_args"]["attention"] == "super"
    assert config["model"]["init_args"]["net"]["image_size"] == 8  # copied from the DataModule
    logged = scalars(run_dir)
    for tag in ("train/loss_step", "val/loss", "val/acc", "val/f1_macro", "val/acc_top5", "train/lr"):
        assert tag in logged, sorted(logged)
    assert "hp_metric" not in logged  # one tag meaning accuracy here and loss elsewhere compares nothing
    assert 0.0 <= logged["val/acc"][-1] <= 1.0
    hparams = yaml.safe_load((run_dir / "hparams.yaml").read_text())
    assert hparams["variant"] == "super" and hparams["params/attention"] > 0
    assert hparams["data/dataset"] == "digits"
    # The HParams tab: the five facts a comparison needs (TensorBoard shows the first five),
    # and the monitored metric says which way is better.
    experiment, session = hparams_summaries(run_dir)
    names = [info.name for info in experiment.hparam_infos]
    assert names == ["variant", "seed", "recipe", "settings", "params/non_embedding"]
    assert [m.name.tag for m in experiment.metric_infos] == ["best/val/acc", "test/acc"]
    assert session.hparams["seed"].number_value == 0 and session.hparams["recipe"].string_value == "quickstart/vit_digits"
    assert f"Run directory: {Path('runs/quickstart/vit_digits/super/seed_0') / run_dir.name}" in result.out
    events = EventAccumulator(str(run_dir), size_guidance={"images": 0})
    events.Reload()
    assert "attention/blocks.0.attn" in events.Tags()["images"]
    # Running again into the same root versions the run instead of overwriting it.
    assert run_main(["fit", "--config", VIT, *TINY_VIT, "--model.attention=super"]) == 0, capsys.readouterr().err[-3000:]
    assert len(list(run_dir.parent.glob("version_*"))) == 2


def hparams_summaries(run_dir: Path):
    """The HParams plugin's experiment (hyper-parameter and metric infos) and session-start summaries."""
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    events = EventAccumulator(str(run_dir), size_guidance={"tensors": 0})
    events.Reload()
    content = events.PluginTagToContent("hparams")
    experiment = HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    session = HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    return experiment, session


@pytest.mark.slow
def test_gpt_quickstart_trains_on_the_stdlib_corpus(in_tmp, capsys):
    # 12 steps: ThroughputMonitor reports rates once its 10-batch window is full.
    args = [
        "fit",
        "--config",
        GPT,
        "--trainer.max_steps=12",
        "--trainer.val_check_interval=6",
        "--data.max_files=40",
        "--data.val_windows=8",
        "--data.max_len=32",
        "--trainer.log_every_n_steps=1",
        "--trainer.enable_progress_bar=false",
        "--model.net.dim=32",
        "--model.net.depth=1",
    ]
    assert run_main(args) == 0, capsys.readouterr().err[-3000:]
    run_dir = only_run_dir(in_tmp, "runs/quickstart/gpt_stdlib/standard/seed_0/version_*")
    logged = scalars(run_dir)
    assert len(logged["val/loss"]) == 2
    assert logged["val/ppl"][-1] == pytest.approx(2.718281828 ** logged["val/loss"][-1], rel=1e-5)
    assert logged["train/device/items_per_sec"][-1] > 0  # tokens/s from Lightning's ThroughputMonitor
    assert logged["train/device/flops_per_sec"][-1] > 0  # FLOPs counted by torch, not typed in
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    net = config["model"]["init_args"]["net"]
    assert net["max_len"] == 32 and net["vocab_size"] == 256
    assert (run_dir / "checkpoints/last.ckpt").is_file()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_tensorboard_server_serves_the_run_scalars(finished_run):
    runs = finished_run(SHARED_TINY_VIT) / "runs"  # only read: the server is given the shared run
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tensorboard.main",
            "--logdir",
            str(runs),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--load_fast=false",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        tags, deadline = None, time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/scalars/tags", timeout=5) as r:
                    tags = json.load(r)
                if tags:
                    break
            except OSError:
                pass
            time.sleep(1)
        assert tags, "TensorBoard did not serve any run"
        run_name = next(name for name in tags if name.startswith("quickstart/vit_digits/standard/seed_0"))
        assert {"val/acc", "train/loss_step"} <= set(tags[run_name])
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?run={run_name}&tag=val/acc", timeout=5
        ) as r:
            points = json.load(r)
        assert points and 0.0 <= points[-1][2] <= 1.0
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--model.attention=superb"], "Unknown attention variant 'superb'; valid presets are standard"),
        (["--model.net.dim=30"], "dim=30 is not divisible by num_heads=4"),
        (["--data.dataset=imagenet"], "imagenet"),
    ],
)
@pytest.mark.slow
def test_bad_input_fails_fast_with_one_clear_sentence(extra, message, in_tmp, capsys):
    started = time.monotonic()
    assert run_main(["fit", "--config", VIT, *extra]) == 2
    stderr = capsys.readouterr().err
    assert message in stderr
    assert "Traceback" not in stderr
    assert not (in_tmp / "runs").exists()  # nothing written before the error
    assert time.monotonic() - started < 60
