"""The comparison rows of a report: every arm against the baseline, then the primary pairs against other
references; paired where the records show the same first batch on the same data, Welch's where the batches
differ, none where the data differ; corrected over the primary family."""

from __future__ import annotations

from dataclasses import dataclass

import seed_statistics as stats


@dataclass
class Row:
    name: str  # as the report labels it: the arm, or "arm vs reference"
    result: stats.Result | None  # None: other data, not compared
    pair: tuple[str, str]  # (arm, reference)


def pairing(mine: dict[int, dict], theirs: dict[int, dict]) -> str:
    seeds = mine.keys() & theirs.keys()
    if not seeds:
        return "unpaired"
    for seed in seeds:
        a, b = mine[seed].get("data_fingerprints") or {}, theirs[seed].get("data_fingerprints") or {}
        if any(a.get(s) is not None and b.get(s) is not None and a[s] != b[s] for s in ("train", "validation", "test")):
            return "other data"
    if any(
        None not in (mine[s].get("first_batch_sha256"), theirs[s].get("first_batch_sha256"))
        and mine[s]["first_batch_sha256"] != theirs[s]["first_batch_sha256"]
        for s in seeds
    ):
        return "unpaired"
    return "paired"


def compare(chosen: dict[str, tuple[dict, dict]], arms: list[str], baseline: str, primary, mode: str) -> list[Row]:
    """`chosen`: {arm: ({seed: record}, {seed: value})} at the point each arm is scored at."""
    wanted = [(arm, baseline) for arm in arms if arm != baseline]
    wanted += [pair for pair in primary or [] if pair not in wanted]
    rows = []
    for arm, reference in wanted:
        if arm not in chosen or reference not in chosen:
            continue
        (records, values), (their_records, their_values) = chosen[arm], chosen[reference]
        how = pairing(records, their_records)
        result = (
            None
            if how == "other data"
            else (stats.paired(values, their_values) if how == "paired" else stats.welch(values, their_values))
        )
        rows.append(Row(arm if reference == baseline else f"{arm} vs {reference}", result, (arm, reference)))
    compared = [row for row in rows if row.result is not None]
    stats.correct([row.result for row in compared], [primary is None or row.pair in primary for row in compared])
    return rows
