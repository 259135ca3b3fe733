"""What a trained run's attention learned: `inspect_run` (one run, optionally CKA against another) and
`compare_runs` (one side-by-side figure across runs), the functions `lit-attention inspect` and
`compare --inspect` call.

Output: `<output>/inspect.md` with PNG figures beside it, `summary.json` (every number of the report)
and `tensorboard/` (the same scalars and figures). The default output is `<run dir>/inspect/`, beside
the run's `checkpoints/` folder, never inside it (for a checkpoint outside a run directory:
`<checkpoint's folder>/<checkpoint's name>_inspect/`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from itertools import islice
from pathlib import Path

import torch
from lightning.fabric.utilities.apply_func import apply_to_collection

from lit_attention.analysis import weights as layer_weights
from lit_attention.analysis.collect import Collector, run_batches
from lit_attention.analysis.loading import LoadedRun, check_data_known, held_out_loader, load_run, run_folder
from lit_attention.analysis.measures import LinearCKA
from lit_attention.analysis.report import mean, pyplot, short, write_report
from lit_attention.errors import ConfigError
from lit_attention.markdown import markdown_table
from lit_attention.training.run_dirs import CHECKPOINTS

DEFAULT_BATCHES = 8
SUMMARY = "summary.json"
# DataModule arguments that change how batches are served, not which held-out items they hold.
NOT_DATA = ("batch_size", "num_workers", "data_seed", "predict_files")


def inspect_run(
    ckpt_path: str | os.PathLike,
    output: str | os.PathLike | None = None,
    batches: int = DEFAULT_BATCHES,
    compare_to: str | os.PathLike | None = None,
    progress: bool = True,
    data_dir: str | os.PathLike | None = None,
) -> Path:
    """Inspect the run (or checkpoint) `ckpt_path` on `batches` held-out batches and write the report into
    `output` (default: `<run dir>/inspect/`); with `compare_to`, add the linear CKA between the two runs'
    block outputs on the same batches. `data_dir` replaces the run's data folder (default: the run's own
    setting, relative to the working directory). Returns the path of inspect.md."""
    if not isinstance(batches, int) or isinstance(batches, bool) or batches < 1:
        raise ConfigError(f"--batches {batches!r} is invalid; give a positive number of held-out batches.")
    run = load_run(ckpt_path)
    other = load_run(compare_to) if compare_to is not None else None
    for loaded in (run, other):
        if loaded is not None:
            check_data_known(loaded)  # the real cause first, before anything about the output
    if other is not None:
        check_same_data(run, other)
    folder = output_folder(run, output)
    loader = held_out_loader(run, data_dir)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    models = [r.task.model.to(device).eval() for r in (run, other) if r is not None]
    collectors = [Collector(model) for model in models]
    ckas: dict[tuple[str, str], LinearCKA] = {}

    def after_batch() -> None:
        if len(collectors) == 2:
            for (a, fa), (b, fb) in ((x, y) for x in collectors[0].features.items() for y in collectors[1].features.items()):
                if a.split(".")[0] == b.split(".")[0] and fa.shape[0] == fb.shape[0]:
                    ckas.setdefault((a, b), LinearCKA()).update(fa, fb)

    served = islice(loader, batches)
    if progress:
        from tqdm import tqdm

        served = tqdm(served, total=min(batches, len(loader)), desc=f"inspect {run.name}", unit="batch", file=sys.stderr)
    count = 0

    def move(batch):
        nonlocal count
        batch = apply_to_collection(batch, torch.Tensor, lambda t: t.to(device))
        if count == 0:
            for r in (run, other):
                if r is not None:
                    r.task.check_batch(batch)  # a model and data that do not fit: one sentence
        count += 1
        return batch

    with collectors[0], collectors[1] if len(collectors) == 2 else contextlib.nullcontext():
        run_batches(models, run.task.forward_batch, served, move, after_batch)
    if count == 0:
        raise ConfigError(f"The validation split of {run.name} holds no batch to inspect; train with a validation split.")
    summary, maps, matrices = summarise(run, collectors[0], count)
    if other is not None:
        summary["cka"] = cka_table(ckas, other.name)
    (folder / SUMMARY).write_text(json.dumps(summary, indent=1))
    from torch.utils.tensorboard import SummaryWriter

    for earlier in (folder / "tensorboard").glob("events.out.tfevents.*"):  # a report rewritten, not doubled
        earlier.unlink()
    writer = SummaryWriter(str(folder / "tensorboard"))
    try:
        path = write_report(summary, maps, matrices, folder, writer)
    finally:
        writer.close()
    print(f"Inspected {run.name} ({count} batches): {path}", flush=True)
    return path


def output_folder(run: LoadedRun, output: str | os.PathLike | None) -> Path:
    """The report's folder, created: `output`, or beside the run's checkpoints; never inside a checkpoints folder."""
    if output is None:
        where = run_folder(run.checkpoint, run.run_dir)  # beside the run's checkpoints/, whatever its folder's name
        folder = where / "inspect" if where is not None else run.checkpoint.parent / f"{run.checkpoint.stem}_inspect"
    else:
        folder = Path(output)
    if output is not None and CHECKPOINTS in folder.resolve().parts:
        raise ConfigError(
            f"--output {str(folder)!r} lies inside a run's checkpoints folder, which inspect never writes "
            "into; choose another folder (the default is <run dir>/inspect)."
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(
            f"Cannot write the report into {str(folder)!r} ({error.strerror}); choose a writable --output."
        ) from None
    return folder


def check_same_data(run: LoadedRun, other: LoadedRun) -> None:
    """CKA compares two runs on the same items: the same task class and the same held-out data."""

    def data(r: LoadedRun):
        return r.data_class, {k: v for k, v in r.data_arguments.items() if k not in NOT_DATA}

    if type(run.task) is not type(other.task) or data(run) != data(other):
        raise ConfigError(
            f"--compare-to {str(other.checkpoint)!r} was trained on other data or another task than "
            f"{str(run.checkpoint)!r}; CKA compares two runs of the same recipe on the same held-out items."
        )


def summarise(run: LoadedRun, collector: Collector, count: int) -> tuple[dict, dict, dict]:
    """Every number of the report (JSON-ready), the mean attention maps and the W_A matrices, by layer."""
    layers, maps, matrices = {}, {}, {}
    ratios = collector.query_ratios()
    for name, layer in collector.layers.items():
        attention = collector.attention[name].result()
        maps[name] = attention.pop("map")
        geometry = collector.attention[name].geometry
        mix = layer_weights.value_mix_used(layer)
        if mix is not None:
            matrices[name] = mix.float()
        layers[name] = {
            "heads": layer.num_heads,
            "kv_heads": layer.kv_heads,
            "causal": layer.causal,
            "cross_attention": layer.cross_attention,
            "attention": attention,
            "value_mix": layer_weights.value_mix_report(mix, geometry) if mix is not None else None,
            "projections": layer_weights.projection_report(layer),
            "query_ratio": ratios.get(name),
        }
    first = next(iter(collector.layers.values()))
    summary = {
        "run": run.name,
        "checkpoint": str(run.checkpoint),
        "step": run.step,
        "task": type(run.task).__name__,
        "variant": run.task.spec.name,
        "batches": count,
        "dim": first.dim,
        "head_dim": first.head_dim,
        "cls": collector.geometry.cls,
        "grid": collector.geometry.grid,
        "layers": layers,
    }
    return summary, maps, matrices


def cka_table(ckas: dict[tuple[str, str], LinearCKA], other: str) -> dict:
    rows = list(dict.fromkeys(a for a, _ in ckas))
    columns = list(dict.fromkeys(b for _, b in ckas))
    values = [[ckas[(a, b)].value() if (a, b) in ckas else math.nan for b in columns] for a in rows]
    return {"other": other, "rows": rows, "columns": columns, "values": values}


# ------------------------------------------------------------------ several runs


def compare_runs(
    paths: list[str | os.PathLike], output: str | os.PathLike, batches: int = DEFAULT_BATCHES, labels: list[str] | None = None
) -> Path:
    """One side-by-side figure (compare.png) and table (compare.md) of the attention measures per layer
    across runs, in `output`. Each path is an inspect output folder (holding summary.json) or a run /
    checkpoint, which is inspected first into its default folder. Returns the path of compare.md."""
    summaries = []
    for path in paths:
        path = Path(path)
        if not (path / SUMMARY).is_file():
            path = inspect_run(path, batches=batches).parent
        summaries.append(json.loads((path / SUMMARY).read_text()))
    labels = list(labels) if labels is not None else [s["run"] for s in summaries]
    if len(labels) != len(summaries):
        raise ConfigError(f"compare_runs got {len(labels)} labels for {len(summaries)} runs; give one label per run.")
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    figure = comparison_figure(summaries, labels)
    figure.savefig(folder / "compare.png", dpi=110)
    pyplot().close(figure)
    path = folder / "compare.md"
    path.write_text(comparison_markdown(summaries, labels))
    return path


def comparison_panels(summaries: list[dict]) -> list[str]:
    panels = ["entropy", "distance", "diagonal", "first"]
    if any(r.get("value_mix") for s in summaries for r in s["layers"].values()):
        panels.append("identity_distance")
    return panels


def layer_means(summary: dict, panel: str) -> dict[str, float]:
    if panel == "identity_distance":
        return {layer: r["value_mix"]["identity_distance"] for layer, r in summary["layers"].items() if r.get("value_mix")}
    return {layer: mean(r["attention"][panel]) for layer, r in summary["layers"].items()}


def comparison_figure(summaries: list[dict], labels: list[str]):
    plt = pyplot()
    panels = comparison_panels(summaries)
    titles = {
        "entropy": "entropy / log(keys)",
        "distance": "mean attention distance",
        "diagonal": "weight on the diagonal",
        "first": "weight on the first token (CLS)",
        "identity_distance": "W_A: ‖W_A − I‖ / ‖I‖",
    }
    figure, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 3.3))
    layers = list(dict.fromkeys(layer for s in summaries for layer in s["layers"]))
    for axis, panel in zip(axes, panels):
        for summary, label in zip(summaries, labels):
            values = layer_means(summary, panel)
            xs = [layers.index(layer) for layer in values]
            axis.plot(xs, list(values.values()), marker="o", label=label)
        axis.set_xticks(range(len(layers)), [short(layer) for layer in layers], fontsize=7, rotation=45 if len(layers) > 6 else 0)
        axis.set_title(titles[panel], fontsize=9)
        axis.set_xlabel("layer")
    axes[0].legend(fontsize=7)
    figure.suptitle("attention per layer (means over heads and held-out rows)", fontsize=10)
    figure.tight_layout()
    return figure


def comparison_markdown(summaries: list[dict], labels: list[str]) -> str:
    lines = [
        "# inspect: runs side by side",
        "",
        "Means over layers and heads of each run's inspect report (per layer in compare.png).",
        "",
    ]
    rows = []
    for summary, label in zip(summaries, labels):
        cells = [label, f"`{summary['variant']}`"]
        for panel in ("entropy", "distance", "diagonal", "first", "identity_distance"):
            values = list(layer_means(summary, panel).values())
            cells.append(f"{mean(values):.3f}" if values and not math.isnan(mean(values)) else "–")
        rows.append(cells)
    header = ["run", "variant", "entropy / log(keys)", "mean distance", "diagonal", "first token (CLS)", "‖W_A − I‖/‖I‖"]
    lines += [markdown_table(header, rows), "", "![compare](compare.png)", ""]
    return "\n".join(lines)
