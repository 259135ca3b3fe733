"""`compare --scale`: sizes, their folders and budgets, the refusals, and the scaling report built from
records (synthetic here, and once from a tiny real sweep)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lit_attention.errors import ConfigError
from lit_attention.main import main
from lit_attention.compare import build_parser
from lit_attention.scaling.sizes import plan_sizes
from lit_attention.sweep.planning import check_run
from lit_attention.sweep.runs import Plan, Run, RunState
from lit_attention.scaling.report import write_scaled_report
from lit_attention.scaling.sizes import Size, check_scale, parse_scale
from tests.in_process import run_main

ROOT = Path(__file__).resolve().parents[1]
VIT = str(ROOT / "recipes/quickstart/vit_digits.yaml")
GPT = str(ROOT / "recipes/quickstart/gpt_stdlib.yaml")
DIM, HEADS = "model.init_args.net.dim", "model.init_args.net.num_heads"
# Validation every 5 steps (each one a best checkpoint and an outcomes file to write): each run still ends
# on a validation of its final weights (FinalValidation).
TINY_GPT = [
    "--config",
    GPT,
    "--trainer.val_check_interval=5",
    "--data.max_files=60",
    "--data.val_fraction=0.2",
    "--data.val_windows=4",
    "--data.max_len=16",
    "--data.batch_size=4",
    "--model.net.depth=1",
    "--trainer.log_every_n_steps=1",
]


def test_repeated_scale_options_change_their_keys_together():
    sizes = parse_scale([f"{DIM}=16,32,64", f"--{HEADS}=2,2,4"])
    assert [s.label for s in sizes] == ["dim=16,num_heads=2", "dim=32,num_heads=2", "dim=64,num_heads=4"]
    assert sizes[2].arguments == [f"--{DIM}=64", f"--{HEADS}=4"]
    assert parse_scale([]) == []


@pytest.mark.parametrize(
    "items, message",
    [
        ([f"{DIM}"], f"--scale '{DIM}' is malformed; write KEY=V1,V2,..."),
        ([f"{DIM}=16,32", f"{HEADS}=2"], f"--scale {HEADS} has 1 values but --scale {DIM} has 2;"),
        ([f"{DIM}=16,16"], "--scale gives the size dim=16 twice; give each size once."),
        ([f"{DIM}=16,16.0", f"{HEADS}=2,2"], "--scale gives dim=16,num_heads=2 and dim=16.0,num_heads=2, which are one size"),
        ([f"{DIM}=16", "model.net.dim=32"], "--scale model.net.dim is given twice"),
        (["seed_everything=1,2"], "use --seeds"),
    ],
)
def test_malformed_sizes_are_one_sentence(items, message):
    with pytest.raises(ConfigError) as error:
        parse_scale(items)
    assert message in str(error.value)


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--scale", f"{DIM}=16,32", "--grid", "model.net.dim=16,32"],
            f"--scale {DIM} is also a --grid key; a size is not tuned over",
        ),
        (["--scale", f"{DIM}=16,32", "--model.net.dim=24"], f"'--model.net.dim=24' sets {DIM}, which --scale varies"),
        (
            ["--scale", f"{DIM}=16,32", "--tokens-per-parameter", "20", "--trainer.max_steps=50"],
            "--tokens-per-parameter sets each size's max_steps itself, so '--trainer.max_steps=50' cannot be given too",
        ),
        (
            ["--scale", f"{DIM}=16,32", "--tokens-per-parameter", "20", "--grid", "model.warmup_steps=0,10"],
            "so --grid model.warmup_steps cannot vary it",
        ),
        (
            ["--scale", f"{DIM}=16,32", "--tokens-per-parameter", "20", "--arm", "long;standard;trainer.max_steps=9"],
            "so 'trainer.max_steps=9' cannot be given too",
        ),
        (
            ["--scale", f"{DIM}=16,32", "--tokens-per-parameter", "20", "--grid", "data.batch_size=16,32"],
            "so --grid data.batch_size cannot change the tokens per step",
        ),
        (["--tokens-per-parameter", "20"], "--tokens-per-parameter 20 needs --scale"),
        (["--scale", f"{DIM}=16,32", "--tokens-per-parameter", "0"], "--tokens-per-parameter 0 is invalid; give a positive"),
        (
            ["--scale", f"{DIM}=16,32", "--tokens-per-parameter", "20"],
            "--tokens-per-parameter keeps the recipe's warm-up fraction, but the recipe sets no trainer.max_steps",
        ),
        (
            ["--scale", f"{DIM}=16,32", "--verify", "4"],
            "--verify 4 re-trains that many runs at every size, but size "
            f"{DIM.split('.')[-1]}=16 has 0 finished (of the 3 it plans); give at most 3.",
        ),
    ],
)
def test_scaled_sweeps_that_cannot_work_fail_in_one_sentence_before_any_run(args, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the digits ViT trains for epochs: it has no max_steps to keep a fraction of
    with pytest.raises(SystemExit) as exit_:
        main(["compare", "--config", VIT, "--variants", "standard", "--output", str(tmp_path / "out"), *args])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert message in error.splitlines()[0] and "Traceback (most recent call last)" not in error
    assert not (tmp_path / "out" / "runs").exists()


@pytest.mark.slow
def test_each_size_gets_its_folder_and_a_budget_from_its_non_embedding_parameters():
    argv = [
        *TINY_GPT,
        "--variants",
        "standard,nonlinear_query",
        "--seeds",
        "2",
        "--scale",
        f"{DIM}=16,32",
        "--scale",
        f"{HEADS}=2,4",
        "--tokens-per-parameter",
        "20",
    ]
    args, extra = build_parser().parse_known_args(argv)
    sizes = parse_scale(args.scale)
    check_scale(sizes, [], extra, args.arm, args.tokens_per_parameter)
    planned = plan_sizes(args, ["standard", "nonlinear_query"], [], extra, sizes)
    assert [size.label for size, _, _ in planned] == ["dim=16,num_heads=2", "dim=32,num_heads=4"]
    for size, plan, size_extra in planned:
        assert len(plan.runs) == 4 and {r.size for r in plan.runs} == {size.label}
        run = next(r for r in plan.runs if r.arm == "nonlinear_query" and r.seed == 1)
        assert run.directory(Path("out")) == Path("out/runs") / size.label / "default/nonlinear_query/seed_1"
        baseline = check_run(args.config, Run("standard", "standard", (), 0), size_extra)
        params = baseline.model.param_counts["non_embedding"]
        steps = round(20 * params / (4 * 16))  # batch 4 x 16 tokens per step
        budget = dict(size.budget)
        assert budget["max_steps"] == str(steps) and budget["tokens_per_step"] == "64"
        assert budget["warmup_steps"] == str(round(30 / 300 * steps))  # the recipe's 30 of 300 steps
        resolved = plan.configs[("nonlinear_query", ())]
        assert resolved["trainer.max_steps"] == steps and resolved[DIM] == int(dict(size.settings)[DIM])
        assert resolved["model.init_args.warmup_steps"] == round(steps / 10)
        settings = run.command(args.config, size_extra, Path("out"), False)[-2]
        assert f'"size": "{size.label}"' in settings and f'"max_steps": "{steps}"' in settings
    assert int(dict(planned[1][0].budget)["max_steps"]) > 3 * int(dict(planned[0][0].budget)["max_steps"])
    # A sweep without --scale keeps its folders.
    assert Run("standard", "standard", (), 0).directory(Path("out")) == Path("out/runs/default/standard/seed_0")


def loss_record(loss: float, params: float, lr: str) -> dict:
    return {
        "monitor": "val/loss",
        "mode": "min",
        "curve": [[0, 10, loss]],
        "best": {"epoch": 0, "step": 10, "value": loss},
        "final": loss,
        "test": {"test/loss": loss + 0.01},
        "train_flops": 6 * params * 1000,
        "params": {"total": params + 100, "non_embedding": params, "attention": params / 3},
    }


def synthetic_parts(sizes: list[int], missing: tuple = ()) -> list:
    """On L = 2 + 30·N^(-0.5): standard, its control at 1.125× the parameters, and nonlinear_query, which
    does at N what standard does at 1.3·N; `missing`: (arm, size) left unfinished."""
    parts = []
    for n in sizes:
        size = Size(
            f"dim={n}",
            ((DIM, str(n)),),
            (
                ("tokens_per_parameter", "20"),
                ("tokens_per_step", "64"),
                ("max_steps", str(20 * n * 10 // 64)),
                ("warmup_steps", "3"),
            ),
        )
        plan = Plan(
            arms=["standard", "standard+12.5%", "nonlinear_query"], points=[(("model.init_args.lr", "1e-3"),)], seeds=[0, 1, 2]
        )
        states = []
        for arm, variant, factor, worth in (
            ("standard", "standard", 1.0, 1.0),
            ("standard+12.5%", "standard", 1.125, 1.0),
            ("nonlinear_query", "nonlinear_query", 1.0, 1.3),
        ):
            for seed in plan.seeds:
                run = Run(arm, variant, plan.points[0], seed, ("--x=1",) if arm == "standard+12.5%" else (), size.label)
                plan.runs.append(run)
                params = 10.0 * n * factor
                loss = 2 + 30 * (worth * params) ** -0.5 + seed / 500
                states.append(RunState(run, record=loss_record(loss, params, "1e-3") if (arm, n) not in missing else None))
        parts.append((size, plan, states))
    return parts


@pytest.mark.slow
def test_the_scaling_report_states_budgets_claims_and_rebuilds_byte_for_byte(tmp_path):
    text = write_scaled_report(synthetic_parts([16, 32, 64]), tmp_path, "compare ...", "standard", None)
    first = (tmp_path / "results.md").read_bytes()
    assert (
        f"| dim=32 | {DIM}=32 | 320 | 20 (reached: 20) | 64 | 100 | 3 | 9/9 | [sizes/dim=32](sizes/dim=32/results.md) |" in text
    )
    assert "## Scaling with size" in text and "### Multipliers against `standard`" in text
    assert (
        "`nonlinear_query`'s m against 1.125 (beats `standard+12.5%`, `standard` with +12.5% parameters): above at "
        "dim=16, dim=32, dim=64." in text
    )
    assert (tmp_path / "scaling.png").is_file() and (tmp_path / "sizes/dim=64/results.md").is_file()
    write_scaled_report(synthetic_parts([16, 32, 64]), tmp_path, "compare ...", "standard", None)
    assert (tmp_path / "results.md").read_bytes() == first


@pytest.mark.slow
def test_degenerate_sweeps_get_the_engines_sentences(tmp_path):
    one = write_scaled_report(synthetic_parts([16]), tmp_path / "one", "compare ...", "standard", None)
    assert "The sweep has one size: a law over sizes needs at least two" in one
    gap = write_scaled_report(
        synthetic_parts([16, 32, 64], missing=(("standard+12.5%", 32),)), tmp_path / "gap", "compare ...", "standard", None
    )
    assert "`standard+12.5%` has no finished run with a validation value at size dim=32" in gap
    assert f"| dim=32 | {DIM}=32 | 320 | 20 (reached: 20) | 64 | 100 | 3 | 6/9 |" in gap
    nothing = write_scaled_report(
        synthetic_parts(
            [16, 32],
            missing=(
                ("standard", 16),
                ("standard", 32),
                ("standard+12.5%", 16),
                ("standard+12.5%", 32),
                ("nonlinear_query", 16),
                ("nonlinear_query", 32),
            ),
        ),
        tmp_path / "none",
        "compare ...",
        "standard",
        None,
    )
    assert "No arm has a finished run at any size yet: no law can be fitted." in nothing
    assert not (tmp_path / "none" / "scaling.png").exists()
    no_baseline = write_scaled_report(
        synthetic_parts([16, 32], missing=(("standard", 16), ("standard", 32))),
        tmp_path / "no_baseline",
        "compare ...",
        "standard",
        None,
    )
    assert "The baseline `standard` has no finished run at any size: no multiplier can be computed." in no_baseline


@pytest.mark.slow
def test_a_tiny_scaled_sweep_reports_its_laws_and_rebuilds_them(in_tmp, capsys):
    """2 sizes x 2 arms (standard and a wider-MLP control) x 2 seeds of the stdlib GPT, budgets from
    tokens per parameter, one run of each size re-trained (--verify) and each size's tuned runs
    inspected, each into its size's report; the data's n-gram floors under the loss tables; --report
    rebuilds results.md byte for byte. Two runs at a time, so one thread each (cores / --parallel on
    2 cores): a tiny run's torch threads would mostly wait on each other on shared cores."""
    sweep = [
        "compare",
        *TINY_GPT,
        "--variants",
        "standard",
        "--arm",
        "mlp5;standard;model.init_args.net.mlp_ratio=5",
        "--seeds",
        "2",
        "--scale",
        f"{DIM}=16,32",
        "--scale",
        f"{HEADS}=2,2",
        "--tokens-per-parameter",
        "0.1",
        "--test",
        "--verify",
        "1",
        "--inspect",
        "--output",
        "out",
        "--parallel",
        "2",
    ]
    assert run_main(sweep) == 0, capsys.readouterr().err[-3000:]
    out = in_tmp / "out"
    text = (out / "results.md").read_text()
    floors = "n-gram floors on this data (fitted on the training split, scored on validation / test): unigram "
    assert text.count(floors) == 1 and "nats/byte." in text.split(floors)[1].split("\n")[0]
    for label in ("dim=16,num_heads=2", "dim=32,num_heads=2"):
        size = (out / "sizes" / label / "results.md").read_text()
        assert size.count(floors) == 1  # under the table of every run (one grid point: no tuned table)
        assert "## Re-run check" in size and "## What each arm learned" in size
        assert len(list((out / "sizes" / label / "verify/runs").rglob("record.json"))) == 1
        assert sorted(p.name for p in (out / "sizes" / label / "inspect").iterdir() if p.is_dir()) == ["mlp5", "standard"]
        assert (
            f"| {label} | 1 re-run(s): [sizes/{label}/results.md](sizes/{label}/results.md) | "
            f"[sizes/{label}/inspect/compare.md](sizes/{label}/inspect/compare.md) |"
        ) in text
    assert "## Sizes and budgets" in text and "## Scaling with size" in text and "| mlp5 | N | dim=32,num_heads=2 |" in text
    assert "`standard`'s law passes through its two sizes" in text and (out / "scaling.png").is_file()
    records = sorted(p.relative_to(out / "runs").parts[:3] for p in (out / "runs").rglob("record.json"))
    assert len(records) == 8 and records[0] == ("dim=16,num_heads=2", "default", "mlp5")
    size = out / "runs/dim=32,num_heads=2/default"
    standard, mlp5 = (json.loads(next((size / arm).rglob("record.json")).read_text()) for arm in ("standard", "mlp5"))
    budget = standard["settings"]
    assert budget["size"] == "dim=32,num_heads=2" and budget["tokens_per_parameter"] == "0.1"
    steps = round(0.1 * standard["params"]["non_embedding"] / 64)  # batch 4 x 16 tokens
    assert standard["optimizer_steps"] == mlp5["optimizer_steps"] == int(budget["max_steps"]) == steps
    assert f"| {budget['max_steps']} | {budget['warmup_steps']} | 4/4 |" in text
    before = (out / "results.md").read_bytes()
    assert run_main([*sweep, "--report"]) == 0, capsys.readouterr().err[-3000:]
    assert (out / "results.md").read_bytes() == before


@pytest.mark.slow
def test_a_point_past_the_grid_stays_in_its_size(monkeypatch):
    """--extend-edges at one size of a --scale sweep adds runs of that size: its folder, settings and budget."""
    from lit_attention.sweep import running

    argv = [
        "--config",
        VIT,
        "--variants",
        "standard",
        "--seeds",
        "1",
        "--grid",
        "model.init_args.lr=1e-3,2e-3",
        "--scale",
        f"{DIM}=16,32",
        "--extend-edges",
        "--max-extensions",
        "1",
        "--report",
    ]
    args, extra = build_parser().parse_known_args(argv)
    size, plan, size_extra = plan_sizes(
        args, ["standard"], [("model.init_args.lr", ["1e-3", "2e-3"])], extra, parse_scale(args.scale)
    )[1]
    states = {r: RunState(r, record=loss_record(1.0 if r.point[0][1] == "2e-3" else 2.0, 320, "")) for r in plan.runs}
    found = []
    monkeypatch.setattr(running, "find_state", lambda run, *a, **k: found.append(run) or RunState(run))
    running.extend_edges(args, plan, states, Path("out"), size_extra)
    [beyond] = found
    assert beyond.point == (("model.init_args.lr", "0.004"),) and beyond.size == size.label == "dim=32"
    assert beyond.directory(Path("out")) == Path("out/runs/dim=32/lr=0.004/standard/seed_0")
    assert f"--{DIM}=32" in beyond.arguments(args.config, size_extra)
