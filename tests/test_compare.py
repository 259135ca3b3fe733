"""`lit-attention compare` as a sweep engine: grids, fair tuning, paired statistics, records on disk,
parallel runs and the submitit path. Resuming after a SIGKILL is in test_compare_resume.py."""

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from in_process import run_main, tree  # tests/ is on sys.path under pytest

from lit_attention.compare import build_parser
from lit_attention.sweep.planning import build_plan
from lit_attention.main import main
from lit_attention.reports.report import CSV_FIELDS, write_report
from lit_attention.stats.statistics import clopper_pearson, holm, paired_difference, verdict, with_holm
from lit_attention.sweep.runs import Plan, Run, RunState, check_extra_arguments, parse_grid, parse_variants
from lit_attention.modeling.variants import list_presets

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "lit_attention"]
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
TINY = [
    "--trainer.max_epochs=2",
    "--trainer.limit_train_batches=6",
    "--trainer.limit_val_batches=2",
    "--model.net.dim=32",
    "--model.net.depth=1",
    "--run.checkpoint_every_n_steps=2",
]


def compare(args: list[str], cwd: Path, **popen) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.Popen(
        [*CLI, "compare", *args], cwd=cwd, env=env, text=True, **{"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **popen}
    )


def finish(process: subprocess.Popen, timeout: int = 400) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


# ---------------------------------------------------------------------------------------------- parsing


def test_grid_and_variant_parsing():
    assert parse_grid(["model.init_args.lr=3e-4,1e-3", "--data.init_args.batch_size=32"]) == [
        ("model.init_args.lr", ["3e-4", "1e-3"]),
        ("data.init_args.batch_size", ["32"]),
    ]
    assert parse_variants(["standard,super,value_mix_init=xavier,identity_query,query_scale=standard"]) == [
        "standard",
        "super,value_mix_init=xavier",
        "identity_query,query_scale=standard",
    ]
    assert parse_variants(["all"]) == list_presets()  # the registry's, in its order
    assert parse_variants(["query=residual_mlp,key=identity,value=identity,value_mix=true"]) == [
        "query=residual_mlp,key=identity,value=identity,value_mix=true"
    ]


@pytest.mark.parametrize(
    "grid, extra, message",
    [
        (["model.init_args.lr"], [], "--grid 'model.init_args.lr' is malformed; write KEY=V1,V2,..."),
        (["model.init_args.lr=1e-3,"], [], "is malformed"),
        (["model.init_args.attention=standard,super"], [], "compare sets for every run itself; use --variants"),
        (["seed_everything=1,2"], [], "use --seeds"),
        (["model.lr=1e-3", "model.lr=2e-3"], [], "--grid model.lr is given twice"),
        ([], ["--model.attention", "super"], "The extra argument '--model.attention' sets model.attention"),
        ([], ["--seed_everything=7"], "use --seeds"),
        (["model.init_args.lr=1e-3,2e-3"], ["--model.lr=4e-3"], "which --grid varies"),
    ],
)
def test_what_the_sweep_controls_cannot_be_set_twice(grid, extra, message):
    from lit_attention.errors import ConfigError

    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        check_extra_arguments(extra, parse_grid(grid))


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--grid", "model.init_args.lrr=1e-3"],
            "Option 'lrr' is not accepted by lit_attention.training.tasks.ImageClassifier (in the run of standard at lrr=1e-3).",
        ),
        (["--grid", "model.init_args.net.num_heads=4,5"], "dim=64 is not divisible by num_heads=5"),
        (
            ["--grid", "model.init_args.lr=abc"],
            "--model.lr 'abc' is invalid; it must be a number (in the run of standard at lr=abc).",
        ),
        (["--variants", "standard,supre"], "Unknown attention variant 'supre'"),
        (["--seeds", "0"], "--seeds 0 is invalid; give at least 1."),
        (["--model.attention=super"], "use --variants"),
    ],
)
def test_bad_sweeps_fail_in_one_sentence_before_any_run(args, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["compare", "--config", VIT, "--variants", "standard", "--output", str(tmp_path / "out"), *args])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error
    assert not (tmp_path / "out" / "runs").exists()


@pytest.mark.slow
def test_parameter_matched_control_is_within_one_percent(tmp_path):
    args, extra = build_parser().parse_known_args(
        ["--config", VIT, "--variants", "standard,efficient", "--add-control", "efficient", "--seeds", "1"]
    )
    plan = build_plan(args, ["standard", "efficient"], [], extra)
    assert plan.arms == ["standard", "efficient", "standard~efficient"]
    control = next(r for r in plan.runs if r.arm == "standard~efficient")
    from lit_attention.sweep.planning import plan_run

    counts = {
        name: plan_run(["--config", VIT, f"--model.attention={variant}", *overrides]).model.param_counts
        for name, variant, overrides in (("efficient", "efficient", ()), ("control", "standard", control.overrides))
    }
    assert (
        abs(counts["control"]["non_embedding"] - counts["efficient"]["non_embedding"])
        <= 0.01 * counts["efficient"]["non_embedding"]
    )
    assert counts["control"]["attention"] > counts["efficient"]["attention"]  # the MLP, not attention, gave way


@pytest.mark.slow  # about 0.8 s of CPU: plans and builds models
def test_block_options_are_grid_axes_planned_named_and_built(tmp_path):
    from torch import nn

    from lit_attention.modeling.blocks import SwiGLU
    from lit_attention.sweep.planning import plan_run

    grid = ["model.init_args.net.norm=layernorm,rmsnorm", "model.init_args.net.mlp=gelu,swiglu"]
    args, extra = build_parser().parse_known_args(
        ["--config", VIT, "--variants", "standard", "--seeds", "1", *(f"--grid={item}" for item in grid)]
    )
    plan = build_plan(args, ["standard"], parse_grid(args.grid), extra)
    folders = [run.directory(tmp_path).relative_to(tmp_path).as_posix() for run in plan.runs]
    assert folders == [
        f"runs/norm={norm},mlp={mlp}/standard/seed_0" for norm in ("layernorm", "rmsnorm") for mlp in ("gelu", "swiglu")
    ]
    for (arm, point), config in plan.configs.items():  # each run resolves to its point's values
        assert [config["model.init_args.net.norm"], config["model.init_args.net.mlp"]] == [v for _, v in point]
    run = plan.runs[-1]  # rmsnorm, swiglu: built as its fit will build it
    model = plan_run(run.arguments(args.config, extra)).model.model
    assert isinstance(model.norm, nn.RMSNorm) and isinstance(model.blocks[0].mlp, SwiGLU)


def test_a_block_option_axis_is_tuned_and_paired_like_any_other(tmp_path):
    """norm is a choice, not a number: each arm takes its better norm on validation, the arms are paired
    seed by seed at their own points, and no edge of the axis is flagged (only numeric axes have edges)."""
    layer, rms = (("model.init_args.net.norm", "layernorm"),), (("model.init_args.net.norm", "rmsnorm"),)
    values = {
        ("standard", layer): (0.80, 0.90),
        ("standard", rms): (0.85, 0.70),
        ("efficient", layer): (0.86, 0.88),
        ("efficient", rms): (0.84, 0.95),
    }
    plan = Plan(arms=["standard", "efficient"], points=[layer, rms], seeds=[0, 1, 2])
    states = finished_runs(plan, values)
    text = write_report(plan, states, tmp_path, "compare ...", "standard", None)
    tuned = text.split("## Tuned per arm")[1].split("##")[0]
    assert "| standard | norm=rmsnorm | 0.8510 ± 0.0010 | 0.7010 ± 0.0010 |" in tuned
    assert "| efficient | norm=layernorm | 0.8610 ± 0.0010 | 0.8810 ± 0.0010 |" in tuned
    assert "| efficient | 3 | +0.1800 | [+0.1800, +0.1800] |" in text  # paired, each at its own norm
    assert "No arm's choice sits at an end of the grid." in tuned and "| - |" in tuned
    rows = list(csv.DictReader(open(tmp_path / "results.csv")))
    assert {row["point"] for row in rows} == {"norm=layernorm", "norm=rmsnorm"}


@pytest.mark.slow  # about 1 s of CPU: several models built and counted
def test_parameter_matching_widens_a_swiglu_mlp_and_refuses_a_fixed_width():
    from lit_attention.errors import ConfigError

    args, extra = build_parser().parse_known_args(
        ["--config", VIT, "--variants", "efficient", "--add-control", "efficient", "--seeds", "1", "--model.net.mlp=swiglu"]
    )
    plan = build_plan(args, ["efficient"], [], extra)
    assert plan.arms == ["efficient", "standard~efficient"]  # within 1% of efficient's count, else refused
    args, extra = build_parser().parse_known_args(
        ["--config", VIT, "--variants", "efficient", "--add-control", "efficient", "--seeds", "1", "--model.net.mlp_hidden=64"]
    )
    with pytest.raises(ConfigError, match="its config sets mlp_hidden, so mlp_ratio leaves the MLP width as it is"):
        build_plan(args, ["efficient"], [], extra)


# ---------------------------------------------------------------------------------------------- statistics


def test_paired_statistics_match_a_hand_computed_example():
    # Differences 0.1, 0.2, 0.3: mean 0.2, sd 0.1, se 0.1/sqrt(3); t(0.975, 2) = 4.302653.
    d = paired_difference({0: 0.6, 1: 0.7, 2: 0.8, 9: 5.0}, {0: 0.5, 1: 0.5, 2: 0.5})  # seed 9 has no pair
    half = 4.302653 * 0.1 / math.sqrt(3)
    assert d.n == 3 and d.mean == pytest.approx(0.2)
    assert (d.low, d.high) == (pytest.approx(0.2 - half, abs=1e-6), pytest.approx(0.2 + half, abs=1e-6))
    assert d.p == pytest.approx(0.074180, abs=1e-5)  # two-sided, t = 3.4641 on 2 degrees of freedom
    assert holm([0.01, 0.04, 0.03, math.nan]) == pytest.approx([0.03, 0.06, 0.06, math.nan], nan_ok=True)
    assert verdict(with_holm([d])[0], "max") == "no detectable difference"
    # Simultaneous over 2 comparisons: each at 1 - 0.05/2, t(0.9875, 2) = 0.975 / sqrt(2 * 0.9875 * 0.0125).
    joint, _ = with_holm([d, paired_difference({0: 1.0, 1: 1.0, 2: 1.2}, {0: 0.5, 1: 0.5, 2: 0.5})])
    joint_half = 0.975 / math.sqrt(2 * 0.9875 * 0.0125) * 0.1 / math.sqrt(3)
    assert (joint.joint_low, joint.joint_high) == (
        pytest.approx(0.2 - joint_half, abs=1e-6),
        pytest.approx(0.2 + joint_half, abs=1e-6),
    )
    sure = with_holm([paired_difference({s: 0.9 + s / 100 for s in range(5)}, {s: 0.5 + s / 90 for s in range(5)})])[0]
    assert sure.p_holm < 0.05 and verdict(sure, "max") == "better" and verdict(sure, "min") == "worse"
    assert verdict(paired_difference({0: 1.0}, {0: 0.5}), "max") == "needs 2 or more paired seeds"
    assert clopper_pearson(0, 3) == (0.0, pytest.approx(1 - 0.025 ** (1 / 3)))
    assert clopper_pearson(3, 3) == (pytest.approx(0.025 ** (1 / 3)), 1.0)
    low, high = clopper_pearson(5, 10)
    assert (low, high) == (pytest.approx(0.187086, abs=1e-5), pytest.approx(0.812914, abs=1e-5))


def record(best: float, test: float) -> dict:
    return {
        "monitor": "val/acc",
        "mode": "max",
        "curve": [[0, 10, best]],
        "best": {"epoch": 0, "step": 10, "value": best},
        "final": best,
        "test": {"test/acc": test},
        "params": {"total": 10, "non_embedding": 8, "attention": 4},
        "train_flops": 1e9,
    }


def finished_runs(plan: Plan, values: dict) -> list:
    """A finished run for every (arm, point) of `values` at every seed of `plan`, whose record has the
    given (best validation, test) values plus seed / 1000; the runs are added to the plan."""
    states = []
    for (arm, point), (best, test) in values.items():
        for seed in plan.seeds:
            run = Run(arm, arm, point, seed)
            plan.runs.append(run)
            states.append(RunState(run, record=record(best + seed / 1000, test + seed / 1000)))
    return states


@pytest.mark.slow
def test_tuned_table_chooses_on_validation_and_reports_that_points_test_value(tmp_path):
    """lr=high wins on validation but loses on test: the tuned table must still report high's test value
    (choosing by test would overstate), and compare the arms at their own tuned points."""
    low, high = (("model.init_args.lr", "1e-3"),), (("model.init_args.lr", "3e-3"),)
    values = {
        ("standard", low): (0.80, 0.90),
        ("standard", high): (0.85, 0.70),
        ("super", low): (0.86, 0.88),
        ("super", high): (0.84, 0.95),
    }
    plan = Plan(arms=["standard", "super"], points=[low, high], seeds=[0, 1, 2])
    states = finished_runs(plan, values)
    text = write_report(plan, states, tmp_path, "compare ...", "standard", success_threshold=0.85)
    tuned = text.split("## Tuned per arm")[1].split("##")[0]
    assert "| standard | lr=3e-3 | 0.8510 ± 0.0010 | 0.7010 ± 0.0010 |" in tuned
    assert "| super | lr=1e-3 | 0.8610 ± 0.0010 | 0.8810 ± 0.0010 |" in tuned
    # super at 1e-3 vs standard at 3e-3, seed by seed on test: +0.18 every seed.
    assert "| super | 3 | +0.1800 | [+0.1800, +0.1800] |" in text
    assert "## Runs that reached the threshold" in text and "| super | lr=3e-3 | 0/3 |" in text
    rows = list(csv.DictReader(open(tmp_path / "results.csv")))
    assert len(rows) == 12 and {row["status"] for row in rows} == {"finished"}


@pytest.mark.slow
def test_every_test_metric_of_the_records_reaches_results_csv_and_the_tables(tmp_path):
    """Not only the monitored metric: whatever a task logs on test (a metric a user adds too) gets a column
    of its own after the fixed ones, and a mean ± std in the tables."""
    point = (("model.init_args.lr", "1e-3"),)
    plan = Plan(arms=["standard"], points=[point], seeds=[0, 1])
    states = []
    for seed in plan.seeds:
        plan.runs.append(Run("standard", "standard", point, seed))
        found = record(0.8, 0.9)
        found["test"].update({"test/loss": 0.5 + seed / 10, "test/added_by_a_user": 7.0})
        states.append(RunState(plan.runs[-1], record=found))
    plan.runs.append(Run("standard", "standard", point, 2))  # planned, never finished: empty cells
    text = write_report(plan, [*states, RunState(plan.runs[-1])], tmp_path, "compare ...", "standard", None)
    header, *rows = csv.reader(open(tmp_path / "results.csv"))
    assert header == [*CSV_FIELDS, "test/acc", "test/added_by_a_user", "test/loss"]
    assert [row[len(CSV_FIELDS) :] for row in rows] == [["0.9", "7.0", "0.5"], ["0.9", "7.0", "0.6"], ["", "", ""]]
    assert "| test/acc | test/added_by_a_user | test/loss | params" in text
    assert "| 0.9000 ± 0.0000 | 7.0000 ± 0.0000 | 0.5500 ± 0.0707 |" in text


@pytest.mark.slow
def test_a_sweep_of_the_baseline_alone_says_so_rather_than_that_it_did_not_finish(tmp_path):
    point = (("model.init_args.lr", "1e-3"),)
    plan = Plan(arms=["standard"], points=[point], seeds=[0])
    plan.runs.append(Run("standard", "standard", point, 0))
    text = write_report(plan, [RunState(plan.runs[0], record=record(0.8, 0.9))], tmp_path, "compare ...", "standard", None)
    assert "No comparison: `standard` is the only arm" in text and "no finished run" not in text
    plan.arms.append("super")
    plan.runs.append(Run("super", "super", point, 0))  # planned, never finished
    text = write_report(
        plan,
        [RunState(run, record=record(0.8, 0.9) if run.arm == "standard" else None) for run in plan.runs],
        tmp_path,
        "compare ...",
        "standard",
        None,
    )
    assert "No comparison: no arm other than `standard` has a finished run." in text


# ---------------------------------------------------------------------------------------------- running


@pytest.mark.slow
def test_ctrl_c_ends_the_sweep_and_its_runs_in_a_sentence(tmp_path):
    # A terminal's Ctrl-C reaches processes whose SIGINT is not ignored: the sweep starts with the default
    # disposition whatever this test process inherited (an ignored SIGINT passes to every child).
    process = compare(
        [
            "--config",
            VIT,
            "--variants",
            "standard",
            "--seeds",
            "2",
            "--parallel",
            "2",
            "--output",
            "out",
            *TINY,
            "--trainer.max_epochs=50",
        ],
        tmp_path,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while len(list((tmp_path / "out").glob("runs/**/last.ckpt"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # both runs are training
    sweep = descendants(process.pid)  # the forkserver, the two runs it forked, multiprocessing's resource tracker
    assert len(sweep) >= 4, sweep
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C sends: the whole foreground group
    code, out, err = finish(process, timeout=60)
    assert code == 130 and "the same command resumes the others" in err and "Traceback" not in err, (
        f"exit {code}\nstdout: {out[-1500:]}\nstderr: {err[-1500:]}\nlogs: "
        + " | ".join(log.read_text()[-600:] for log in (tmp_path / "out").glob("runs/**/compare.log"))
    )
    time.sleep(1)
    assert not [pid for pid in sweep if alive(pid)], "processes of the sweep outlived it"


def descendants(pid: int) -> list[int]:
    found = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in map(int, children.read_text().split()):
            found += [child, *descendants(child)]
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead
    except OSError:
        return False


@pytest.mark.slow
def test_a_failed_run_is_reported_and_the_others_finish(in_tmp, capsys):
    # In this process (its runs fork from the forkserver it starts once, which the next test reuses).
    # lr 1e30: the loss turns infinite within a step, and that run stops with exit status 3. Both runs at
    # once, one torch thread each (cores / --parallel on 2 cores): cheaper on shared cores than two threads.
    sweep = [
        "compare",
        "--config",
        VIT,
        "--variants",
        "standard",
        "--seeds",
        "1",
        "--output",
        "out",
        "--grid",
        "model.init_args.lr=1e30,4e-3",
        "--parallel",
        "2",
        *TINY,
    ]
    assert run_main(sweep) == 1, capsys.readouterr().err[-3000:]
    out = capsys.readouterr().out
    assert "FAILED (exit 3)" in out and "The training loss became" in out
    rows = {row["point"]: row for row in csv.DictReader(open(in_tmp / "out" / "results.csv"))}
    assert rows["lr=1e30"]["status"] == "failed" and rows["lr=4e-3"]["status"] == "finished"
    assert "seed 0: The training loss became" in (in_tmp / "out" / "results.md").read_text()
    # The same output with other settings: the finished run is not reported as if this command made it,
    # and nothing the first command wrote changes (the lock file names whichever command holds it).
    before = tree(in_tmp / "out")
    assert run_main([*sweep, "--trainer.max_epochs=3"]) == 2
    assert "holds a run made with other settings than this command's (trainer.max_epochs 2 -> 3)" in capsys.readouterr().err
    after = tree(in_tmp / "out")
    assert after.pop(".compare.lock") and {k: v for k, v in before.items() if k != ".compare.lock"} == after


@pytest.mark.slow
def test_submitit_local_executor_runs_the_same_command(in_tmp, capsys):
    sweep = ["compare", "--config", VIT, "--variants", "standard", "--seeds", "1", "--output", "out", *TINY]
    assert run_main([*sweep, "--launcher", "slurm", "--slurm-cluster", "local"]) == 0, capsys.readouterr().err[-3000:]
    assert "local jobs of 1 node(s) x 1 task(s)" in capsys.readouterr().out
    [row] = csv.DictReader(open(in_tmp / "out" / "results.csv"))
    assert row["status"] == "finished" and float(row["best"]) > 0 and not row["test"]
    assert list((in_tmp / "out" / "slurm").glob("*_submitted.pkl"))  # submitit's own job files
    # Asked again with --test: the finished run is scored on test, not trained again.
    [record_path] = (in_tmp / "out").glob("runs/**/record.json")
    before = json.loads(record_path.read_text())
    assert run_main([*sweep, "--test"]) == 0, capsys.readouterr().err[-3000:]
    after = json.loads(record_path.read_text())
    assert after["test"]["test/acc"] > 0 and after["curve"] == before["curve"]
    assert after["optimizer_steps"] == before["optimizer_steps"]  # nothing trained
