"""The shipped recipes as users start them, on one process, on 2-process DDP and on FSDP over 2 ranks.

Each recipe runs as it ships, with its progress bar, gradient clipping, checkpoints, logger and
`--run.test true`; only sizes and steps shrink. A fit trains 2 steps (crossing an epoch end and a
validation), then `--ckpt_path last` resumes it to 4 steps (another epoch end and validation) and tests
its best checkpoint. Every run must exit 0, write a full record and resume its own directory.

Both ranks' processes start once per mode and run every command of that mode one after the other
(`ONE_AFTER_THE_OTHER`): each process start imports torch and Lightning again (seconds of CPU). A hang
fails the mode's tests at a timeout instead of hanging the suite. Under FSDP, `recipes/trainer/fsdp.yaml`
is stacked as docs/gpus.md says, with the test-only `cpu_fsdp.CPUFSDPStrategy` (Lightning's own
FSDPStrategy admitted on CPU) and CPU devices. 1-3 of issue 49 are what this matrix would have caught:
the bar's epoch-end metrics hung classification fits on 2 ranks, FSDP refused the recipes' clipping,
and FSDP's test after fit loaded the checkpoint into leftover shards."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from in_process import OFFLINE, run_main  # tests/ is on sys.path under pytest
from matrix_recipes import MATRIX
from test_ddp_results import last_scalars
from test_recipes_run import offline_data, write_offline_data

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
RECIPES = ROOT / "recipes"
MODES = {
    "one_process": [],
    "ddp": ["--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.strategy=ddp"],
    "fsdp": [
        "--config",
        str(RECIPES / "trainer/fsdp.yaml"),
        "--trainer.accelerator=cpu",
        "--trainer.devices=2",
        "--trainer.strategy.class_path=cpu_fsdp.CPUFSDPStrategy",
    ],
}
TIMEOUT = 600  # seconds for all of a mode's commands: a hang fails the tests instead of hanging the suite


def shrunk(recipe: str, folder: Path) -> list[str]:
    """The recipe with small sizes and 2 batches a split: everything else is as it ships."""
    path = RECIPES / recipe
    text = path.read_text()
    depth = ["--model.net.encoder_depth=1", "--model.net.decoder_depth=1"] if "encoder_depth" in text else ["--model.net.depth=1"]
    steps = ["--trainer.val_check_interval=2"] if "max_steps:" in text else []  # step-based: validate every 2
    return [
        "--config",
        str(path),
        *offline_data(path, folder),
        "--model.net.dim=16",
        "--model.net.num_heads=2",
        *depth,
        "--data.batch_size=4",
        "--trainer.limit_train_batches=2",
        "--trainer.limit_val_batches=2",
        "--trainer.limit_test_batches=2",
        "--model.warmup_steps=1",
        *steps,
        f"--run.root={folder / 'runs'}",
    ]


def run_name(recipe: str) -> str:
    return recipe.removesuffix(".yaml").replace("/", "-")


# A run of several processes refuses token files not prepared: they are prepared first, as docs/gpus.md says
# (again in each mode, where it finds them prepared). Rank 1 starts at the first fit, after them.
PREPARED = ["quickstart/gpt_stdlib.yaml", "studies/gpt_stdlib_small.yaml"]


def commands(mode: str, folder: Path) -> list[list[str]]:
    """The token files prepared, then each recipe's fit of 2 steps and its resume from `last` to 4 steps
    with the test."""
    listed = [["prepare", *shrunk(recipe, folder)] for recipe in PREPARED]
    for recipe in MATRIX:
        base = ["fit", *shrunk(recipe, folder), *MODES[mode], f"--run.name={mode}/{run_name(recipe)}"]
        listed += [[*base, "--trainer.max_steps=2"], [*base, "--trainer.max_steps=4", "--ckpt_path=last", "--run.test=true"]]
    if mode == "fsdp":  # no validation, so no best checkpoint: the test after fit loads last.ckpt into a new copy
        listed.append(
            [
                "fit",
                *shrunk(NO_VALIDATION, folder),
                *MODES[mode],
                f"--run.name={mode}/no-validation",
                "--trainer.max_steps=2",
                "--trainer.limit_val_batches=0",
                "--run.test=true",
            ]
        )
    if mode != "one_process":
        listed += [validate(recipe, mode, folder, MODES[mode]) for recipe in VALIDATED]
    return listed


NO_VALIDATION = "quickstart/gpt_stdlib.yaml"


# Validated again after the matrix, on 2 ranks and then by one process on the same items: their epoch metrics.
VALIDATED = ["quickstart/gpt_stdlib.yaml", "quickstart/text_stdlib.yaml"]


def validate(recipe: str, mode: str, folder: Path, layout: list[str]) -> list[str]:
    """`validate` of the recipe's trained run on its first 16 validation items: 2 batches of 8 in one
    process, 2 batches of 4 on each of 2 ranks (DistributedSampler deals items 0, 2, 4, ... to rank 0
    and 1, 3, 5, ... to rank 1, so the ranks' first 2 batches hold the same 16 items)."""
    batch = "--data.batch_size=4" if layout else "--data.batch_size=8"
    # In float32 both ways (fsdp.yaml's bf16 would differ from one process by precision, not by syncing).
    return [
        "validate",
        *shrunk(recipe, folder),
        *layout,
        f"--run.name={mode}/{run_name(recipe)}",
        "--ckpt_path=last",
        batch,
        "--trainer.precision=32",
    ]


# Every command in turn, in this process; under DDP Lightning starts rank 1 once, running this script again,
# and the next command's ranks are the same two processes. Each exit status is kept (rank 0's in a file).
ONE_AFTER_THE_OTHER = """
import json, os, sys
from in_process import run_main
statuses = [run_main(command) for command in json.loads(open(sys.argv[1]).read())]
if os.environ.get("LOCAL_RANK", "0") == "0":
    open(sys.argv[2], "w").write(json.dumps(statuses))
"""


@pytest.fixture(scope="module")
def data_folder(tmp_path_factory) -> Path:
    """The offline stand-ins for downloads (the stdlib token files are prepared by each mode's first commands)."""
    return write_offline_data(tmp_path_factory.mktemp("matrix"))


@pytest.fixture(scope="module")
def matrix(data_folder) -> dict[str, dict]:
    """{mode: {"statuses": [...], "output": rank 0's stdout and stderr}} for every mode, run lazily."""
    done: dict[str, dict] = {}

    def run(mode: str) -> dict:
        if mode not in done:
            listed = commands(mode, data_folder)
            (data_folder / f"{mode}.json").write_text(json.dumps(listed))
            (data_folder / "one_after_the_other.py").write_text(ONE_AFTER_THE_OTHER)
            environment = {**os.environ, **OFFLINE, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
            try:
                finished = subprocess.run(
                    [sys.executable, "one_after_the_other.py", f"{mode}.json", f"{mode}.statuses.json"],
                    cwd=data_folder,
                    capture_output=True,
                    text=True,
                    timeout=TIMEOUT,
                    env=environment,
                )
                output = finished.stdout + finished.stderr
            except subprocess.TimeoutExpired as expired:
                output = f"timed out after {TIMEOUT} s (a hang?):\n{expired.stderr or ''}"
            statuses_file = data_folder / f"{mode}.statuses.json"
            statuses = json.loads(statuses_file.read_text()) if statuses_file.is_file() else None
            done[mode] = {"statuses": statuses, "output": output if isinstance(output, str) else output.decode()}
        return done[mode]

    return run


@pytest.mark.slow
@pytest.mark.parametrize("recipe", MATRIX)
@pytest.mark.parametrize("mode", list(MODES))
def test_the_recipe_fits_resumes_and_tests_as_it_ships(mode, recipe, matrix, data_folder):
    ran = matrix(mode)
    assert ran["statuses"] is not None, ran["output"][-4000:]
    index = len(PREPARED) + 2 * MATRIX.index(recipe)
    assert ran["statuses"][: len(PREPARED)] == [0] * len(PREPARED), ran["output"][-4000:]
    fit, resumed = ran["statuses"][index : index + 2]
    assert (fit, resumed) == (0, 0), ran["output"][-4000:]
    runs = list((data_folder / "runs" / mode / run_name(recipe)).glob("*/seed_0/version_*"))
    assert len(runs) == 1, runs  # the resume continued the fit's run, in its directory
    record = json.loads((runs[0] / "record.json").read_text())
    assert record["optimizer_steps"] == 4
    assert record["global_batch_size"] == 4 * (1 if mode == "one_process" else 2)  # batch 4 on each rank
    assert [point[1] for point in record["curve"]] == [2, 4]  # a validation at each epoch end (or every 2 steps)
    assert record["test"] and all(value == value for value in record["test"].values())  # scored, no NaN
    assert record["test_checkpoint"] == "best"
    assert (runs[0] / "checkpoints/last.ckpt").is_file()
    assert list(runs[0].glob("events.out.tfevents.*"))  # the default logger (TensorBoard) wrote the run
    # The progress bar was drawn: its description after the last step, once for each resumed fit at least.
    assert ran["output"].count("step 4/4") >= len(MATRIX)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", VALIDATED)
@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_every_epoch_metric_of_two_ranks_is_the_one_process_value(mode, recipe, matrix, data_folder, in_tmp):
    """Each epoch metric TensorBoard shows after a validation on 2 ranks (loss, perplexity, accuracy, F1)
    is synced: it equals what one process computes on the same items and weights."""
    ran = matrix(mode)
    assert ran["statuses"] is not None and ran["statuses"][-len(VALIDATED) :] == [0] * len(VALIDATED), ran["output"][-4000:]
    assert "without `sync_dist=True`" not in ran["output"] and "sync_dist=True)` when logging on epoch" not in ran["output"]
    assert run_main(validate(recipe, mode, data_folder, [])) == 0  # one process, on the CPU
    [run] = (data_folder / "runs" / mode / run_name(recipe)).glob("*/seed_0/version_*")
    ranks, one = last_scalars(run / "evaluations/validate_0"), last_scalars(run / "evaluations/validate_1")
    assert {"val/loss", "val/acc"} <= set(ranks) and set(ranks) == set(one)
    for name in ranks:
        assert ranks[name] == pytest.approx(one[name], rel=1e-4), name


@pytest.mark.slow
def test_compare_runs_each_run_on_two_processes_and_resumes_nothing_done(data_folder):
    """`compare --devices-per-run 2`: each run a DDP run of 2 processes (on CPU, 2 gloo ranks sharing the
    cores), the recipe as it ships but for sizes and steps; the same command again trains nothing."""
    sizes = [word for word in shrunk("quickstart/vit_digits.yaml", data_folder) if not word.startswith("--run.root")]
    sweep = [
        "compare",
        *sizes,
        "--trainer.max_steps=4",
        "--variants",
        "super",
        "--baseline",
        "super",
        "--seeds",
        "1",
        "--test",
        "--devices-per-run",
        "2",
        "--output",
        str(data_folder / "compare"),
    ]
    environment = {**os.environ, **OFFLINE}
    first, again = (
        subprocess.run(
            [sys.executable, "-m", "lit_attention", *sweep],
            cwd=data_folder,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=environment,
        )
        for _ in range(2)
    )
    assert first.returncode == 0, first.stderr[-4000:]
    assert "2 DDP processes each" in first.stdout + first.stderr
    records = [json.loads(p.read_text()) for p in (data_folder / "compare/runs").rglob("record.json")]
    assert len(records) == 1 and all(r["provenance"]["devices"] == ["cpu", "cpu"] and r["test"] for r in records)
    assert again.returncode == 0, again.stderr[-4000:]
    assert not list((data_folder / "compare/runs").rglob("version_1"))  # nothing trained twice


@pytest.mark.slow
def test_fsdp_without_a_best_checkpoint_tests_the_final_weights_from_last(matrix, data_folder):
    ran = matrix("fsdp")
    assert ran["statuses"] is not None and ran["statuses"][-len(VALIDATED) - 1] == 0, ran["output"][-4000:]
    [run] = (data_folder / "runs" / "fsdp" / "no-validation").glob("*/seed_0/version_*")
    record = json.loads((run / "record.json").read_text())
    assert record["test_checkpoint"] == "last" and record["test"]["test/loss"] == record["test"]["test/loss"]
    assert not list(run.glob("checkpoints/best-*.ckpt"))
