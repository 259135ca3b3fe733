"""`inspect`'s outputs from its summary: PNG figures (matplotlib, Agg), inspect.md, and the same
scalars and figures in a TensorBoard folder of the report's own (`<output>/tensorboard`)."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from lit_attention.markdown import markdown_table

ATTENTION_LABELS = {
    "entropy": "entropy / log(keys)",
    "distance": "mean attention distance",
    "diagonal": "weight on the diagonal",
    "first": "weight on the first token",
    "above_diagonal": "weight above the diagonal",
}


def pyplot():
    import logging

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Tick labels in math text make it look for fonts this installation may lack, one warning per font.
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    return plt


def short(layer: str) -> str:
    """`blocks.0.attn` -> `0`, `decoder.1.cross_attn` -> `dec 1 cross`: labels that fit under an axis."""
    parts = layer.split(".")
    group = {"blocks": "", "encoder": "enc ", "decoder": "dec "}.get(parts[0], parts[0] + " ")
    kind = {"attn": "", "cross_attn": " cross"}.get(parts[-1], " " + parts[-1])
    return f"{group}{'.'.join(parts[1:-1])}{kind}".strip()


def batches(summary: dict) -> str:
    count = summary["batches"]
    return f"{count} held-out batch" + ("" if count == 1 else "es")


def first_label(summary: dict) -> str:
    return "weight on the CLS token" if summary.get("cls") else ATTENTION_LABELS["first"]


# ------------------------------------------------------------------ figures


def attention_figure(summary: dict):
    """Per layer and head: entropy, distance, diagonal and first-token (CLS) weight; dots are heads."""
    plt = pyplot()
    layers = list(summary["layers"])
    names = ("entropy", "distance", "diagonal", "first")
    figure, axes = plt.subplots(1, len(names), figsize=(3.4 * len(names), 3.2))
    for axis, name in zip(axes, names):
        for x, layer in enumerate(layers):
            values = summary["layers"][layer]["attention"][name]
            axis.scatter([x] * len(values), values, s=14, alpha=0.7, color="tab:blue")
            finite = [v for v in values if not math.isnan(v)]
            if finite:
                axis.plot([x - 0.3, x + 0.3], [sum(finite) / len(finite)] * 2, color="black", lw=1)
        axis.set_xticks(range(len(layers)), [short(layer) for layer in layers], rotation=45 if len(layers) > 6 else 0, fontsize=8)
        axis.set_xlabel("layer")
        axis.set_title(first_label(summary) if name == "first" else ATTENTION_LABELS[name], fontsize=9)
        if name != "distance":
            axis.set_ylim(-0.03, 1.03)
    unit = "patches" if summary.get("grid") else "positions"
    axes[1].set_ylabel(unit)
    figure.suptitle(f"{summary['run']}: attention on {batches(summary)} (dots: heads, bar: mean)", fontsize=10)
    figure.tight_layout()
    return figure


def maps_figure(summary: dict, maps: dict[str, torch.Tensor]):
    """Head-averaged mean attention map of every layer (log colour scale; masked entries white)."""
    plt = pyplot()
    from matplotlib import colormaps
    from matplotlib.colors import LogNorm

    colours = colormaps["viridis"].with_extremes(bad="white")  # log(0): masked entries
    layers = list(maps)
    columns = min(4, len(layers))
    rows = math.ceil(len(layers) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(3.0 * columns, 2.8 * rows), squeeze=False)
    for axis in axes.flat[len(layers) :]:
        axis.axis("off")
    shown = None
    for axis, layer in zip(axes.flat, layers):
        values = maps[layer].mean(dim=0).numpy()
        shown = axis.imshow(values, norm=LogNorm(vmin=1e-4, vmax=1.0, clip=True), cmap=colours, interpolation="nearest")
        axis.set_title(layer, fontsize=8)
        axis.set_xlabel("key", fontsize=7)
        axis.set_ylabel("query", fontsize=7)
    figure.colorbar(shown, ax=axes.ravel().tolist(), label="mean weight (log)")
    figure.suptitle(f"{summary['run']}: mean attention maps (average over heads and held-out rows)", fontsize=10)
    return figure


def value_mix_figure(summary: dict, matrices: dict[str, torch.Tensor]):
    """Each layer's W_A as used (top), its bandedness and its singular values (bottom)."""
    plt = pyplot()
    layers = list(matrices)
    figure, axes = plt.subplots(2, max(len(layers), 2), figsize=(3.0 * max(len(layers), 2), 6.0), squeeze=False)
    for axis, layer in zip(axes[0], layers):
        values = matrices[layer].numpy()
        bound = float(abs(values).max()) or 1.0
        shown = axis.imshow(values, cmap="RdBu_r", vmin=-bound, vmax=bound, interpolation="nearest")
        report = summary["layers"][layer]["value_mix"]
        axis.set_title(f"{layer}: ‖W_A−I‖/‖I‖={report['identity_distance']:.2f}", fontsize=8)
        figure.colorbar(shown, ax=axis, fraction=0.046)
    for axis in axes[0][len(layers) :]:
        axis.axis("off")
    band, spectrum = axes[1][0], axes[1][1]
    for layer in layers:
        report = summary["layers"][layer]["value_mix"]
        widths = [int(k) for k in report["band_mass"]]
        band.plot(widths, list(report["band_mass"].values()), marker="o", label=f"{short(layer)}: |i−j| ≤ k")
        if "patch_band_mass" in report:
            widths = [int(k) for k in report["patch_band_mass"]]
            band.plot(widths, list(report["patch_band_mass"].values()), marker="s", ls="--", label=f"{short(layer)}: patches ≤ k")
        values = report["singular_values"]
        spectrum.plot(range(1, len(values) + 1), values, label=short(layer) or layer)
    band.set_xscale("symlog", linthresh=1)
    ticks = [int(k) for k in summary["layers"][layers[0]]["value_mix"]["band_mass"]] if layers else []
    band.set_xticks(ticks, [str(k) for k in ticks])
    band.set_xlabel("k")
    band.set_ylabel("share of Σ|W_A| within distance k")
    band.set_ylim(0, 1.03)
    band.legend(fontsize=6)
    spectrum.set_xlabel("index")
    spectrum.set_ylabel("singular value of W_A")
    spectrum.legend(fontsize=6)
    for axis in axes[1][2:]:
        axis.axis("off")
    figure.suptitle(f"{summary['run']}: W_A (value mixing over positions)", fontsize=10)
    figure.tight_layout()
    return figure


def spectra_figure(summary: dict):
    """Normalised singular values (σ / σ_max) of each kept projection and per-head product, per layer."""
    plt = pyplot()
    kinds = []
    for layer in summary["layers"].values():
        kinds += [k for k in layer["projections"] if k not in kinds]
    figure, axes = plt.subplots(1, len(kinds), figsize=(3.2 * len(kinds), 3.2), squeeze=False)
    for axis, kind in zip(axes[0], kinds):
        for index, (layer, report) in enumerate(summary["layers"].items()):
            if kind not in report["projections"]:
                continue
            values = report["projections"][kind]["singular_values"]
            per_head = values if values and isinstance(values[0], list) else [values]
            for i, head in enumerate(per_head):  # one colour per layer, a line per head
                top = head[0] or 1.0
                axis.semilogy(
                    range(1, len(head) + 1),
                    [v / top for v in head],
                    lw=1,
                    alpha=0.8,
                    color=f"C{index % 10}",
                    label=short(layer) or layer if i == 0 else None,
                )
        axis.set_ylim(1e-4, 1.5)
        axis.set_title(kind.replace("ᵀ", "^T") + (" (each head)" if ",i" in kind else ""), fontsize=9)
        axis.set_xlabel("index")
        axis.legend(fontsize=6)
    axes[0][0].set_ylabel("σ / σ_max")
    figure.suptitle(f"{summary['run']}: singular value spectra of the kept projections", fontsize=10)
    figure.tight_layout()
    return figure


def query_figure(summary: dict):
    plt = pyplot()
    ratios = {layer: r["query_ratio"] for layer, r in summary["layers"].items() if r.get("query_ratio") is not None}
    figure, axis = plt.subplots(figsize=(4.0, 3.0))
    axis.bar(range(len(ratios)), list(ratios.values()))
    axis.set_xticks(range(len(ratios)), [short(layer) for layer in ratios], fontsize=8)
    axis.set_xlabel("layer")
    axis.set_ylabel("‖f(X)‖ / ‖X‖")
    axis.set_title(f"{summary['run']}: size of the nonlinear query's f", fontsize=9)
    figure.tight_layout()
    return figure


def cka_figure(summary: dict):
    plt = pyplot()
    cka = summary["cka"]
    figure, axis = plt.subplots(figsize=(1.2 + 0.45 * len(cka["columns"]), 1.0 + 0.45 * len(cka["rows"])))
    shown = axis.imshow(cka["values"], vmin=0, vmax=1, cmap="magma")
    axis.set_xticks(range(len(cka["columns"])), cka["columns"], rotation=90, fontsize=7)
    axis.set_yticks(range(len(cka["rows"])), cka["rows"], fontsize=7)
    axis.set_xlabel(cka["other"])
    axis.set_ylabel(summary["run"])
    figure.colorbar(shown, ax=axis, label="linear CKA")
    figure.tight_layout()
    return figure


# ------------------------------------------------------------------ writing


def write_report(summary: dict, maps: dict, matrices: dict, output: Path, writer=None) -> Path:
    """Every figure as a PNG in `output`, inspect.md beside them, and (with a SummaryWriter) the same to TensorBoard."""
    plt = pyplot()
    figures = {"attention.png": attention_figure(summary), "attention_maps.png": maps_figure(summary, maps)}
    if matrices:
        figures["value_mix.png"] = value_mix_figure(summary, matrices)
    if any(r["projections"] for r in summary["layers"].values()):
        figures["spectra.png"] = spectra_figure(summary)
    if any(r.get("query_ratio") is not None for r in summary["layers"].values()):
        figures["query.png"] = query_figure(summary)
    if summary.get("cka"):
        figures["cka.png"] = cka_figure(summary)
    for name, figure in figures.items():
        figure.savefig(output / name, dpi=110)
        plt.close(figure)
        if writer is not None:  # the PNG itself: drawing a figure twice costs more than reading it back
            image = plt.imread(output / name)[..., :3]
            writer.add_image(f"inspect/{name.removesuffix('.png')}", image, summary["step"], dataformats="HWC")
    if writer is not None:
        for tag, value in scalars(summary).items():
            writer.add_scalar(tag, value, summary["step"])
        writer.flush()
    path = output / "inspect.md"
    path.write_text(markdown(summary, list(figures)))
    return path


def scalars(summary: dict) -> dict[str, float]:
    """The report's scalars by TensorBoard tag: inspect/<layer>/<measure>[/head_<i>]."""
    found = {}
    for layer, report in summary["layers"].items():
        for name, values in report["attention"].items():
            for i, value in enumerate(values):
                if not math.isnan(value):
                    found[f"inspect/{layer}/{name}/head_{i}"] = value
        mix = report.get("value_mix")
        if mix:
            found[f"inspect/{layer}/value_mix/identity_distance"] = mix["identity_distance"]
            found[f"inspect/{layer}/value_mix/effective_rank"] = mix["effective_rank"]
            for k, share in mix["band_mass"].items():
                found[f"inspect/{layer}/value_mix/band_mass_k{k}"] = share
        for kind, spectrum in report["projections"].items():
            ranks = spectrum["effective_rank"]
            found[f"inspect/{layer}/effective_rank/{kind}"] = sum(ranks) / len(ranks) if isinstance(ranks, list) else ranks
        if report.get("query_ratio") is not None:
            found[f"inspect/{layer}/query_ratio"] = report["query_ratio"]
    return found


def number(value, digits: int = 3) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def mean(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else math.nan


def markdown(summary: dict, figures: list[str]) -> str:
    layers = summary["layers"]
    unit = "patches" if summary.get("grid") else "positions"
    lines = [
        f"# inspect: {summary['run']}",
        "",
        f"Variant `{summary['variant']}` ({summary['task']}), checkpoint `{summary['checkpoint']}` at step "
        f"{summary['step']}; measured on {batches(summary)} (validation split).",
        "",
        "## Attention patterns",
        "",
        f"Means over heads (per head in attention.png); distance in {unit}"
        + (", CLS token left out" if summary.get("cls") else "")
        + ".",
        "",
        markdown_table(
            [
                "layer",
                "entropy / log(keys)",
                "mean distance",
                "diagonal",
                first_label(summary).removeprefix("weight on the "),
                "above the diagonal",
            ],
            [
                [
                    layer,
                    number(mean(r["attention"]["entropy"])),
                    number(mean(r["attention"]["distance"]), 2),
                    number(mean(r["attention"]["diagonal"])),
                    number(mean(r["attention"]["first"])),
                    number(mean(r["attention"]["above_diagonal"])),
                ]
                for layer, r in layers.items()
            ],
        ),
    ]
    lines += ["", "![attention](attention.png)", "", "![attention maps](attention_maps.png)", ""]
    mixing = {layer: r["value_mix"] for layer, r in layers.items() if r.get("value_mix")}
    if mixing:
        widths = list(next(iter(mixing.values()))["band_mass"])
        patch = "patch_band_mass" in next(iter(mixing.values()))
        lines += [
            "## W_A",
            "",
            "W_A as the forward uses it (lower-triangular in a causal layer). Bandedness: share of Σ|W_A| "
            "within |i − j| ≤ k"
            + ("; by patch (Chebyshev distance ≤ k: a (2k+1)² neighbourhood, CLS left out)" if patch else "")
            + f". Effective rank: singular values above 1% of the largest (of {next(iter(mixing.values()))['size']}).",
            "",
        ]
        header = [
            "layer",
            "‖W_A − I‖/‖I‖",
            *(f"k≤{k}" for k in widths),
            *(["patches k≤1", "k≤2"] if patch else []),
            "above the diagonal",
            "effective rank",
        ]
        rows = []
        for layer, mix in mixing.items():
            cells = [layer, number(mix["identity_distance"])] + [number(v) for v in mix["band_mass"].values()]
            if patch:
                cells += [number(mix["patch_band_mass"].get(k, mix["patch_band_mass"].get(str(k)))) for k in (1, 2)]
            rows.append(cells + [number(mix["mass_above_diagonal"]), str(mix["effective_rank"])])
        lines += [markdown_table(header, rows), "", "![W_A](value_mix.png)", ""]
    if "spectra.png" in figures:
        kinds = []
        for report in layers.values():
            kinds += [k for k in report["projections"] if k not in kinds]
        grouped = sorted({r["kv_heads"] for r in layers.values() if r.get("kv_heads", r["heads"]) < r["heads"]})
        shared = (
            (
                f" Key/value heads are shared (kv_heads = {', '.join(map(str, grouped))}): W_K and W_V are "
                "d × kv_heads·d_h, and query head i's products use key/value head i // (heads / kv_heads)."
            )
            if grouped
            else ""
        )
        lines += [
            "## Kept projections",
            "",
            "Effective rank (singular values above 1% of the largest) of each matrix, "
            f"and per head (mean over heads) of the products; d = {summary['dim']}, d_h = {summary['head_dim']}.{shared}",
            "",
        ]
        rows = []
        for layer, report in layers.items():
            cells = [layer]
            for kind in kinds:
                rank = report["projections"].get(kind, {}).get("effective_rank")
                cells.append(
                    "–" if rank is None else number(mean([float(r) for r in rank]), 1) if isinstance(rank, list) else str(rank)
                )
            rows.append(cells)
        lines += [markdown_table(["layer", *kinds], rows), "", "![spectra](spectra.png)", ""]
    if "query.png" in figures:
        lines += [
            "## Nonlinear query",
            "",
            "‖f(X)‖ / ‖X‖ over the held-out positions (Q = X + f(X)).",
            "",
            markdown_table(
                ["layer", "‖f(X)‖ / ‖X‖"],
                [[layer, number(r["query_ratio"])] for layer, r in layers.items() if r.get("query_ratio") is not None],
            ),
            "",
            "![query](query.png)",
            "",
        ]
    if summary.get("cka"):
        cka = summary["cka"]
        lines += [
            "## Representations",
            "",
            f"Linear CKA between this run's block outputs (rows) and those of "
            f"`{cka['other']}` (columns) on the same held-out positions.",
            "",
            markdown_table(
                ["layer", *cka["columns"]], [[row, *map(number, values)] for row, values in zip(cka["rows"], cka["values"])]
            ),
            "",
            "![CKA](cka.png)",
            "",
        ]
    return "\n".join(lines)
