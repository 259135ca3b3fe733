"""The comparison over seeds and test items, under the table over seeds (comparisons.py): for each
comparison whose runs kept per-example outcomes (training/outcome_files.py), the difference with a
bootstrap interval over seeds only and one over seeds and test items, and a paired test over items
(item_statistics.py), Holm-corrected over the same primary family as the table above. Records without
outcomes (runs of earlier versions) get one sentence saying that the intervals are over seeds only."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from lit_attention.errors import ConfigError
from lit_attention.reports.comparisons import Comparison, label, marked
from lit_attention.stats.item_statistics import (
    ITEM_DRAWS,
    RESAMPLES,
    item_sign_flip_test,
    mcnemar_test,
    mean_difference,
    two_way_bootstrap,
)
from lit_attention.stats.statistics import holm
from lit_attention.reports.tables import interval, markdown, p_value
from lit_attention.stats.validity import NO_COMMON_SEED, OTHER_DATA, UNPAIRED
from lit_attention.training.outcome_files import OutcomeFileError, read_outcomes

NO_OUTCOMES = (
    "\nEvery interval above is over seeds only: each seed was scored on the same test items, and these "
    "records keep no per-example outcomes (runs of later versions do), so none can also cover the test "
    "items' own variation.\n"
)
# The per-item outcome that makes up each metric the section can decompose: accuracy, item by item the
# share of its targets right (a classified item: 0 or 1), and the loss.
DECOMPOSED = {"acc": "correct", "loss": "loss"}


def outcomes_of(record: dict, directory: Path | None, split: str) -> dict[str, np.ndarray] | None:
    """A run's per-example outcomes of `split` ("index", "correct", "loss", "tokens"...), or None when its
    record names no such file (an older run) or the file holds no outcomes of that split."""
    entry = record.get("per_example")
    if not entry or directory is None:
        return None
    try:
        arrays = read_outcomes(directory, entry)
    except OutcomeFileError as error:
        raise ConfigError(f"{error} Rerun that run (delete its folder) or restore the file.") from None
    prefix = f"{split}_"
    found = {name[len(prefix) :]: values for name, values in arrays.items() if name.startswith(prefix)}
    return found or None


def matrices(arm: dict[int, dict], reference: dict[int, dict], measure: str) -> tuple | str:
    """(variant matrix, reference matrix, item weights, seeds, counts matrices for McNemar) over the seeds
    both arms kept outcomes for, or the reason no comparison over items can be made."""
    seeds = sorted(arm.keys() & reference.keys())
    if not seeds:
        return "no seed of both arms kept per-example outcomes"
    runs = [arm[s] for s in seeds] + [reference[s] for s in seeds]
    if measure not in runs[0]:
        return f"the outcomes hold no per-item {measure}"
    if any(not np.array_equal(run["index"], runs[0]["index"]) or measure not in run for run in runs):
        return "their runs scored different test items"
    tokens = runs[0].get("tokens")
    if tokens is not None and any(not np.array_equal(run.get("tokens"), tokens) for run in runs):
        return "their runs scored different targets"
    weights = None if tokens is None else tokens.astype(float)

    def stack(which: dict[int, dict], name: str) -> np.ndarray:
        return np.stack([which[s][name].astype(float) for s in seeds])

    values = {name: stack(side, measure) for name, side in (("arm", arm), ("reference", reference))}
    if measure == "correct" and weights is not None:  # a window's share right, weighted by its targets
        values = {name: matrix / np.maximum(weights, 1) for name, matrix in values.items()}
    counts = (stack(arm, "correct"), stack(reference, "correct")) if measure == "correct" else None
    return values["arm"], values["reference"], weights, seeds, counts


def item_section(
    comparisons: list[Comparison],
    records: dict[str, dict[int, dict]],
    places: dict[str, dict[int, Path]],
    metric: str,
    primary,
    baseline: str,
    csv_rows: list[dict] | None = None,
    table: str = "",
) -> str:
    """The section under the comparison table of `metric` ("test/acc", "test/loss", ...): `records`
    {arm: {seed: record}} at the compared points, `places` {arm: {seed: the run's directory}}. Its rows of
    comparisons.csv go to `csv_rows`, as `table` over seeds and test items."""
    split, _, name = metric.partition("/")
    compared = [c for c in comparisons if c.difference is not None]
    outcomes = {
        arm: {
            seed: found
            for seed, record in by_seed.items()
            if (found := outcomes_of(record, places.get(arm, {}).get(seed), split)) is not None
        }
        for arm, by_seed in records.items()
    }
    if not any(outcomes.get(c.arm) and outcomes.get(c.reference) for c in compared):
        return NO_OUTCOMES
    measure = DECOMPOSED.get(name)
    if measure is None:
        return (
            f"\nEvery interval above is over seeds only: {metric} is not a mean over test items, so the runs' "
            "per-example outcomes cannot add the items' own variation to it.\n"
        )
    found = []
    for c in compared:
        if c.pairing.status in (UNPAIRED, NO_COMMON_SEED, OTHER_DATA):
            found.append((c, "n/a: not paired seed by seed"))
            continue
        made = matrices(outcomes.get(c.arm, {}), outcomes.get(c.reference, {}), measure)
        found.append((c, made if isinstance(made, str) else item_row(*made)))
    tested = [(c, row) for c, row in found if not isinstance(row, str) and c.difference.primary and not math.isnan(row["p"])]
    corrected = dict(zip((id(c) for c, _ in tested), holm([row["p"] for _, row in tested])))
    rows = []
    for c, row in found:
        if csv_rows is not None:
            csv_rows.append(item_record(c, row, corrected.get(id(c), math.nan), f"{table} over seeds and test items", metric))
        if isinstance(row, str):
            rows.append([label(c, baseline), "-", *["n/a"] * 5, row if row.startswith("n/a") else f"n/a: {row}"])
            continue
        rows.append(
            [
                label(c, baseline),
                f"{row['seeds']} × {row['items']}",
                f"{row['mean']:+.4f}",
                interval(*row["seeds_only"]),
                interval(*row["two_way"]),
                row["test"],
                marked(row["p"], row["monte_carlo"]),
                p_value(corrected.get(id(c), math.nan)) if c.difference.primary else "exploratory",
            ]
        )
    header = [
        "arm",
        "seeds × test items",
        "difference",
        "over seeds only (bootstrap 95%)",
        "over seeds and test items (bootstrap 95%)",
        "paired test over items",
        "p",
        "p (Holm)",
    ]
    return "\n### Over seeds and test items\n\n" + lead(measure, primary, len(tested)) + markdown(header, rows)


def item_record(c: Comparison, row: dict | str, p_holm: float, table: str, metric: str) -> dict:
    """One row of comparisons.csv for a comparison over seeds and test items (`row`: item_row's numbers, or
    why there are none)."""
    found = {"table": table, "metric": metric, "arm": c.arm, "reference": c.reference}
    if isinstance(row, str):
        return {**found, "verdict": row if row.startswith("n/a") else f"n/a: {row}"}
    return {
        **found,
        "paired": True,
        "seeds": row["seeds"],
        "test_items": row["items"],
        "difference": row["mean"],
        "seeds_only_low": row["seeds_only"][0],
        "seeds_only_high": row["seeds_only"][1],
        "two_way_low": row["two_way"][0],
        "two_way_high": row["two_way"][1],
        "item_test": row["test"],
        "p": row["p"],
        "p_holm": p_holm if c.difference.primary else math.nan,
        "item_p_monte_carlo": row["monte_carlo"],
        "primary": c.difference.primary,
        "verdict": "" if c.difference.primary else "exploratory",
    }


def item_row(variant: np.ndarray, reference: np.ndarray, weights, seeds: list[int], counts) -> dict:
    """The numbers of one comparison over seeds and items."""
    row = {
        "seeds": len(seeds),
        "items": variant.shape[1],
        "mean": mean_difference(variant, reference, weights),
        "seeds_only": two_way_bootstrap(variant, reference, weights, items=False),
        "two_way": two_way_bootstrap(variant, reference, weights),
    }
    if counts is not None:
        row["p"], wins, losses = mcnemar_test(*counts)
        row["test"], row["monte_carlo"] = f"McNemar: {wins} items for, {losses} against", False
    else:
        row["p"], row["monte_carlo"] = item_sign_flip_test(variant, reference, weights)
        row["test"] = "sign flip over items"
    return row


def lead(measure: str, primary, tested: int) -> str:
    test = (
        "McNemar's exact test on a seed-aggregated basis: an item counts for the arm when it is right on more "
        "of the paired seeds than the reference, against it in the reverse case, and a tie drops out; p is the "
        "exact binomial test of the items for against 1/2 (with one seed, McNemar's test itself)"
        if measure == "correct"
        else "the sign-flip test over items of each item's seed-averaged difference, exact up to 17 items, else "
        f"from {ITEM_DRAWS:,} random sign assignments (fixed seed), marked (MC)"
    )
    family = (
        f"the {tested} primary comparison(s) declared with --primary (the others are exploratory: uncorrected)"
        if primary is not None
        else f"the {tested} comparison(s) of this table"
    )
    return (
        "The intervals above are over seeds only: every seed was scored on the same test items, so they say how "
        "much the difference would move with other seeds on these items, not on other items drawn like them. "
        "Here, from the runs' per-example outcomes over the paired seeds that kept them, the same difference "
        f"with two bootstrap intervals ({RESAMPLES:,} resamples each): over seeds only, the items fixed, and over "
        "seeds and test items, both resampled with replacement, jointly and paired (each resample draws the "
        f"seeds and the items once, for both arms). The paired test over items is {test}; its p is Holm-"
        f"corrected over {family}. That test holds the trained runs fixed: it asks whether these runs differ "
        "on items like these, not whether other seeds would.\n\n"
    )
