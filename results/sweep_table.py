"""One table (and plot) from several `compare` outputs that differ in one setting: the final
validation metric of every variant (mean ± std over seeds) in each folder.

    python results/sweep_table.py results/mqar/accuracy_vs_pairs.png "key-value pairs" results/mqar/kv_*
    python results/sweep_table.py results/vit_digits_lr/accuracy_vs_lr.png "peak learning rate" \
        results/vit_digits_lr/lr_* results/vit_digits=4e-3

A folder's setting is what follows the last `_` of its name (`kv_8` -> 8, `lr_2e-3` -> 2e-3), or
the value given after `=` (`results/vit_digits=4e-3`, for a run at the recipe's own setting).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lit_attention.compare import mean_std, read_results  # noqa: E402


def folder_and_setting(argument: str) -> tuple[Path, float]:
    path, _, given = argument.partition("=")
    folder = Path(path)
    text = given or folder.name.rsplit("_", 1)[-1]
    try:
        return folder, float(text)
    except ValueError:
        raise SystemExit(f"error: cannot read a setting from {argument!r}; name the folder like kv_8 or write FOLDER=VALUE.") from None


def load(folder: Path) -> tuple[str, dict[str, list[float]]]:
    """(monitor, {variant: [final value of each seed]}) from a compare output folder."""
    monitor = (folder / "results.md").read_text().split("| final ", 1)[1].split(" |", 1)[0]
    return monitor, read_results(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("plot", type=Path, help="PNG to write")
    parser.add_argument("label", help="what the folders vary, for the table and the x axis")
    parser.add_argument("folders", nargs="+", help="compare output folders, each optionally FOLDER=SETTING")
    args = parser.parse_args()
    folders = [folder_and_setting(argument) for argument in args.folders]
    for folder, _ in folders:
        if not (folder / "results.csv").is_file():
            parser.exit(2, f"error: {folder}/results.csv does not exist; run the comparison first.\n")
    loaded = sorted(((setting, *load(folder)) for folder, setting in folders), key=lambda t: t[0])
    settings = [setting for setting, _, _ in loaded]
    monitor = loaded[0][1]
    variants = list(loaded[0][2])
    print(f"final {monitor}, mean ± std over seeds, by {args.label}\n")
    print("| variant | " + " | ".join(f"{s:g}" for s in settings) + " |")
    print("|---|" + "---|" * len(settings))
    for variant in variants:
        cells = ["{:.3f} ± {:.3f}".format(*mean_std(finals[variant])) if variant in finals else "n/a"
                 for _, _, finals in loaded]
        print(f"| {variant} | " + " | ".join(cells) + " |")

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for variant in variants:
        points = [(s, *mean_std(finals[variant])) for s, _, finals in loaded if variant in finals]
        ax.errorbar([p[0] for p in points], [p[1] for p in points], yerr=[p[2] for p in points],
                    marker="o", capsize=3, label=variant)
    ax.set_xscale("log", base=2)
    ax.set_xticks(settings, [f"{s:g}" for s in settings])
    ax.minorticks_off()
    ax.set_xlabel(args.label)
    ax.set_ylabel(f"final {monitor} (mean ± std over seeds)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=110)
    print(f"\nWrote {args.plot}")


if __name__ == "__main__":
    main()
