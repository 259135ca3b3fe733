"""SIGTERM, what a scheduler sends before a preemption or at a time limit, sent by this test to real
`lit-attention fit` and `predict` processes: each stops with exit status 143, says what it kept and the
command that goes on, keeps its work (last.ckpt, the predictions so far), and the fit resumed with
`--ckpt_path last` ends exactly where an uninterrupted run ends."""

import signal
import time
from pathlib import Path

import lightning as L
import pytest

from lit_attention.training.preemption import SIGTERM_STATUS, resume_command
from lit_attention.training.records import TIMING_FIELDS, read_record
from test_reliability import (  # noqa: F401  (lm_data_dir is a fixture)
    assert_same_tensors,
    gpt_args,
    lm_data_dir,
    load,
    run_dirs,
    run_here,
    scalars,
    start,
)


class WaitForSigterm(L.Callback):
    """At optimizer step `step` (fit) or after predict batch `step`, announce it in the file `marker`
    and wait until Lightning's handler has seen the SIGTERM the test sends, so that the signal lands at
    a known point."""

    def __init__(self, step: int, marker: str) -> None:
        self.step, self.marker = step, marker

    def wait(self, trainer) -> None:
        Path(self.marker).touch()
        deadline = time.monotonic() + 120
        while not trainer.received_sigterm and time.monotonic() < deadline:
            time.sleep(0.02)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            self.wait(trainer)

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        if batch_idx == self.step:
            self.wait(trainer)


def terminate_when_waiting(process, marker: Path, log: Path) -> tuple[int, str]:
    """Send SIGTERM once the process announces it waits; (exit status, stderr)."""
    deadline = time.monotonic() + 240
    while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), log.read_text()[-3000:]
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=240), log.read_text()


def waiting(step: int, marker: Path) -> list[str]:
    return [
        "--trainer.callbacks+=test_preemption.WaitForSigterm",
        f"--trainer.callbacks.step={step}",
        f"--trainer.callbacks.marker={marker}",
    ]


PROMPTS = 40  # lines to predict on, 4 per batch: the signal comes after the third batch


@pytest.fixture(scope="module")
def preempted(tmp_path_factory, lm_data_dir):  # noqa: F811  (the fixture imported above)
    """A step-based GPT fit sent SIGTERM at step 6 (no checkpoint is due there: only validations and
    epoch ends write one), an uninterrupted fit of the same run, and a predict sent SIGTERM after its
    third batch."""
    root = tmp_path_factory.mktemp("preempted")
    args = ["fit", *gpt_args(lm_data_dir), "--run.checkpoint_every_n_steps=null"]
    fit = start([*args, "--run.root=b", *waiting(6, root / "fit.waiting")], root, "fit")
    status, stderr = run_here([*args, "--run.root=a"], root)
    assert status == 0, stderr[-3000:]
    prompts = root / "prompts.txt"
    prompts.write_text("".join(f"def f{i}(x):\n" for i in range(PROMPTS)))
    predict = start(
        [
            "predict",
            *gpt_args(lm_data_dir),
            "--run.root=a",
            "--ckpt_path=last",
            "--data.batch_size=4",
            f"--data.predict_files={prompts}",
            "--model.max_new_tokens=4",
            *waiting(2, root / "predict.waiting"),
        ],
        root,
        "predict",
    )
    results = {
        "fit": terminate_when_waiting(fit, root / "fit.waiting", root / "fit.stderr"),
        "predict": terminate_when_waiting(predict, root / "predict.waiting", root / "predict.stderr"),
    }
    return root, args, results


@pytest.mark.slow
def test_sigterm_stops_fit_with_status_143_keeping_the_step_and_the_resume_ends_as_an_uninterrupted_run(preempted):
    root, args, results = preempted
    status, stderr = results["fit"]
    assert status == SIGTERM_STATUS, stderr[-3000:]
    [run_b] = run_dirs(root / "b")
    last = run_b / "checkpoints/last.ckpt"
    assert load(last)["global_step"] == 6  # written on the signal: the last save before it was step 5's
    assert not (run_b / "record.json").exists()  # not done, and nothing says it is
    assert not list((run_b / "checkpoints").glob(".*.tmp"))
    again = resume_command([*args, "--run.root=b", *waiting(6, root / "fit.waiting")])
    assert again.endswith("--ckpt_path last")
    assert f"fit stopped on SIGTERM at step 6; {last.relative_to(root)} holds step 6; resume the run with `{again}`." in stderr
    assert "Traceback" not in stderr

    status, stderr = run_here([*args, "--run.root=b", "--ckpt_path=last"], root)
    assert status == 0, stderr[-3000:]
    assert run_dirs(root / "b") == [run_b]
    [run_a] = run_dirs(root / "a")
    final_a, final_b = load(run_a / "checkpoints/last.ckpt"), load(last)
    assert final_a["global_step"] == final_b["global_step"] == 12
    for part in ("state_dict", "optimizer_states", "lr_schedulers"):
        assert_same_tensors(final_a[part], final_b[part], part)
    curves_a, curves_b = scalars(run_a), scalars(run_b)
    for tag in ("val/loss", "train/loss_step", "train/lr"):
        assert curves_a[tag] == curves_b[tag], tag
    records = [read_record(run / "record.json") for run in (run_a, run_b)]
    for record in records:
        for key in (*TIMING_FIELDS, "run_dir", "provenance"):
            record.pop(key)
    assert records[0] == records[1]


@pytest.mark.slow
def test_sigterm_stops_predict_after_the_batch_in_progress_keeping_the_predictions_written(preempted):
    root, _, results = preempted
    status, stderr = results["predict"]
    assert status == SIGTERM_STATUS, stderr[-3000:]
    [predictions] = root.glob("a/**/evaluations/predict_*/predictions.jsonl")
    rows = predictions.read_text().splitlines()
    assert len(rows) == 12 < PROMPTS  # the three batches before the signal, nothing after
    assert (
        f"predict stopped on SIGTERM after 12 input(s); the predictions file {predictions} keeps theirs; "
        "run the same command again to predict every input."
    ) in stderr
    assert "Traceback" not in stderr


def test_the_resume_command_replaces_the_checkpoint_given_by_last():
    assert (
        resume_command(["fit", "--config", "a b.yaml", "--ckpt_path", "x.ckpt", "--ckpt_path=y"])
        == "lit-attention fit --config 'a b.yaml' --ckpt_path last"
    )
