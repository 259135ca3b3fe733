"""`lit-attention compare`: a recipe over attention variants x a grid of settings x seeds, each run a
separate `lit-attention fit` that records its result on disk, and a report built from those records.

    lit-attention compare --config recipes/quickstart/vit_digits.yaml --variants all --seeds 3 --test
    lit-attention compare --config recipes/quickstart/gpt_stdlib.yaml --variants standard,optimized \\
        --grid model.init_args.lr=1e-3,3e-3 --seeds 5 --test --parallel 2
    lit-attention compare ... --report          # rebuild the tables from what is on disk, train nothing
    lit-attention compare --trend DIR1 DIR2 DIR3 --output OUT   # how differences change over sweeps of 3 sizes

Re-running the same command skips finished runs and resumes interrupted ones from their last
checkpoint; killing it at any point and running it again ends with the same results.csv. Arguments
this command does not know go to every `fit` (`--trainer.max_epochs 30`), except the ones the sweep
sets itself (the attention, the seed, a grid key), which are refused. It writes only into an output of
its own (new, empty, or a sweep's), one command at a time: a second command into the same output is
refused, or waits with --wait-for-lock.
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import shlex
from argparse import ArgumentError
from pathlib import Path

from lit_attention.errors import ConfigError
from lit_attention.modeling.variants import presets_help
from lit_attention.sweep.report_files import check_reports_writable
from lit_attention.sweep.output_dir import OutputLock, check_output, check_owner, remove_if_only_locked
from lit_attention.reports.report import write_report
from lit_attention.sweep.running import end_sweep, extend_edges, launch, make_launcher
from lit_attention.sweep.verify import choose_runs, rerun, scratch
from lit_attention.training.run_dirs import check_writable
from lit_attention.sweep.runs import (
    baseline_arm,
    check_extra_arguments,
    find_state,
    parse_grid,
    parse_point,
    parse_equivalence,
    parse_primary,
    parse_variants,
)

MAX_SEED = 2**32 - 1  # numpy's bound (a uint32), which Lightning's seed_everything enforces

EXAMPLES = """examples:
  lit-attention compare --config recipes/quickstart/vit_digits.yaml --variants all --seeds 3 --test --parallel 2
  lit-attention compare --config recipes/quickstart/gpt_stdlib.yaml --variants standard,efficient \\
      --grid model.init_args.lr=1e-3,3e-3 --add-control efficient --seeds 5 --test
  lit-attention compare --config recipes/nonlinear_query/gpt3_small.yaml --variants standard,nonlinear_query \\
      --grid model.init_args.lr=6e-4,8e-4,1.2e-3 --seeds 3 --test --launcher slurm \\
      --slurm-partition gpu --slurm-nodes 1 --slurm-gpus-per-node 8 --slurm-time 720
  lit-attention compare --config recipes/quickstart/gpt_stdlib.yaml --variants standard,nonlinear_query \\
      --arm 'standard+12.5%;standard;model.init_args.net.mlp_ratio=4.75' --grid model.init_args.lr=1e-3,3e-3 \\
      --scale model.init_args.net.dim=64,128,256 --scale model.init_args.net.num_heads=2,4,8 \\
      --tokens-per-parameter 20 --seeds 5 --test --extend-edges
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lit-attention compare",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        exit_on_error=False,
        allow_abbrev=False,
    )  # `--seed 7` must not silently mean --seeds 7
    sweep = parser.add_argument_group("what to run")
    sweep.add_argument("--config", action="append", help="recipe YAML (repeat to stack presets); needed by all but --trend")
    sweep.add_argument(
        "--variants",
        nargs="+",
        default=["all"],
        help="'all' or comma-separated variants, each " + presets_help().replace("%", "%%"),
    )
    sweep.add_argument("--seeds", type=int, default=3, help="seeds per arm and grid point: first-seed, ..., +n-1")
    sweep.add_argument("--first-seed", type=int, default=0)
    sweep.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="a setting to sweep (any fit key, e.g. model.init_args.lr=3e-4,1e-3); repeat for a product",
    )
    sweep.add_argument(
        "--scale",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="model sizes: run every arm at every size, each size its own tuned sweep under "
        "<output>/runs/<size>/, and add the scaling laws and multipliers to the report "
        "(e.g. model.init_args.net.dim=64,128,256); repeat with lists of the same length to "
        "change keys together (--scale model.init_args.net.dim=64,128 --scale "
        "model.init_args.net.num_heads=2,4 is two sizes)",
    )
    sweep.add_argument(
        "--tokens-per-parameter",
        type=float,
        default=None,
        metavar="R",
        help="with --scale: train each size for R tokens per non-embedding parameter of its "
        "baseline arm (a token: one position of a language model's batch, one sample for "
        "every other task), setting trainer.max_steps and keeping the recipe's warm-up fraction",
    )
    sweep.add_argument(
        "--match-parameters",
        metavar="VARIANT",
        help="give every other arm the MLP width that brings its non-embedding parameters within 1%% of VARIANT's",
    )
    sweep.add_argument(
        "--add-control",
        action="append",
        default=[],
        metavar="VARIANT",
        help="add a `standard` arm whose MLP width matches VARIANT's non-embedding parameters (repeatable)",
    )
    sweep.add_argument(
        "--arm",
        action="append",
        default=[],
        metavar="'LABEL;VARIANT;KEY=VALUE;...'",
        help="an extra arm: a variant with settings of its own (e.g. 'mlp4.75;standard;"
        "model.init_args.net.mlp_ratio=4.75'); repeatable",
    )
    sweep.add_argument("--test", action="store_true", help="score each run's best checkpoint on the test split")
    sweep.add_argument(
        "--extend-edges",
        action="store_true",
        help="off by default: when an arm's tuned choice is the lowest or highest value of a numeric "
        "--grid axis, run the next value past it (at the ratio of the axis's last step) for every "
        "seed of that arm, and repeat until the choice is inside the grid (give it with --report "
        "too, to count the points it added)",
    )
    sweep.add_argument(
        "--max-extensions",
        type=int,
        default=3,
        metavar="N",
        help="with --extend-edges: at most N rounds of points past the grid (default 3)",
    )
    report = parser.add_argument_group("the report")
    report.add_argument("--output", default=None, help="output directory (default: runs/compare/<recipe>)")
    report.add_argument("--report", action="store_true", help="only rebuild the report from the records on disk")
    report.add_argument(
        "--trend",
        nargs="+",
        default=None,
        metavar="DIR",
        help="train nothing: from finished compare outputs of one recipe at several sizes (one "
        "folder a size), write --output's results.md and size_trend.png: each arm's difference "
        "from --baseline at every size, its slope against log2 of the parameters and the largest "
        "minus the smallest size (lit_attention/scaling/trend.py)",
    )
    report.add_argument(
        "--wait-for-lock",
        action="store_true",
        help="when another compare command is using --output, wait for it to end instead of stopping",
    )
    report.add_argument("--baseline", default="standard", help="the arm every other arm is compared with")
    report.add_argument(
        "--success-threshold",
        type=float,
        default=None,
        help="also count the runs whose best validation value reaches this (MQAR-like outcomes)",
    )
    report.add_argument(
        "--primary",
        default=None,
        metavar="ARM[:REFERENCE],...",
        help="the confirmatory comparisons, fixed in advance: each ARM against the baseline, or "
        "against REFERENCE; only these are corrected for multiple comparisons and get verdicts, "
        "the others are labelled exploratory (default: every arm against the baseline)",
    )
    report.add_argument(
        "--equivalence",
        action="append",
        default=[],
        metavar="ARM[:REFERENCE]=MARGIN",
        help="a --primary comparison to test for equivalence as well, within ±MARGIN in the "
        "metric's units (two one-sided tests at the family's level), e.g. identity_query=0.02; "
        "repeat for more",
    )
    report.add_argument(
        "--at",
        default=None,
        metavar="POINT",
        help="with a grid, compare every arm again at this one grid point, written as the tables "
        "write it (e.g. lr=2e-3): a check on what each arm's own tuned setting contributes",
    )
    report.add_argument(
        "--cross-fit",
        action="store_true",
        help="with a grid, add a tuned table whose grid point is chosen on half of the seeds and "
        "scored on the other half, both ways, so selection and scoring never share a seed: "
        "among the grid's own points and, where --extend-edges added points, again among "
        "every point each arm ran",
    )
    report.add_argument(
        "--inspect",
        action="store_true",
        help="run `lit-attention inspect` on each arm's tuned run (its first finished seed) and put "
        "the side-by-side figure of what each learned beside the tables (<output>/inspect/)",
    )
    report.add_argument(
        "--verify",
        type=int,
        default=0,
        metavar="K",
        help="re-train K randomly chosen finished runs in <output>/verify and report the largest difference from their records",
    )
    launch = parser.add_argument_group("where the runs go")
    launch.add_argument("--launcher", choices=("local", "slurm"), default="local")
    launch.add_argument("--parallel", type=int, default=1, help="local: runs at a time (CPU cores are split)")
    launch.add_argument(
        "--devices-per-run",
        type=int,
        default=1,
        help="local: devices per run, each run a DDP run over them (GPUs; on CPU, processes sharing the cores)",
    )
    launch.add_argument(
        "--fresh-processes",
        action="store_true",
        help="local: start every run as a new Python process instead of forking it from one "
        "that imported Lightning once (slower by the import time per run; the same results)",
    )
    launch.add_argument("--slurm-partition", default=None)
    launch.add_argument("--slurm-time", type=int, default=60, help="minutes per job")
    launch.add_argument("--slurm-gpus-per-node", type=int, default=0)
    launch.add_argument("--slurm-nodes", type=int, default=1)
    launch.add_argument("--slurm-cpus-per-task", type=int, default=None)
    launch.add_argument(
        "--slurm-cluster",
        default="slurm",
        choices=("slurm", "local"),
        help="submitit's executor: slurm (sbatch), or local to run the same jobs on this machine",
    )
    return parser


def run(argv: list[str]) -> None:
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
    except ArgumentError as error:
        raise ConfigError(f"{error}; `lit-attention compare --help` lists the options.") from None
    check_not_abbreviated(extra, parser)
    if args.trend is not None:
        return run_trend(args, extra)
    if not args.config:
        raise ConfigError(
            "compare needs a recipe: pass --config, e.g. --config recipes/quickstart/vit_digits.yaml; "
            "`lit-attention compare --help` lists the options."
        )
    check_runs_validate(extra)
    for name in ("seeds", "parallel", "devices_per_run", "slurm_nodes", "slurm_time"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} {getattr(args, name)} is invalid; give at least 1.")
    check_seeds(args.first_seed, args.seeds)
    if args.success_threshold is not None and not math.isfinite(args.success_threshold):
        raise ConfigError(
            f"--success-threshold {args.success_threshold} is invalid: no run's value can reach or "
            "cross it; give a finite number, such as 0.99."
        )
    if not args.baseline.strip():
        raise ConfigError("--baseline '' names no arm; give the arm every other arm is compared with, such as standard.")
    if args.max_extensions < 0:
        raise ConfigError(f"--max-extensions {args.max_extensions} is invalid; give 0 or more rounds.")
    if args.verify < 0:
        raise ConfigError(f"--verify {args.verify} is invalid; give how many finished runs to re-train, 0 or more.")
    for name in ("lightning.pytorch", "lightning.fabric"):  # planning seeds and builds; say it once, below
        logging.getLogger(name).setLevel(logging.WARNING)
    variants = parse_variants(args.variants)
    grid = parse_grid(args.grid)
    check_extra_arguments(extra, grid)
    from lit_attention.scaling.sizes import check_scale, parse_scale

    sizes = parse_scale(args.scale)
    check_scale(sizes, grid, extra, args.arm, args.tokens_per_parameter)
    extra = [*device_arguments(args), *extra]  # what a run is given to run on; the user's own words come last
    from lit_attention.training.cli import recipe_name

    output = Path(args.output or Path("runs") / "compare" / recipe_name(args.config))
    check_owner(output, "scale" if sizes else "sweep")
    check_output(output, report_only=args.report)
    made = not output.exists()
    check_writable(output)
    check_reports_writable(output)
    with OutputLock(output, "lit-attention compare " + shlex.join(argv)).acquire(wait=args.wait_for_lock):
        try:
            if sizes:
                from lit_attention.scaling.sweep import run_scaled_sweep

                run_scaled_sweep(args, argv, variants, grid, extra, output, sizes)
            else:
                run_sweep(args, argv, variants, grid, extra, output)
        except ConfigError:
            if made:
                remove_if_only_locked(output)
            raise


def run_sweep(args, argv: list[str], variants: list[str], grid, extra: list[str], output: Path) -> None:
    """Plan, run what is not finished, and report: all of it while this command holds the output's lock."""
    from lit_attention.sweep.planning import build_plan

    plan = build_plan(args, variants, grid, extra)
    args.baseline = baseline_arm(plan, args.baseline)
    primary = parse_primary(plan, args.primary, args.baseline)
    equivalence = parse_equivalence(plan, args.equivalence, args.baseline, primary)
    common_point = parse_point(plan, args.at)
    states = {
        r: find_state(r, output, needs_test=args.test and not args.report, wanted=plan.configs[(r.arm, r.point)])
        for r in plan.runs
    }
    finished_now = sum(state.finished for state in states.values())
    most = finished_now if args.report else len(plan.runs)  # a sweep finishes its runs first (choose_runs checks again)
    if args.verify > most:
        raise ConfigError(
            f"--verify {args.verify} asks for more runs than the {finished_now} finished (of the "
            f"{len(plan.runs)} this sweep plans); give at most {most}."
        )
    failed = 0
    if not args.report:
        failed = launch(args, plan, states, output, extra)
        states = {r: find_state(r, output) for r in plan.runs}
    if args.extend_edges:
        failed += extend_edges(args, plan, states, output, extra)
    skipped = []  # what --verify or --inspect could not do: said once the report is written
    if args.verify:
        try:
            chosen = choose_runs(states.values(), args.verify)
            failed += rerun(chosen, plan, states, args.config, extra, output, make_launcher(args, scratch(output)))
        except ConfigError as error:
            skipped.append(f"--verify was not done: {error}")
    if args.inspect:
        from lit_attention.reports.inspection import inspect_arms

        try:
            inspect_arms(plan, list(states.values()), output)
        except ConfigError as error:
            skipped.append(f"--inspect was not done: {error}")
    command = "lit-attention compare " + " ".join(argv)
    text = write_report(
        plan,
        list(states.values()),
        output,
        command,
        args.baseline,
        args.success_threshold,
        primary=primary,
        cross_fitted=args.cross_fit,
        common_point=common_point,
        equivalence=equivalence,
        extension_rounds=args.max_extensions if args.extend_edges else None,
    )
    print("\n" + text)
    finished = sum(state.finished for state in states.values())
    written = (
        "results.md, results.csv, comparisons.csv, timings.csv and results.png"
        if finished
        else "results.md, results.csv and comparisons.csv"
    )
    print(f"Wrote {output}/{written}; curves: tensorboard --logdir {shlex.quote(str(output / 'runs'))}")
    end_sweep(failed, skipped, "the table")


def run_trend(args, extra: list[str]) -> None:
    """`--trend DIR ...`: a report over finished sweeps, one a size; it plans and trains nothing, so every
    option of a sweep is refused rather than ignored."""
    given = [
        f"--{name.replace('_', '-')}" for name in ("config", "scale", "grid", "arm", "add_control") if getattr(args, name)
    ] + extra
    if given:
        raise ConfigError(
            f"--trend reads finished sweeps and trains nothing, so {given[0]} cannot be given with it; "
            "give the folders, --output and --baseline only."
        )
    if args.output is None:
        raise ConfigError("--trend needs --output, the folder to write the trend's results.md and size_trend.png into.")
    if len(args.trend) < 2:
        raise ConfigError(f"--trend {args.trend[0]} is one sweep; a trend over sizes needs at least two folders.")
    from lit_attention.scaling.trend import write_trend

    output = Path(args.output)
    if any(output.resolve() == Path(folder).resolve() for folder in args.trend):
        raise ConfigError(
            f"--output {str(output)!r} is one of the sweeps --trend reads, whose report it would replace; "
            "a trend writes a folder of its own, so choose another --output."
        )
    check_owner(output, "trend")
    from lit_attention.scaling.trend import check_folders

    check_folders([Path(folder) for folder in args.trend])  # before the output is made
    check_writable(output)
    text = write_trend([Path(folder) for folder in args.trend], output, args.baseline)
    print(text)
    print(f"Wrote {output}/results.md and {output}/size_trend.png")


# ---------------------------------------------------------------------------------------------- the command line


def check_seeds(first: int, count: int) -> None:
    """Every seed of the plan, checked before any run: a bad last seed would otherwise fail mid-sweep."""
    last = first + count - 1
    if first < 0 or first > MAX_SEED:
        raise ConfigError(f"--first-seed {first} is invalid; seeds are whole numbers from 0 to {MAX_SEED}.")
    if last > MAX_SEED:
        raise ConfigError(
            f"--first-seed {first} with --seeds {count} reaches seed {last}, past the largest seed "
            f"{MAX_SEED}; give --first-seed {MAX_SEED - count + 1} or less, or fewer seeds."
        )


def check_runs_validate(extra: list[str]) -> None:
    """compare chooses each arm's grid point, and reports, on validation: runs told never to validate
    would all finish and leave an empty report, and the sweep would exit 0."""
    for i, word in enumerate(extra):
        key, given, value = word.partition("=")
        if key != "--trainer.limit_val_batches":
            continue
        value = value if given else (extra[i + 1] if i + 1 < len(extra) else "")
        try:
            off = float(value) == 0
        except ValueError:
            continue  # the fit parser names a malformed value
        if off:
            raise ConfigError(
                f"--trainer.limit_val_batches {value} switches validation off, but compare chooses each "
                "arm's grid point and reports on validation; give a number of batches or a fraction in "
                "(0, 1], or leave it unset."
            )


def check_not_abbreviated(extra: list[str], parser: argparse.ArgumentParser) -> None:
    """An unknown word that begins one of compare's own options (`--seed` for --seeds) is a typo of it,
    not an argument for every fit (where the fit parser would refuse it, naming a fit option instead)."""
    from lit_attention.training.parser_errors import abbreviation_sentence

    options = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", parser.format_usage()))
    sentence = abbreviation_sentence(extra, options, owner=" of compare")
    if sentence:
        raise ConfigError(sentence)


def device_arguments(args) -> list[str]:
    """The trainer's devices and nodes for what each run is given: its GPUs here, or its SLURM job."""
    if args.launcher == "slurm":
        gpus = [f"--trainer.devices={args.slurm_gpus_per_node}"] if args.slurm_gpus_per_node > 0 else []
        return [f"--trainer.num_nodes={args.slurm_nodes}", *gpus]
    import torch

    # On CPU a run of k devices is k processes (DDP over gloo), as on k GPUs.
    return [f"--trainer.devices={args.devices_per_run}"] if torch.cuda.is_available() or args.devices_per_run > 1 else []
