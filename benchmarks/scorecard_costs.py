"""What a scorecard cost, from its runs' records: per task, the runs' wall time inside `fit` by arm (the
baseline's `standard` runs, and the runs a card trains for its variant: the variant and its control), and the
fixed cost of a run inside `fit` (its wall time minus the time of its optimizer steps: data, validation,
checkpoints, test and the record), with the machine the records name.

    .venv/bin/python benchmarks/scorecard_costs.py results/scorecards/v1/nonlinear_query

A run's process start (the fork from compare and the command line's parsing) is not in its record, so the
totals are of `fit` alone; the card's own wall time is the sum plus that start-up per run.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def costs(card: Path) -> tuple[list[list[str]], dict]:
    rows, machines, totals = [], set(), {"standard": 0.0, "card": 0.0}
    for folder in json.loads((card / "scorecard.json").read_text())["commands"]:
        walls = {"standard": [], "card": []}
        fixed = []
        for path in sorted((card / folder).glob("runs/**/record.json")):
            record = json.loads(path.read_text())
            arm = (record.get("settings") or {}).get("arm", record["variant"])
            # A null card's second seed stream (`<folder>@null`) is its own runs, though their arm is standard.
            side = "standard" if arm == "standard" and not folder.endswith("@null") else "card"
            walls[side].append(record["wall_seconds"])
            fixed.append(record["wall_seconds"] - record["train_seconds"])
            provenance = record["provenance"]
            machines.add(f"{provenance.get('cpu')}, {provenance.get('threads')} threads")
        for side in totals:
            totals[side] += sum(walls[side])
        rows.append(
            [
                folder,
                f"{len(walls['standard'])}: {sum(walls['standard']) / 60:.1f} min",
                f"{len(walls['card'])}: {sum(walls['card']) / 60:.1f} min",
                f"{statistics.median(fixed):.1f} s",
            ]
        )
    return rows, {"totals": totals, "machines": sorted(machines)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("card", type=Path, help="a scorecard's folder (its scorecard.json and compare folders)")
    args = parser.parse_args()
    rows, summary = costs(args.card)
    print("| folder | standard runs: wall in fit | variant and control runs: wall in fit | fixed cost per run (median) |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    totals = summary["totals"]
    print(
        f"\nIn all: the baseline's standard runs {totals['standard'] / 60:.1f} min, the card's own runs "
        f"{totals['card'] / 60:.1f} min of wall time inside fit, on {'; '.join(summary['machines'])}."
    )


if __name__ == "__main__":
    main()
