"""`lit-attention compare`: one recipe, several attention variants x seeds, one verdict with error bars.

    lit-attention compare --config recipes/quickstart/vit_digits.yaml --variants all --seeds 3
    lit-attention compare --config recipes/quickstart/gpt_stdlib.yaml --variants standard,super \\
        --seeds 2 --trainer.max_steps 200

Every run is a normal `lit-attention fit` (same recipe, only the attention and the seed change),
written as TensorBoard runs under the output directory, next to `results.md`, `results.csv` and
`results.png`. Arguments this command does not know are passed to every `fit`.
"""

from __future__ import annotations

import argparse
import csv
import logging
import math
import os
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from lit_attention.attention import list_presets, resolve_spec
from lit_attention.callbacks import RunHistory
from lit_attention.errors import ConfigError


@dataclass
class RunResult:
    variant: str
    seed: int
    monitor: str
    mode: str
    curve: list[tuple[int, int, float]]
    params_total: int
    params_attention: int
    samples_per_second: float
    seconds: float
    log_dir: str
    test_value: float | None = None

    @property
    def final(self) -> float:
        return self.curve[-1][2] if self.curve else float("nan")

    @property
    def best(self) -> tuple[int, float]:
        """(training step, value) of the best validation: steps, not epochs, so that runs validated
        within one long epoch (language models) say where their best was too."""
        if not self.curve:
            return -1, float("nan")
        pick = max if self.mode == "max" else min
        _, step, value = pick(self.curve, key=lambda point: point[2])
        return step, value


@dataclass
class VariantSummary:
    variant: str
    runs: list[RunResult] = field(default_factory=list)

    def stat(self, values: list[float]) -> tuple[float, float]:
        return mean_std(values)


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample std (0 for a single value): the "mean ± std over seeds" of every table."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def parse_variants(tokens: list[str]) -> list[str]:
    """`all`, comma-separated preset names, or whole axes specs (which contain their own commas)."""
    variants: list[str] = []
    for token in tokens:
        if token == "all":
            variants += list_presets()
        elif "=" in token:
            variants.append(token)
        else:
            variants += [name for name in token.split(",") if name]
    for variant in variants:
        resolve_spec(variant)  # a typo fails here, before any training
    return list(dict.fromkeys(variants))


def run_one(configs: list[str], variant: str, seed: int, output: Path, overrides: list[str], test: bool, progress: bool) -> RunResult:
    from lit_attention.cli import LitAttentionCLI

    history = RunHistory()
    args = ["fit"]
    for config in configs:
        args += ["--config", config]
    args += [
        f"--model.init_args.attention={variant}",
        f"--seed_everything={seed}",
        f"--run.root={output}",
        "--run.name=tensorboard",
        f"--trainer.enable_progress_bar={str(progress).lower()}",
        "--trainer.enable_model_summary=false",
        *overrides,
    ]
    started = time.perf_counter()
    cli = LitAttentionCLI(args=args, trainer_defaults={"callbacks": [history]})
    test_value = None
    if test:
        checkpoint = "best" if cli.trainer.checkpoint_callback is not None else None
        metrics = cli.trainer.test(cli.model, datamodule=cli.datamodule, ckpt_path=checkpoint, verbose=False)
        test_value = metrics[0].get(cli.model.monitor.replace("val/", "test/")) if metrics else None
    counts = cli.model.param_counts
    return RunResult(
        variant=resolve_spec(variant).name, seed=seed, monitor=cli.model.monitor, mode=cli.model.monitor_mode,
        curve=history.curve, params_total=counts["total"], params_attention=counts["attention"],
        samples_per_second=history.samples_per_second, seconds=time.perf_counter() - started,
        log_dir=str(cli.trainer.log_dir), test_value=test_value,
    )


def summarise(results: list[RunResult]) -> list[VariantSummary]:
    summaries: dict[str, VariantSummary] = {}
    for result in results:
        summaries.setdefault(result.variant, VariantSummary(result.variant)).runs.append(result)
    return list(summaries.values())


def _pm(mean: float, std: float, digits: int = 4) -> str:
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def table_rows(summaries: list[VariantSummary]) -> tuple[list[str], list[list[str]]]:
    monitor = summaries[0].runs[0].monitor
    has_test = any(r.test_value is not None for s in summaries for r in s.runs)
    header = ["variant", f"final {monitor}", f"best {monitor}", "best step", "params total",
              "params attention", "train samples/s", "seeds"]
    if has_test:
        header.insert(3, monitor.replace("val/", "test/"))
    perplexity = monitor == "val/loss"  # language models: the loss is in nats per token
    if perplexity:
        header.insert(2, "final val/ppl")
    rows = []
    for s in summaries:
        row = [
            s.variant,
            _pm(*s.stat([r.final for r in s.runs])),
            _pm(*s.stat([r.best[1] for r in s.runs])),
            f"{statistics.fmean(r.best[0] for r in s.runs):.0f}",
            f"{s.runs[0].params_total:,}",
            f"{s.runs[0].params_attention:,}",
            f"{statistics.fmean(r.samples_per_second for r in s.runs):.0f}",
            str(len(s.runs)),
        ]
        if has_test:
            tests = [float(r.test_value) for r in s.runs if r.test_value is not None]
            row.insert(3, _pm(*s.stat(tests)) if tests else "n/a")
        if perplexity:
            row.insert(2, _pm(*s.stat([math.exp(r.final) for r in s.runs]), digits=2))
        rows.append(row)
    return header, rows


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def write_results(output: Path, summaries: list[VariantSummary], command: str) -> str:
    header, rows = table_rows(summaries)
    table = markdown_table(header, rows)
    mode = summaries[0].runs[0].mode
    (output / "results.md").write_text(
        f"# Comparison\n\n`{command}`\n\nmean ± std over seeds; {'higher' if mode == 'max' else 'lower'} is better.\n\n"
        f"{table}\n\n![curves](results.png)\n"
    )
    with open(output / "results.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["variant", "seed", "final", "best", "best_step", "test", "params_total",
                         "params_attention", "train_samples_per_s", "seconds", "log_dir"])
        for s in summaries:
            for r in s.runs:
                writer.writerow([r.variant, r.seed, r.final, r.best[1], r.best[0], r.test_value, r.params_total,
                                 r.params_attention, r.samples_per_second, round(r.seconds, 1), r.log_dir])
    plot(output / "results.png", summaries)
    return table


def read_results(output: Path, column: str = "final") -> dict[str, list[float]]:
    """{variant: [value of each seed]} from the results.csv `write_results` wrote into `output`;
    `column` is final, best or test."""
    by_variant: dict[str, list[float]] = {}
    with open(output / "results.csv") as f:
        for row in csv.DictReader(f):
            if not row[column]:
                raise ConfigError(f"{output}/results.csv has no {column!r} values; was it run with --test?")
            by_variant.setdefault(row["variant"], []).append(float(row[column]))
    return by_variant


def plot(path: Path, summaries: list[VariantSummary]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monitor = summaries[0].runs[0].monitor
    fig, (curves, bars) = plt.subplots(1, 2, figsize=(13, 4.8))
    for s in summaries:
        length = min(len(r.curve) for r in s.runs)
        if length == 0:
            continue
        steps = [s.runs[0].curve[i][1] for i in range(length)]
        per_step = [[r.curve[i][2] for r in s.runs] for i in range(length)]
        means = [statistics.fmean(v) for v in per_step]
        stds = [statistics.stdev(v) if len(v) > 1 else 0.0 for v in per_step]
        line, = curves.plot(steps, means, label=s.variant)
        curves.fill_between(steps, [m - d for m, d in zip(means, stds)], [m + d for m, d in zip(means, stds)],
                            color=line.get_color(), alpha=0.2)
    curves.set_xlabel("training step")
    curves.set_ylabel(monitor)
    curves.set_title("validation curves (mean ± std over seeds)")
    curves.legend(fontsize=8)
    names = [s.variant for s in summaries]
    stats = [s.stat([r.final for r in s.runs]) for s in summaries]
    bars.bar(range(len(names)), [m for m, _ in stats], yerr=[d for _, d in stats], capsize=4,
             color=[f"C{i}" for i in range(len(names))])
    finite = [m for m, _ in stats if math.isfinite(m)]
    if finite:
        spread = max(finite) - min(finite) + max((d for _, d in stats if math.isfinite(d)), default=0)
        low, high = min(finite) - 2 * spread - 1e-6, max(finite) + 2 * spread + 1e-6
        if 0.0 <= min(finite) and max(finite) <= 1.0:  # accuracies and the like: stay inside [0, 1]
            low, high = max(low, 0.0), min(high, 1.0)
        bars.set_ylim(low, high)
    bars.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    bars.set_ylabel(f"final {monitor}")
    bars.set_title("final value (mean ± std over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lit-attention compare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", action="append", required=True, help="recipe YAML (repeat to stack)")
    parser.add_argument("--variants", nargs="+", default=["all"],
                        help="'all', comma-separated presets, or axes specs like query=identity,value=identity")
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds per variant (0, 1, ... n-1)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--output", default=None, help="output directory (default: runs/compare/<recipe>)")
    parser.add_argument("--test", action="store_true", help="also evaluate the best checkpoint on the test split")
    parser.add_argument("--progress", action="store_true", help="show Lightning's progress bar for every run")
    return parser


def main(argv: list[str]) -> None:
    from datamodules import DataError
    from lit_attention.cli import TRACEBACK_ENV, recipe_name

    parser = build_parser()
    args, overrides = parser.parse_known_args(argv)
    try:
        variants = parse_variants(args.variants)
        if args.seeds < 1:
            raise ConfigError(f"--seeds {args.seeds} is invalid; give at least 1 seed.")
        for config in args.config:
            if not Path(config).is_file():
                raise ConfigError(f"Recipe {config!r} does not exist; pass a YAML file such as recipes/quickstart/vit_digits.yaml.")
    except ConfigError as error:
        parser.exit(2, f"error: {error}\n")
    output = Path(args.output or Path("runs") / "compare" / recipe_name(args.config))
    output.mkdir(parents=True, exist_ok=True)
    if not args.progress:  # one line per run instead of Lightning's banners and bars
        for name in ("lightning.pytorch", "lightning.fabric"):
            logging.getLogger(name).setLevel(logging.WARNING)
        import datasets

        datasets.disable_progress_bars()  # e.g. the one-off tokenisation of a text corpus
    warnings.filterwarnings("ignore", message="LightningCLI's args parameter")
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    total, results = len(variants) * len(seeds), []
    started = time.perf_counter()
    for i, (variant, seed) in enumerate(((v, s) for v in variants for s in seeds), start=1):
        print(f"[{i}/{total}] {resolve_spec(variant).name} seed {seed} ...", end=" ", flush=True)
        try:
            result = run_one(args.config, variant, seed, output, overrides, args.test, args.progress)
        except (ConfigError, DataError) as error:
            if os.environ.get(TRACEBACK_ENV):
                raise
            print(f"\nerror: {error}", file=sys.stderr)
            sys.exit(2)
        results.append(result)
        elapsed = time.perf_counter() - started
        print(f"{result.monitor} {result.final:.4f} in {result.seconds:.0f}s "
              f"(elapsed {elapsed:.0f}s, about {elapsed / i * (total - i):.0f}s left)", flush=True)
    command = "lit-attention compare " + " ".join(argv)
    table = write_results(output, summarise(results), command)
    print()
    print(table)
    print(f"\nWrote {output}/results.md, results.csv and results.png; curves: tensorboard --logdir {output}")
