"""`compare --verify K`: which runs are re-trained, the report's re-run check from hand-made records, and
one real re-run of a tiny sweep that must repeat its record bit for bit without touching it."""

import json
from pathlib import Path

import pytest
from in_process import run_main, tree  # tests/ is on sys.path under pytest

from lit_attention.errors import ConfigError
from lit_attention.main import main
from lit_attention.sweep.runs import Plan, Run, RunState
from lit_attention.reports.verification import verification_section
from lit_attention.sweep.verify import choose_runs

ROOT = Path(__file__).resolve().parents[1]
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
TINY = [
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=4",
    "--trainer.limit_val_batches=2",
    "--trainer.limit_test_batches=2",
    "--model.net.dim=16",
    "--model.net.depth=1",
    "--model.net.num_heads=2",
]


def states_of(runs: list[Run], finished) -> list[RunState]:
    return [RunState(run, record={"best": {"value": 0.5}} if finished(run) else None) for run in runs]


def test_choose_runs_is_deterministic_and_refuses_more_than_are_finished():
    runs = [
        Run(arm, arm, (("model.init_args.lr", lr),), seed)
        for arm in ("standard", "super")
        for lr in ("1e-3", "3e-3")
        for seed in range(3)
    ]
    states = states_of(runs, lambda run: run.seed != 2)  # 8 finished, 4 not
    chosen = choose_runs(states, 3)
    assert len(chosen) == 3 and all(run.seed != 2 for run in chosen)
    assert choose_runs(list(reversed(states)), 3) == chosen  # the order they are listed in does not matter
    assert choose_runs(states, 0) == [] and sorted(choose_runs(states, 8), key=runs.index) == [r for r in runs if r.seed != 2]
    for k in (9, -1):
        with pytest.raises(ConfigError) as error:
            choose_runs(states, k)
        assert str(error.value) == f"--verify {k} is invalid: 8 run(s) of this sweep are finished; give a number from 0 to 8."


def write(directory: Path, record: dict) -> None:
    (directory / "version_0").mkdir(parents=True)
    (directory / "version_0" / "record.json").write_text(json.dumps(record))


def record(best: float, test: float | None, curve: list, **provenance) -> dict:
    return {
        "monitor": "val/acc",
        "mode": "max",
        "curve": curve,
        "best": {"epoch": 0, "step": 4, "value": best},
        "test": {"test/acc": test} if test is not None else None,
        "provenance": provenance,
    }


def test_verification_section_sets_each_re_run_beside_its_record(tmp_path):
    runs = [Run("standard", "standard", (), 0), Run("super", "super", (), 0), Run("super", "super", (), 1)]
    plan = Plan(runs=runs, arms=["standard", "super"], points=[()], seeds=[0, 1])
    here = {"python": "3.12.3", "torch": "2.5.1", "threads": 2}
    states = [
        RunState(runs[0], record=record(0.80, 0.75, [[0, 4, 0.8]], **here)),
        RunState(runs[1], record=record(0.60, 0.55, [[0, 4, 0.6]], **here)),
        RunState(runs[2], record=record(0.70, None, [[0, 4, 0.7]], **here)),
    ]
    assert verification_section(plan, states, tmp_path, 0.005) == ""  # nothing re-run: the report is as before
    write(runs[0].directory(tmp_path / "verify"), record(0.81, 0.75, [[0, 4, 0.81]], **here, cpu="Zen 2"))
    write(runs[1].directory(tmp_path / "verify"), record(0.60, 0.55, [[0, 4, 0.6]], **here, cpu="Zen 2"))
    text = verification_section(plan, states, tmp_path, 0.005)
    assert text.startswith("## Re-run check\n\n2 finished run(s) trained again in `verify/`")
    assert (
        "| arm | grid point | seed | recorded best val/acc | re-run | difference | recorded test/acc | re-run | "
        "difference | curve bit-identical |"
    ) in text
    assert "| standard | default | 0 | 0.8 | 0.81 | 0.01 | 0.75 | 0.75 | 0 | no (1 of 1 points differ) |" in text
    assert "| super | default | 0 | 0.6 | 0.6 | 0 | 0.55 | 0.55 | 0 | yes |" in text
    assert "| default | 1 |" not in text  # seed 1 of super was not re-run
    assert (
        "Largest difference between a re-run and its record: 0.01, larger than the smallest effect the "
        'comparison table claims (0.005, the smallest "better" or "worse")'
    ) in text
    assert "| cpu | not recorded | Zen 2 |" in text and "| threads | 2 | 2 |" in text
    assert (
        "The re-runs ran where their records did, as far as both record it (commit, dirty, diff_sha256, "
        "torch_build, cpu, devices: not recorded by every run)."
    ) in text
    assert "below the smallest effect" in verification_section(plan, states, tmp_path, 0.02)
    assert "the comparison table claims no difference" in verification_section(plan, states, tmp_path, None)
    write(runs[2].directory(tmp_path / "verify"), record(0.70, None, [[0, 4, 0.7]], **{**here, "torch": "2.6.0"}))
    text = verification_section(plan, states, tmp_path, 0.005)
    assert "| super | default | 1 | 0.7 | 0.7 | 0 | n/a | n/a | n/a | yes |" in text  # no test value on either side
    assert "| torch | 2.5.1 | 2.5.1, 2.6.0 |" in text and "they differ in torch" in text


def test_a_clean_tree_has_no_diff_hash_and_that_is_not_called_a_gap(tmp_path):
    run = Run("standard", "standard", (), 0)
    plan = Plan(runs=[run], arms=["standard"], points=[()], seeds=[0])
    clean = {"commit": "abc", "dirty": False, "diff_sha256": None}
    write(run.directory(tmp_path / "verify"), record(0.8, 0.75, [[0, 4, 0.8]], **clean))
    text = verification_section(plan, [RunState(run, record=record(0.8, 0.75, [[0, 4, 0.8]], **clean))], tmp_path, None)
    assert "| diff_sha256 | none (no uncommitted changes) | none (no uncommitted changes) |" in text
    assert "diff_sha256" not in text.split("\n")[-2]  # the sentence under the table names no field as unrecorded


def test_verify_asks_for_no_more_runs_than_are_finished_before_anything_trains(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out" / "runs").mkdir(parents=True)  # a sweep none of whose runs has finished
    with pytest.raises(SystemExit) as exit_:
        main(
            ["compare", "--config", VIT, "--variants", "standard", "--seeds", "1", "--output", "out", "--report", "--verify", "1"]
        )
    assert exit_.value.code == 2
    assert (
        "--verify 1 asks for more runs than the 0 finished (of the 1 this sweep plans); give at most 0."
        in capsys.readouterr().err
    )
    assert not (tmp_path / "out" / "verify").exists()


@pytest.mark.slow
def test_verify_re_trains_a_run_bit_for_bit_and_leaves_the_sweep_untouched(in_tmp):
    # In this process: both commands fork their runs from one forkserver, which imports torch once.
    # --parallel 2: one torch thread (cores / --parallel on 2 cores), which a tiny run on shared cores
    # spends less CPU on than two that wait on each other.
    sweep = [
        "compare",
        "--config",
        VIT,
        "--variants",
        "standard",
        "--seeds",
        "1",
        "--test",
        "--output",
        "out",
        "--parallel",
        "2",
        *TINY,
    ]
    assert run_main(sweep) == 0
    before = tree(in_tmp / "out" / "runs")
    assert run_main([*sweep, "--report", "--verify", "1"]) == 0
    assert tree(in_tmp / "out" / "runs") == before  # the records checked are not rewritten
    [rerun] = (in_tmp / "out" / "verify").glob("runs/**/record.json")
    report = (in_tmp / "out" / "results.md").read_text()
    section = report.split("## Re-run check")[1].split("\n## ")[0]
    # Same machine, same thread count (the launcher gives each run cores / --parallel): the same floats.
    [row] = [line for line in section.splitlines() if line.startswith("| standard | default | 0 |")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[3] == cells[4] and cells[6] == cells[7] and cells[6] != "n/a", row  # best, then test/acc
    assert (cells[5], cells[8], cells[9]) == ("0", "0", "yes"), row
    assert "Largest difference between a re-run and its record: 0;" in section  # one arm: no comparison beside it
    provenance = {
        cells[0]: cells[1:]
        for line in section.splitlines()
        if line.startswith("| ")
        for cells in [[cell.strip() for cell in line.strip("|").split("|")]]
    }
    for field in ("python", "torch", "threads"):  # (the commit may move: other work goes on in this tree)
        assert provenance[field][0] == provenance[field][1], (field, provenance[field])
    assert json.loads(rerun.read_text())["test"]["test/acc"] is not None  # re-run with --test, as the sweep ran it
