"""Summarise the MQAR comparisons of results/reproduce.sh: final val/acc of every variant as the
number of key-value pairs grows, as a markdown table and a plot.

    python results/mqar_summary.py            # reads results/mqar/kv_*/results.csv
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(root: Path) -> dict[int, dict[str, list[float]]]:
    """{pairs: {variant: [final val/acc of each seed]}} from every results/mqar/kv_<pairs> folder."""
    by_pairs: dict[int, dict[str, list[float]]] = {}
    for folder in sorted(root.glob("kv_*"), key=lambda p: int(p.name[3:])):
        with open(folder / "results.csv") as f:
            for row in csv.DictReader(f):
                by_pairs.setdefault(int(folder.name[3:]), {}).setdefault(row["variant"], []).append(float(row["final"]))
    return by_pairs


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "mqar"
    by_pairs = load(root)
    if not by_pairs:
        sys.exit(f"error: no {root}/kv_*/results.csv found; run `bash results/reproduce.sh mqar` first.")
    pairs = sorted(by_pairs)
    variants = list(by_pairs[pairs[0]])
    print("| variant | " + " | ".join(f"{n} pairs" for n in pairs) + " |")
    print("|---|" + "---|" * len(pairs))
    for variant in variants:
        cells = ["{:.3f} ± {:.3f}".format(*mean_std(by_pairs[n][variant])) for n in pairs]
        print(f"| {variant} | " + " | ".join(cells) + " |")

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for variant in variants:
        stats = [mean_std(by_pairs[n][variant]) for n in pairs]
        ax.errorbar(pairs, [m for m, _ in stats], yerr=[s for _, s in stats], marker="o", capsize=3, label=variant)
    ax.set_xscale("log", base=2)
    ax.set_xticks(pairs, [str(n) for n in pairs])
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("key-value pairs per sequence")
    ax.set_ylabel("final val/acc (mean ± std over seeds)")
    ax.set_title("MQAR recall as the number of pairs grows")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(root / "accuracy_vs_pairs.png", dpi=110)
    print(f"\nWrote {root / 'accuracy_vs_pairs.png'}")


if __name__ == "__main__":
    main()
