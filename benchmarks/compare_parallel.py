"""Wall time of a `compare` sweep run one at a time against the same sweep run N at a time, and of
the N-at-a-time sweep with a fresh process per run instead of runs forked from a forkserver that
imported Lightning once.

    python benchmarks/compare_parallel.py                      # make demo's sweep: every preset x 2 seeds on the digits
    python benchmarks/compare_parallel.py --parallel 2 --seeds 2 --extra --trainer.max_epochs=3

The sweeps are the same command into fresh output folders; the serial one runs each fit with all the
machine's cores, the parallel ones split them (compare gives each run cores / N threads). They run one
after another in this order: serial, parallel, parallel with --fresh-processes; the ratios are to the
serial wall time, measured in the same run.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sweep(output: Path, parallel: int, variants: str, seeds: int, extra: list[str], fresh: bool = False) -> float:
    command = [
        sys.executable,
        "-m",
        "lit_attention",
        "compare",
        "--config",
        str(ROOT / "recipes/quickstart/vit_digits.yaml"),
        "--variants",
        variants,
        "--seeds",
        str(seeds),
        "--test",
        "--parallel",
        str(parallel),
        "--output",
        str(output),
        *(["--fresh-processes"] if fresh else []),
        *extra,
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--variants", default="all", help="as compare takes them (default: all, every preset)")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument(
        "--skip-fresh", action="store_true", help="leave out the --fresh-processes sweep (a quick check that the script runs)"
    )
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="arguments for every fit")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        serial = sweep(Path(folder) / "serial", 1, args.variants, args.seeds, args.extra)
        parallel = sweep(Path(folder) / "parallel", args.parallel, args.variants, args.seeds, args.extra)
        fresh = None
        if not args.skip_fresh:
            fresh = sweep(Path(folder) / "fresh", args.parallel, args.variants, args.seeds, args.extra, fresh=True)
        serial_csv = (Path(folder) / "serial/results.csv").read_text()
        same = serial_csv == (Path(folder) / "parallel/results.csv").read_text()
        same_fresh = fresh is not None and (
            (Path(folder) / "parallel/results.csv").read_text() == (Path(folder) / "fresh/results.csv").read_text()
        )
    runs = len(list(csv.DictReader(io.StringIO(serial_csv))))  # one row per run
    print(f"{runs} runs on {os.cpu_count()} cores; load average at the end {os.getloadavg()[0]:.2f}")
    print()
    print("| sweep | wall s | ratio to serial |")
    print("|---|---|---|")
    print(f"| serial (1 at a time, {os.cpu_count()} threads each) | {serial:.0f} | 1.00 |")
    threads = max(1, (os.cpu_count() or 1) // args.parallel)
    print(f"| --parallel {args.parallel} ({threads} thread(s) each) | {parallel:.0f} | {parallel / serial:.2f} |")
    if fresh is not None:
        print(f"| --parallel {args.parallel} --fresh-processes | {fresh:.0f} | {fresh / serial:.2f} |")
    print()
    if fresh is not None:
        print(f"forked runs / fresh processes at --parallel {args.parallel}: {parallel / fresh:.2f}")
        print(f"results.csv identical, warm and fresh: {same_fresh}")
    print(f"results.csv identical, serial and parallel: {same} (another thread count may change float sums in the last bits)")


if __name__ == "__main__":
    main()
