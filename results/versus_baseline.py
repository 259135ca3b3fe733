"""Which differences exceed the seed spread: each variant's final validation metric (or `--column`)
minus the baseline's, with the standard error of that difference over seeds.

    python results/versus_baseline.py results/vit_digits
    python results/versus_baseline.py results/gpt_stdlib --extra results/gpt_stdlib_control:standard_mlp3

A difference is flagged when it is larger than twice its standard error, sqrt(s_a²/n_a + s_b²/n_b):
a rough screen with 3 seeds, not a significance test. `--extra FOLDER:NAME` adds the runs of another
comparison (e.g. a parameter-matched control) under a new name.
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

from lit_attention.compare import mean_std, read_results
from lit_attention.errors import ConfigError


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a compare output folder")
    parser.add_argument("--baseline", default="standard")
    parser.add_argument("--extra", action="append", default=[], help="FOLDER:NAME, runs to add under NAME")
    parser.add_argument("--column", default="final", choices=["final", "best", "test"],
                        help="final or best validation value, or the best checkpoint's test value (compare --test)")
    args = parser.parse_args()
    try:
        runs = read_results(args.folder, args.column)
        for extra in args.extra:
            folder, _, name = extra.rpartition(":")
            if not folder or not name:
                parser.exit(2, f"error: --extra {extra!r} is not FOLDER:NAME.\n")
            runs[name] = [value for values in read_results(Path(folder), args.column).values() for value in values]
    except ConfigError as error:
        parser.exit(2, f"error: {error}\n")
    if args.baseline not in runs:
        parser.exit(2, f"error: baseline {args.baseline!r} is not among the variants {', '.join(runs)}.\n")
    base = runs[args.baseline]
    print(f"| variant | {args.column} (mean ± std) | Δ vs {args.baseline} | 2 × SE of Δ | beyond the seed spread |")
    print("|---|---|---|---|---|")
    for name, values in runs.items():
        mean, std = mean_std(values)
        if name == args.baseline:
            print(f"| {name} | {mean:.4f} ± {std:.4f} | | | |")
            continue
        delta = mean - mean_std(base)[0]
        se = math.sqrt(std**2 / len(values) + statistics.variance(base) / len(base))
        print(f"| {name} | {mean:.4f} ± {std:.4f} | {delta:+.4f} | {2 * se:.4f} | {'yes' if abs(delta) > 2 * se else 'no'} |")


if __name__ == "__main__":
    main()
