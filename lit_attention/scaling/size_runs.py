"""The scaling engine's input (fits.SizeRuns per arm and size), built either from one tuned cell's
records (`size_runs`, for compare itself) or from folders `compare` wrote, one folder per size
(`sizes_from_folders`): each arm at the grid point with the best mean validation value (over points
where every seed finished, as the report chooses), its N and C, each seed's validation and test value
there, and the point's learning rate."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

from lit_attention.scaling.fits import SizeRuns
from lit_attention.stats.selection import best_value


def point_rate(point: str | tuple) -> float | None:
    """The learning rate of a point: a label such as "lr=1e-2" or "model.init_args.lr=3e-3,warmup=10",
    or the (key, value) pairs of a grid point."""
    pairs = [part.partition("=")[::2] for part in point.split(",")] if isinstance(point, str) else point
    for key, value in pairs:
        if key.strip().split(".")[-1] == "lr":
            try:
                return float(value)
            except ValueError:
                return None
    return None


def test_value(record: dict) -> float | None:
    """The monitored metric's test value, as report.test_value reads it (not imported: report.py pulls
    in torch, which this engine never needs)."""
    return (record.get("test") or {}).get(record["monitor"].replace("val/", "test/"))


def size_runs(records: dict[int, dict], point: tuple) -> SizeRuns | None:
    """One arm at one size from its tuned point's records ({seed: record}, as selection.Cell's
    records_by_seed gives them); None without a record."""
    if not records:
        return None
    first = records[min(records)]
    return SizeRuns(
        params=float(first["params"]["non_embedding"]),
        flops=float(first["train_flops"]),
        validation={s: v for s, r in records.items() if (v := best_value(r)) is not None},
        test={s: v for s, r in records.items() if (v := test_value(r)) is not None},
        lr=point_rate(point),
    )


def tuned_rows(rows: list[dict], mode: str) -> dict[str, list[dict]]:
    """{arm: the finished rows of its tuned point}; a point where some seed did not finish takes part
    only when no point of the arm is complete."""
    by_point: dict[str, dict[str, list[dict]]] = {}
    for row in rows:
        by_point.setdefault(row["arm"], {}).setdefault(row["point"], []).append(row)
    chosen = {}
    for arm, points in by_point.items():
        complete = {p: rs for p, rs in points.items() if all(r["status"] == "finished" for r in rs)} or points
        scored = {
            p: statistics.fmean(float(r["best"]) for r in done)
            for p, rs in complete.items()
            if (done := [r for r in rs if r["status"] == "finished" and r["best"]])
        }
        if scored:
            point = (min if mode == "min" else max)(sorted(scored), key=scored.get)
            chosen[arm] = [r for r in points[point] if r["status"] == "finished" and r["best"]]
    return chosen


def sizes_from_folders(folders: list[Path]) -> tuple[dict[str, dict[str, SizeRuns]], str]:
    """({arm: {folder name: SizeRuns}}, the metric's direction "min" or "max") from compare outputs."""
    arms: dict[str, dict[str, SizeRuns]] = {}
    mode = "min"
    for folder in folders:
        record = next(Path(folder).glob("runs/**/record.json"), None)
        if record is not None:
            mode = json.loads(record.read_text())["mode"]
        with open(Path(folder) / "results.csv") as handle:
            rows = list(csv.DictReader(handle))
        for arm, chosen in tuned_rows(rows, mode).items():
            first = chosen[0]
            arms.setdefault(arm, {})[Path(folder).name] = SizeRuns(
                params=float(first["params_non_embedding"]),
                flops=float(first["train_flops"]),
                validation={int(r["seed"]): float(r["best"]) for r in chosen},
                test={int(r["seed"]): float(r["test"]) for r in chosen if r["test"]},
                lr=point_rate(first["point"]),
            )
    return arms, mode
