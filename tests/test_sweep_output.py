"""compare's --output: it writes only into a directory of its own, one command at a time (a flock on
`.compare.lock`), and its reports are replaced whole (a temporary file and a rename) or refused in one
sentence. Two real commands at once and a SIGKILLed sweep's lock are in test_compare_resume.py."""

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from in_process import run_main, tree  # tests/ is on sys.path under pytest

from lit_attention.errors import ConfigError
from lit_attention.sweep.report_files import REPORT_FILES
from lit_attention.sweep.output_dir import LOCK, OutputLock, check_output
from lit_attention.reports.report import write_report
from lit_attention.sweep.runs import Plan, Run, RunState

ROOT = Path(__file__).resolve().parents[1]
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
TINY = [
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=2",
    "--trainer.limit_val_batches=1",
    "--model.net.dim=16",
    "--model.net.depth=1",
    "--model.net.num_heads=2",
]
REPORT = ["compare", "--config", VIT, "--variants", "standard", "--seeds", "1", "--output", "out", "--report"]
TRAIN = ["compare", "--config", VIT, "--variants", "standard", "--seeds", "1", "--output", "out", *TINY]


def compare_output(folder: Path) -> Path:
    """A sweep's output as compare leaves it before any run has finished: its runs folder."""
    (folder / "runs").mkdir(parents=True)
    return folder


# ---------------------------------------------------------------------------------------------- whose directory


def test_a_directory_of_the_users_files_is_refused_and_left_as_it_was(in_tmp, capsys):
    (in_tmp / "out").mkdir()
    (in_tmp / "out" / "results.md").write_text("# My own notes\n")
    (in_tmp / "out" / "data.csv").write_bytes(b"x,y\n1,2\n")
    before = tree(in_tmp / "out")
    for command in (REPORT, TRAIN):
        assert run_main(command) == 2
        error = capsys.readouterr().err
        assert (
            "--output 'out' holds files that are not a compare sweep's (data.csv); compare writes only into a new "
            "or empty directory or one of its own sweeps, so choose another --output."
        ) in error, error
        assert tree(in_tmp / "out") == before
    assert sorted(os.listdir(in_tmp / "out")) == ["data.csv", "results.md"]  # not even a lock file


def test_report_on_a_missing_or_empty_output_says_there_is_nothing_to_report(in_tmp, capsys):
    assert run_main(REPORT) == 2
    assert (
        "--output 'out' does not exist, so --report has nothing to report; run the same command without --report "
        "to train the sweep."
    ) in capsys.readouterr().err
    assert not (in_tmp / "out").exists()
    (in_tmp / "out").mkdir()
    assert run_main(REPORT) == 2
    assert "--output 'out' holds no runs, so --report has nothing to report" in capsys.readouterr().err
    assert os.listdir(in_tmp / "out") == []


def test_a_sweep_from_before_the_lock_file_is_compares_and_nothing_else_is(tmp_path):
    old = compare_output(tmp_path / "old")
    for name in ("results.md", "results.csv", "timings.csv", "results.png", ".results.csv.123.tmp"):
        (old / name).write_text("")
    check_output(old, report_only=True)
    (old / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"holds files that are not a compare sweep's \(notes.txt\)"):
        check_output(old, report_only=False)
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "results.md").write_text("mine")  # a report's name, but no sweep beside it
    with pytest.raises(ConfigError, match=r"not a compare sweep's \(results.md\)"):
        check_output(tmp_path / "only", report_only=False)
    (old / LOCK).write_text("")  # the lock file marks the directory as compare's, whatever else it holds
    check_output(old, report_only=False)


# ---------------------------------------------------------------------------------------------- one command at a time


def test_a_second_command_into_a_locked_output_is_refused_naming_the_holder_or_waits(in_tmp, capsys):
    output = compare_output(in_tmp / "out")
    holder = OutputLock(output, "lit-attention compare --the-first-one").acquire()  # another open file: a real flock
    before = tree(output)
    assert run_main(REPORT) == 2
    error = capsys.readouterr().err
    assert (
        f"--output 'out' is in use by process {os.getpid()} (lit-attention compare --the-first-one) on "
        f"{socket.gethostname()}; wait for it to end, or pass --wait-for-lock to start when it does."
    ) in error, error
    assert tree(output) == before
    releaser = threading.Timer(1.0, holder.release)
    releaser.start()
    assert run_main([*REPORT, "--wait-for-lock"]) == 0
    releaser.join()
    assert "waiting for it to end (--wait-for-lock)" in capsys.readouterr().err
    assert "No run has finished yet." in (output / "results.md").read_text()
    OutputLock(output, "the next one").acquire().release()  # the command let go of it as it ended


def waiting_for(lock: Path) -> bool:
    """Whether some process waits for the flock on `lock` (Linux lists a waiter as `N: -> FLOCK ...`)."""
    inode = str(os.stat(lock).st_ino)
    return any(
        words[1] == "->" and words[6].rsplit(":", 1)[-1] == inode
        for words in (line.split() for line in Path("/proc/locks").read_text().splitlines())
        if len(words) > 6
    )


def test_ctrl_c_while_waiting_for_the_lock_is_one_sentence(in_tmp, capsys):
    output = compare_output(in_tmp / "out")
    holder = OutputLock(output, "the first").acquire()
    # What a terminal's Ctrl-C meets in a Python program. A test run started in the background (`cmd &`
    # in a script) inherits an ignored SIGINT: the signal below would be lost and the command wait forever.
    # The conftest puts the handler back after the test.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import lit_attention.main  # noqa: F401  # before the deadline below: a first import takes long on busy cores

    def interrupt_once_waiting() -> None:  # Ctrl-C reaches the main thread, which waits in flock()
        deadline = time.monotonic() + 300  # a busy 2-core machine took over a minute to reach the flock
        while not waiting_for(output / LOCK) and time.monotonic() < deadline:
            time.sleep(0.05)
        if time.monotonic() < deadline:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        else:
            holder.release()  # never waited: let the command end, and the assertions below say so

    interrupter = threading.Thread(target=interrupt_once_waiting)
    interrupter.start()
    try:
        status = run_main([*REPORT, "--wait-for-lock"])
    finally:
        interrupter.join()
        holder.release()
    error = capsys.readouterr().err
    assert status == 130 and "compare: interrupted while waiting for process" in error and "Traceback" not in error, error
    assert not (output / "results.md").exists()


# ---------------------------------------------------------------------------------------------- reports


def finished_states(best: float) -> tuple[Plan, list[RunState]]:
    """One seed of `standard` at `best` and of `super` at 0.6: a comparison whose difference changes with `best`."""
    plan = Plan(arms=["standard", "super"], points=[()], seeds=[0])
    states = []
    for arm, value in (("standard", best), ("super", 0.6)):
        plan.runs.append(Run(arm, arm, (), 0))
        record = {
            "monitor": "val/acc",
            "mode": "max",
            "curve": [[0, 10, value]],
            "best": {"epoch": 0, "step": 10, "value": value},
            "final": value,
            "test": {"test/acc": value},
            "params": {"total": 10, "non_embedding": 8, "attention": 4},
            "train_seconds": 100 * value,
        }
        states.append(RunState(plan.runs[-1], record=record))
    return plan, states


@pytest.mark.slow
def test_reports_are_replaced_whole_never_rewritten_in_place(tmp_path):
    """A second link to each old file keeps the old bytes: the new ones went to another file, renamed over
    the name (a write in place would have changed both, and a kill during it truncated both)."""
    write_report(*finished_states(0.5), tmp_path, "compare ...", "standard", None)
    for name in REPORT_FILES:
        os.link(tmp_path / name, tmp_path / f"old-{name}")
    old = tree(tmp_path)
    write_report(*finished_states(0.75), tmp_path, "compare ...", "standard", None)
    new = tree(tmp_path)
    for name in REPORT_FILES:
        assert new[f"old-{name}"] == old[name] and new[name] != old[name], name
        assert os.stat(tmp_path / name).st_ino != os.stat(tmp_path / f"old-{name}").st_ino
    assert "0.7500" in new["results.md"].decode()
    assert sorted(new) == sorted(old)  # no temporary file left behind


def immutable(path: Path, on: bool) -> None:
    """Make `path` unwritable even for root (chattr +i); as another user, chmod is enough."""
    if os.geteuid() != 0:
        os.chmod(path, 0o555 if on else 0o755)
        return
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i" if on else "-i", str(path)]).returncode:
        pytest.skip("this file system cannot make a file unwritable for root (chattr +i)")


@pytest.mark.slow
def test_a_report_that_cannot_be_written_is_one_sentence_and_changes_nothing(in_tmp, capsys):
    output = compare_output(in_tmp / "out")
    (output / "results.md").mkdir()  # a directory where the report goes: no one can write it
    assert run_main(REPORT) == 2
    error = capsys.readouterr().err
    assert "Cannot write the report 'out/results.md' (a directory); make it writable (or remove it)" in error, error
    assert "Traceback" not in error
    (output / "results.md").rmdir()
    write_report(*finished_states(0.5), output, "compare ...", "standard", None)
    before = tree(output)
    immutable(output / "results.csv", True)
    try:
        assert run_main(REPORT) == 2  # refused before planning, and before any run would train
        error = capsys.readouterr().err
        assert "Cannot write the report 'out/results.csv' (read-only); make it writable" in error, error
    finally:
        immutable(output / "results.csv", False)
    immutable(output, True)
    try:
        with pytest.raises(
            ConfigError,
            match=r"Cannot write the report '.*/results.csv' \(PermissionError: "
            r"(Operation not permitted|Permission denied)\); make it and its folder",
        ):
            write_report(*finished_states(0.75), output, "compare ...", "standard", None)
        assert run_main(REPORT) == 2
        assert "Cannot write runs into 'out'" in capsys.readouterr().err
    finally:
        immutable(output, False)
    assert tree(output) == before


def an_output(folder: Path, kind: str) -> Path:
    """A compare output as `kind` leaves it on disk: its report, and its runs/ and lock file naming its
    command (a sweep), runs/, sizes/ and its lock (a --scale sweep; one stopped before its first report has
    no sizes/ yet: "stopped scale") or size_trend.png alone (a --trend report, which takes no lock)."""
    folder.mkdir()
    (folder / "results.md").write_text(f"# the {kind}'s report\n")
    if kind in ("sweep", "scale", "stopped scale"):
        words = "--scale dim=16,32" if "scale" in kind else "--variants standard"
        (folder / LOCK).write_text(f"process 7 (lit-attention compare --config {VIT} {words}) on host\n")
        (folder / "runs").mkdir()
    if kind == "scale":
        (folder / "sizes").mkdir()
    if kind == "trend":
        (folder / "size_trend.png").write_bytes(b"png")
    return folder


@pytest.mark.slow  # the first in a process imports compare's modules (seconds)
@pytest.mark.parametrize(
    "kind, command",
    [
        ("scale", ["--variants", "standard", "--report"]),  # a report without --scale over a --scale sweep
        ("scale", ["--variants", "standard"]),  # the same, training
        ("trend", ["--variants", "standard"]),  # a sweep into a trend's folder
        ("sweep", ["--variants", "standard", "--scale", "dim=16,32"]),  # a --scale sweep into a plain sweep's
        ("stopped scale", ["--variants", "standard"]),  # a sweep over a --scale sweep not yet reported
    ],
    ids=["report over scale", "sweep over scale", "sweep over trend", "scale over sweep", "sweep over stopped scale"],
)
def test_a_command_of_another_kind_is_refused_naming_the_outputs_owner_and_changes_nothing(kind, command, in_tmp, capsys):
    output = an_output(in_tmp / "out", kind)
    before = tree(output)
    assert run_main(["compare", "--config", VIT, *command, "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert f"--output {str(output)!r} holds a" in err
    if kind != "trend":  # a trend takes no lock, so nothing names its command
        assert f"(`lit-attention compare --config {VIT} " in err
    assert tree(output) == before and sorted(p.name for p in in_tmp.iterdir()) == ["out"]


def test_a_stopped_scale_sweep_is_its_own_kind_to_the_command_that_resumes_it(in_tmp):
    from lit_attention.sweep.output_dir import check_owner, output_kind

    output = an_output(in_tmp / "out", "stopped scale")  # no sizes/ yet
    assert output_kind(output) == "scale"
    check_owner(output, "scale")  # the same --scale command resumes it


def test_a_trend_never_writes_into_one_of_its_inputs_nor_into_a_sweep(in_tmp, capsys):
    a, b = an_output(in_tmp / "a", "sweep"), an_output(in_tmp / "b", "sweep")
    before = tree(in_tmp)
    assert run_main(["compare", "--trend", str(a), str(b), "--output", str(b)]) == 2
    assert "is one of the sweeps --trend reads" in capsys.readouterr().err
    assert tree(in_tmp) == before
    c = an_output(in_tmp / "c", "sweep")
    before = tree(in_tmp)
    assert run_main(["compare", "--trend", str(a), str(b), "--output", str(c)]) == 2
    assert "holds a sweep" in capsys.readouterr().err
    assert tree(in_tmp) == before
