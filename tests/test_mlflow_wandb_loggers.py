"""MLflow and W&B, the loggers of the `loggers` extra, offline: a run keeps its identity in each, as with
CSVLogger (tests/test_other_loggers.py). MLflow's own file store is read back through its client; W&B's offline
run through its own record format (a LevelDB-style log of its protobuf records). Both through `fit`, MLflow
through `compare` too; MLflow's file store without MLFLOW_ALLOW_FILE_STORE is one sentence."""

from __future__ import annotations

import collections
import time
from pathlib import Path

import pytest

from in_process import run_main  # tests/ is on sys.path under pytest (in_tmp: conftest.py)

ROOT = Path(__file__).resolve().parents[1]
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
TINY = ["--model.net.dim=16", "--model.net.num_heads=2", "--model.net.depth=1"]
MLFLOW = ["--trainer.logger+=MLFlowLogger", "--trainer.logger.tracking_uri=file:./mlflow"]
# As the recipe ships (progress bar, clipping, checkpoints), with two validations that draw attention maps.
SHORT = ["--trainer.max_steps=4", "--trainer.val_check_interval=2", "--run.attention_maps=true"]
RUN = "quickstart/vit_digits/super/seed_0/version_0"


def mlflow_runs(folder: Path) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"file:{folder}")
    experiments = client.search_experiments()
    return client, [run for e in experiments for run in client.search_runs([e.experiment_id])]


@pytest.mark.slow  # trains a run
def test_an_mlflow_run_is_named_after_the_run_with_its_labels_metrics_and_attention_maps(in_tmp, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps its file store behind this switch
    assert run_main(["fit", "--config", VIT, *MLFLOW, *TINY, *SHORT, "--model.attention=super"]) == 0
    client, [run] = mlflow_runs(in_tmp / "mlflow")
    assert run.info.run_name == RUN
    params = run.data.params
    assert (params["variant"], params["seed"], params["recipe"], params["settings"]) == (
        "super",
        "0",
        "quickstart/vit_digits",
        "default",
    )
    assert int(params["params/non_embedding"]) > 0 and params["data/dataset"] == "digits"
    assert [m.step for m in client.get_metric_history(run.info.run_id, "val/acc")] == [1, 3]  # steps 2 and 4
    maps = [a.path for a in client.list_artifacts(run.info.run_id, "attention")]
    assert maps and all(path.startswith("attention/blocks.0.attn") for path in maps), maps
    assert (in_tmp / "runs" / RUN / "record.json").is_file()  # beside the run's own layout


@pytest.mark.slow  # a sweep of two runs
def test_compare_names_each_mlflow_run_by_arm_variant_and_seed(in_tmp, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    words = ["compare", "--config", VIT, "--variants", "standard,efficient", "--seeds", "1", "--output", "out"]
    assert run_main([*words, "--parallel", "1", *MLFLOW, *TINY, "--trainer.max_steps=2"]) == 0
    _, runs = mlflow_runs(in_tmp / "mlflow")
    names = sorted(run.info.run_name for run in runs)
    assert names == ["default/efficient/seed_0/version_0", "default/standard/seed_0/version_0"]  # grid point/arm/seed
    assert sorted(run.data.params["variant"] for run in runs) == ["efficient", "standard"]


@pytest.mark.slow  # parses a command line with Lightning
def test_mlflows_file_store_without_its_switch_is_one_sentence_before_anything_runs(in_tmp, capsys, monkeypatch):
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    assert run_main(["fit", "--config", VIT, *MLFLOW, *TINY, "--trainer.max_steps=2"]) == 2
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert line == (
        "error: --trainer.logger MLFlowLogger would keep its runs in MLflow's file store (file:./mlflow), which this "
        "MLflow refuses unless MLFLOW_ALLOW_FILE_STORE=true is set; set it, or give --trainer.logger.tracking_uri a "
        "database (sqlite:///mlflow.db, with the full mlflow package) or a tracking server."
    )
    assert not (in_tmp / "runs").exists() and not (in_tmp / "mlflow").exists()


def wandb_records(path: Path) -> list:
    """The protobuf records of an offline W&B run's .wandb file: a 7-byte header (":W&B", 0xBEE1, version 0),
    then LevelDB's log format, 32 KiB blocks of chunks (crc32, length, type: full, first, middle, last)."""
    from wandb.proto import wandb_internal_pb2

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B", data[:7]
    found, pending, at = [], b"", 7
    while at + 7 <= len(data):
        if block - at % block < 7:  # a block's tail too short for a chunk header is padding
            at += block - at % block
            continue
        length, kind = int.from_bytes(data[at + 4 : at + 6], "little"), data[at + 6]
        if at + 7 + length > len(data):  # a chunk still being written
            break
        pending += data[at + 7 : at + 7 + length]
        at += 7 + length
        if kind in (1, 4):  # full, or the last chunk of a record
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            found.append(record)
            pending = b""
    return found


def finished_wandb_records(path: Path, deadline_s: float = 60.0) -> list:
    """The records once the run's exit record is on disk. W&B 0.31's separate writer process (wandb-core) may
    still be writing after `wandb.finish()` returns: a CI run read the file before its run record was there."""
    start = time.monotonic()
    while True:
        records = wandb_records(path)
        if any(r.WhichOneof("record_type") == "exit" for r in records):
            return records
        assert time.monotonic() - start < deadline_s, f"{path} has no exit record after {deadline_s:.0f} s"
        time.sleep(0.2)


@pytest.mark.slow  # trains a run
def test_an_offline_wandb_run_is_named_after_the_run_with_its_labels_metrics_and_attention_maps(in_tmp, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    wandb = ["--trainer.logger+=WandbLogger", "--trainer.logger.offline=true", "--trainer.logger.save_dir=wb"]
    assert run_main(["fit", "--config", VIT, *wandb, *TINY, *SHORT, "--model.attention=super"]) == 0
    import wandb as wandb_module

    wandb_module.finish()  # the run's records are flushed when it ends (in a user's process: at exit)
    [log] = (in_tmp / "wb" / "wandb").glob("offline-run-*/run-*.wandb")
    records = finished_wandb_records(log)
    names = {r.run.display_name for r in records if r.WhichOneof("record_type") == "run"}
    assert names == {RUN}, collections.Counter(r.WhichOneof("record_type") for r in records)  # what the log held
    config = {item.key: item.value_json for r in records if r.HasField("config") for item in r.config.update}
    assert (config["variant"], config["seed"], config["recipe"]) == ('"super"', "0", '"quickstart/vit_digits"')
    logged = {item.key or "/".join(item.nested_key) for r in records if r.HasField("history") for item in r.history.item}
    assert {"val/acc", "val/loss"} <= logged, sorted(logged)
    maps = list(log.parent.glob("files/media/images/attention/blocks.0.attn_*.png"))
    assert len(maps) == 2, maps  # one a validation
