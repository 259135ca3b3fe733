"""A compare sweep SIGKILLed in the middle of a run resumes to the results of a sweep never interrupted,
and its output's lock refuses or keeps waiting a second command meanwhile. Apart from test_compare.py:
the longest test of the suite, which xdist's --dist loadfile can then run beside the rest of it."""

import csv
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from in_process import run_main, tree  # tests/ is on sys.path under pytest
from test_compare import TINY, VIT, alive, compare, descendants


def results_csv(output: Path) -> bytes:
    return (output / "results.csv").read_bytes()


def unfinished_checkpoint(output: Path) -> bool:
    """Some run has a last.ckpt but no record yet: it is mid-training."""
    return any(not (ckpt.parent.parent / "record.json").exists() for ckpt in output.glob("runs/**/last.ckpt"))


@pytest.mark.slow
def test_sigkilled_sweep_resumes_to_the_same_results_csv(in_tmp, capsys):
    """A sweep SIGKILLed in the middle of its run and run again writes that run's row as a sweep that was
    never interrupted writes it. The uninterrupted one, two arms x two seeds, shows the pairing and the
    report; while it runs, a second command into its output is refused and a third waits for it (its lock)."""
    tiny = ["--config", VIT, "--seeds", "2", "--test", "--parallel", "2", *TINY]  # 2 at a time: 1 thread per run
    sweep = [*tiny, "--variants", "standard,efficient", "--output", "clean"]
    one_run = [*tiny, "--variants", "standard", "--seeds", "1", "--output", "killed"]  # the cheapest to kill and resume
    with open(in_tmp / "clean.out", "w") as out, open(in_tmp / "clean.err", "w") as err:  # no pipe to fill meanwhile
        clean = compare([*sweep, "--inspect"], in_tmp, stdout=out, stderr=err)  # --inspect: results.csv is the same
    killed = compare(one_run, in_tmp)
    deadline = time.monotonic() + 300
    while not unfinished_checkpoint(in_tmp / "killed") and time.monotonic() < deadline:
        time.sleep(0.05)
    processes = descendants(killed.pid)
    os.kill(killed.pid, signal.SIGKILL)  # it can clean up nothing: its fits die with it all the same
    killed.wait()
    assert unfinished_checkpoint(in_tmp / "killed"), "the kill came too late to interrupt a run"
    time.sleep(1)
    assert processes and not [pid for pid in processes if alive(pid)], "processes of the SIGKILLed sweep outlived it"

    # While the clean sweep runs, a second command into its output is refused, naming it.
    assert clean.poll() is None, "the clean sweep ended before the killed one was interrupted"
    assert run_main(["compare", *sweep]) == 2
    assert f"--output 'clean' is in use by process {clean.pid} (lit-attention compare " in capsys.readouterr().err
    # The SIGKILLed sweep's lock went with it: the same command resumes its run (in this process).
    assert run_main(["compare", *one_run]) == 0, capsys.readouterr().err[-3000:]
    assert "0 finished earlier, 1 to run" in capsys.readouterr().out
    # With --wait-for-lock a command waits for the clean sweep instead, then finds every run finished.
    watchdog = threading.Timer(400, clean.kill)  # a hung sweep would keep the lock, and this wait, for ever
    watchdog.start()
    assert run_main(["compare", *sweep, "--wait-for-lock"]) == 0, capsys.readouterr().err[-3000:]
    watchdog.cancel()
    assert "4 finished earlier, 0 to run" in capsys.readouterr().out
    assert clean.wait(timeout=60) == 0, (in_tmp / "clean.err").read_text()[-3000:]
    out = (in_tmp / "clean.out").read_text()
    assert "efficient | 4 |" not in out and "| efficient | 2 |" in out  # paired over the 2 seeds
    assert not list(in_tmp.glob("clean/runs/**/version_1")), "a run was trained twice"

    clean_rows = results_csv(in_tmp / "clean").splitlines(keepends=True)
    header, resumed_row = results_csv(in_tmp / "killed").splitlines(keepends=True)
    assert header == clean_rows[0] and resumed_row.startswith(b"standard,standard,default,0,finished,")
    assert resumed_row in clean_rows[1:]  # every column: best, test, steps, first batch, ...
    # Its per-example outcomes too: the best validation's travelled with its checkpoint.
    [resumed] = (in_tmp / "killed").glob("runs/**/record.json")
    [uninterrupted] = (in_tmp / "clean").glob("runs/default/standard/seed_0/**/record.json")
    assert json.loads(resumed.read_text())["per_example"] == json.loads(uninterrupted.read_text())["per_example"]
    report = (in_tmp / "clean" / "results.md").read_text()
    assert report.count("± ") >= 6 and "## Against `standard`: differences in test/acc" in report
    assert (in_tmp / "clean" / "results.png").stat().st_size > 10_000
    # --inspect: each arm's tuned run inspected beside the tables, nothing written into the runs' folders.
    assert "## What each arm learned" in report and "efficient" in (in_tmp / "clean/inspect/compare.md").read_text()
    assert (in_tmp / "clean/inspect/standard/inspect.md").is_file() and not list(in_tmp.glob("clean/runs/**/inspect"))
    rows = list(csv.DictReader(open(in_tmp / "clean" / "results.csv")))
    assert int(rows[0]["params_attention"]) != int(rows[-1]["params_attention"])  # efficient keeps fewer
    assert [row["status"] for row in rows] == ["finished"] * 4 and all(row["test"] for row in rows)
    # Same seed, same batches in both arms; another seed, other batches.
    first = {(row["arm"], row["seed"]): row["first_batch_sha256"] for row in rows}
    assert first[("standard", "0")] == first[("efficient", "0")] != first[("standard", "1")]

    # --report rebuilds the same tables from the records alone, and changes nothing the sweep wrote.
    runs = tree(in_tmp / "clean" / "runs")
    kept = results_csv(in_tmp / "clean")
    (in_tmp / "clean" / "results.csv").unlink()
    assert run_main(["compare", *sweep, "--report"]) == 0
    assert results_csv(in_tmp / "clean") == kept and tree(in_tmp / "clean" / "runs") == runs
