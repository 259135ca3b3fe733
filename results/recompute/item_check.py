"""The table "Over seeds and test items" of a section, from the runs' per-example files alone.

Each run's record names a file of its per-example outcomes and the sha256 of its bytes; this module reads
the file (numpy's .npz), checks the hash, and rebuilds each row from the definitions the report states:
- the difference: the mean over the paired seeds of each seed's mean over the test items of arm minus
  reference (a language model's windows weighted by their scored tokens);
- McNemar's counts: an item is for the arm when it is right on more of the paired seeds, against it in
  the reverse case; p is the exact two-sided binomial test of the items for against 1/2 (its Holm over
  the declared family);
- the two bootstrap intervals and a Monte Carlo sign-flip p: random, so they are drawn again here with
  another generator and another way of drawing, and checked within a Monte Carlo tolerance, not to
  their printed digits.
Where the report wrote comparisons.csv, its rows of the table are checked too, unrounded: the same pairs,
the shape, the difference and an exact p to float rounding, the test's words, the intervals within the
same Monte Carlo tolerance.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import math
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

import markdown_tables as markdown
import seed_statistics as stats
from comparison_rows import Row
from printed_numbers import Checker, half_unit, numbers_in

HEADER = "seeds × test items"
RESAMPLES = 2_000  # fewer than the report's 10,000: the tolerance below allows for both draws
SIGN_FLIPS = 20_000
INTERVAL_SLACK = 0.1  # of the interval's width: about 6 Monte Carlo standard errors of the two endpoints
EXACT_ITEMS = 17  # the report enumerates every sign assignment up to this many items
REPORT_DRAWS = 10_000  # the report's Monte Carlo sign flips


def item_table(section_text: str) -> list[dict] | None:
    """The table under "### Over seeds and test items" of a comparison section, or None where it has none."""
    if "### Over seeds and test items" not in section_text:
        return None
    return next((table for table in markdown.tables(section_text) if table and HEADER in table[0]), None)


def outcomes(record: dict, directory: Path, split: str, checker: Checker, where: str) -> dict | None:
    """The record's per-example arrays of `split` ({"index", "correct", "loss", "tokens"...}), after the hash
    check; None (and a mismatch) where the file is missing or changed."""
    entry = record.get("per_example")
    if not entry:
        return None
    path = directory / entry["file"]
    data = path.read_bytes() if path.is_file() else None
    if data is None or hashlib.sha256(data).hexdigest() != entry["sha256"]:
        checker.mismatch(where, f"{path.name} {'changed' if data is not None else 'missing'}", "the file its record hashes")
        return None
    with np.load(io.BytesIO(data), allow_pickle=False) as loaded:
        return {name[len(split) + 1 :]: loaded[name] for name in loaded.files if name.startswith(f"{split}_")}


def matrices(arm: dict[int, dict], reference: dict[int, dict], measure: str):
    """(arm matrix, reference matrix, item weights, correct-count matrices or None) over the common seeds."""
    seeds = sorted(arm.keys() & reference.keys())
    runs = [arm[s] for s in seeds] + [reference[s] for s in seeds]
    if not seeds or any(not np.array_equal(r["index"], runs[0]["index"]) for r in runs):
        return None
    tokens = runs[0].get("tokens")
    weights = np.ones(len(runs[0]["index"])) if tokens is None else tokens.astype(float)
    a = np.array([arm[s][measure] for s in seeds], dtype=float)
    b = np.array([reference[s][measure] for s in seeds], dtype=float)
    counts = (a, b) if measure == "correct" else None  # McNemar counts correct answers, before any share
    if measure == "correct" and tokens is not None:  # a window's share of its targets right
        a, b = a / np.maximum(weights, 1), b / np.maximum(weights, 1)
    return a, b, weights, counts


def weighted_mean_difference(d: np.ndarray, w: np.ndarray) -> float:
    return float(np.mean((d * w).sum(axis=1) / w.sum()))


def bootstrap(d: np.ndarray, w: np.ndarray, items: bool, rng: np.random.Generator) -> tuple[float, float]:
    """Percentile 95% interval of the weighted mean difference, seeds (and items) drawn by index."""
    n_seeds, n_items = d.shape
    found = np.empty(RESAMPLES)
    for start in range(0, RESAMPLES, 250):
        size = min(250, RESAMPLES - start)
        per_item = d[rng.integers(0, n_seeds, (size, n_seeds))].mean(axis=1)  # (size, items)
        if items:
            drawn = rng.integers(0, n_items, (size, n_items))
            chosen_w = w[drawn]
            found[start : start + size] = (np.take_along_axis(per_item, drawn, axis=1) * chosen_w).sum(1) / chosen_w.sum(1)
        else:
            found[start : start + size] = (per_item * w).sum(axis=1) / w.sum()
    low, high = np.quantile(found, [0.025, 0.975])
    return float(low), float(high)


def sign_flip_p(d: np.ndarray, w: np.ndarray, rng: np.random.Generator) -> tuple[float, bool]:
    """Two-sided sign-flip p over items of each item's seed-averaged, weight-scaled difference: exact up to
    EXACT_ITEMS items (every assignment), else a Monte Carlo estimate."""
    x = d.mean(axis=0) * w / w.mean()
    if x.size <= EXACT_ITEMS:  # 2^17 assignments, inside seed_statistics' enumeration limit
        return stats.sign_flip(x)
    observed = abs(x.mean())
    tolerance = 1e-9 * np.abs(x).sum() / x.size
    # A flip's sum is x.sum() minus twice the flipped items' sum: drawn as bits, several times faster than signs.
    flipped = rng.integers(0, 2, size=(SIGN_FLIPS, x.size), dtype=np.int8).astype(float)
    hits = int(np.count_nonzero(np.abs((x.sum() - 2 * (flipped @ x)) / x.size) >= observed - tolerance))
    return (hits + 1) / (SIGN_FLIPS + 1), True


def seeds_only_distribution(d: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact bootstrap distribution over seeds only, for up to 8 seeds: each multiset of the seeds (126 for
    5) and its multinomial probability; (the resampled weighted mean differences, their probabilities)."""
    n = d.shape[0]
    per_seed = (d * w).sum(axis=1) / w.sum()
    values, weights = [], []
    for chosen in itertools.combinations_with_replacement(range(n), n):
        counts = np.bincount(chosen, minlength=n)
        values.append(float(per_seed[list(chosen)].mean()))
        weights.append(math.factorial(n) / math.prod(math.factorial(int(c)) for c in counts) / n**n)
    return np.array(values), np.array(weights)


def check_seeds_only(checker: Checker, where: str, cell: str, d: np.ndarray, w: np.ndarray, rng: np.random.Generator) -> None:
    """The interval over seeds only. With 8 seeds or fewer a resample's mean takes few values, so two Monte Carlo
    draws of a percentile can land far apart where those values are sparse (the tails): each printed end is
    checked against the exact distribution instead, in probability: the share of resamples below it, and at or
    below it, must bracket 2.5% (97.5%) within 4 Monte Carlo standard errors of the report's 10,000 draws. Past 8
    seeds, a recomputed Monte Carlo interval within its slack."""
    if d.shape[0] > 8:
        low, high = bootstrap(d, w, False, rng)
        checker.numbers(where, cell, [low, high], slack=INTERVAL_SLACK * (high - low))
        return
    values, weights = seeds_only_distribution(d, w)
    checker.checked += 2
    for printed, level in zip(numbers_in(cell), (0.025, 0.975)):
        margin = 4 * math.sqrt(level * (1 - level) / REPORT_DRAWS)
        end, rounding = float(printed), half_unit(printed, None) + 1e-12  # a printed end stands for its rounding interval
        below, at_or_below = weights[values < end - rounding].sum(), weights[values <= end + rounding].sum()
        if not (below <= level + margin and at_or_below >= level - margin):
            checker.mismatch(
                where, cell, f"an end {printed} at the exact quantiles {below:.4f} to {at_or_below:.4f}, not {level}"
            )


def check_interval(checker: Checker, where: str, cell: str, mine: tuple[float, float]) -> None:
    checker.numbers(where, cell, list(mine), slack=INTERVAL_SLACK * (mine[1] - mine[0]))


def check_items(
    rows: list[Row],
    chosen: dict,
    places: dict,
    metric: str,
    table: list[dict],
    where: str,
    checker: Checker,
    written: dict[tuple[str, str], dict] | None = None,
) -> None:
    """`rows`: the comparison rows (comparison_rows.compare); `chosen` {arm: ({seed: record}, values)} at the
    compared points; `places` {arm: {seed: the run's folder}}; `table` the printed item table; `written` its
    rows of comparisons.csv by (arm, reference), where the report wrote the file."""
    split, _, name = metric.partition("/")
    measure = {"acc": "correct", "loss": "loss"}.get(name)
    printed = {row["arm"]: row for row in table}
    rng = np.random.default_rng(20261205)
    found = {}
    for row in rows:
        if row.result is None or row.name not in printed:
            continue
        arm, reference = row.pair
        sides = []
        for side in (arm, reference):
            records = chosen[side][0]
            sides.append(
                {
                    s: o
                    for s, r in records.items()
                    if (o := outcomes(r, places[side][s], split, checker, f"{where}, {side} seed {s}"))
                }
            )
        made = matrices(*sides, measure) if measure and all(sides) else None
        if made is not None:
            found[row.name] = (row, made)
    if written is not None:
        for pair in {row.pair for row in rows if row.name in found} ^ written.keys():
            checker.mismatch(
                f"{where} (comparisons.csv), {pair[0]} vs {pair[1]}",
                "row" if pair in written else "no row",
                "a row" if pair not in written else "no comparison over items",
            )
    for label in printed.keys() - found.keys():
        checker.text(f"{where}, {label}, {HEADER}", printed[label][HEADER], "-")
    family = []
    for label, (row, (a, b, w, counts)) in found.items():
        cells, at = printed[label], f"{where}, {label}"
        d = a - b
        checker.text(f"{at}, {HEADER}", cells[HEADER], f"{d.shape[0]} × {d.shape[1]}")
        checker.numbers(f"{at}, difference", cells["difference"], [weighted_mean_difference(d, w)])
        check_seeds_only(checker, f"{at}, over seeds only", cells["over seeds only (bootstrap 95%)"], d, w, rng)
        check_interval(
            checker,
            f"{at}, over seeds and test items",
            cells["over seeds and test items (bootstrap 95%)"],
            bootstrap(d, w, True, rng),
        )
        if counts is not None:
            per_item = (counts[0] - counts[1]).sum(axis=0)
            wins, losses = int((per_item > 0).sum()), int((per_item < 0).sum())
            checker.text(f"{at}, paired test", cells["paired test over items"], f"McNemar: {wins} items for, {losses} against")
            p, monte_carlo = (scipy_stats.binomtest(wins, wins + losses, 0.5).pvalue if wins + losses else math.nan), False
        else:
            checker.text(f"{at}, paired test", cells["paired test over items"], "sign flip over items")
            p, monte_carlo = sign_flip_p(d, w, rng)
        check_p(checker, f"{at}, p", cells["p"], p, monte_carlo)
        if written is not None:
            check_written(checker, f"{at} (comparisons.csv)", written.get(row.pair), d, w, rng, (p, monte_carlo), cells)
        if row.result.primary:
            family.append((label, p, monte_carlo))
        else:
            checker.text(f"{at}, p (Holm)", cells["p (Holm)"], "exploratory")
    # Holm over the family: where a p is Monte Carlo, the printed one stands in for it (checked above).
    ps = [float(numbers_in(printed[label]["p"])[0]) if mc else p for label, p, mc in family]
    any_mc = any(mc for _, _, mc in family)
    for (label, _, _), p_holm in zip(family, stats.holm(ps)):
        cell = printed[label]["p (Holm)"]
        checker.numbers(f"{where}, {label}, p (Holm)", cell, [p_holm], significant=None if any_mc else 3)


def check_written(checker: Checker, where: str, written: dict | None, d, w, rng, p: tuple[float, bool], cells: dict) -> None:
    """One comparison's row of comparisons.csv against the recomputed numbers (see the module's note)."""
    if written is None:
        return  # counted as a missing pair by the caller
    checker.text(f"{where}, shape", f"{written['seeds']} × {written['test_items']}", f"{d.shape[0]} × {d.shape[1]}")
    checker.close(f"{where}, difference", written["difference"], weighted_mean_difference(d, w))
    checker.text(f"{where}, test", written["item_test"], cells["paired test over items"].strip())
    if p[1]:
        checker.skip()  # a Monte Carlo p: its printed cell was checked within its tolerance above
    else:
        checker.close(f"{where}, p", written["p"], p[0])
    check_seeds_only(checker, f"{where}, seeds_only", f"[{written['seeds_only_low']}, {written['seeds_only_high']}]", d, w, rng)
    low, high = bootstrap(d, w, True, rng)
    checker.numbers(
        f"{where}, two_way",
        f"[{written['two_way_low']}, {written['two_way_high']}]",
        [low, high],
        slack=INTERVAL_SLACK * (high - low),
    )


def check_p(checker: Checker, where: str, cell: str, p: float, monte_carlo: bool) -> None:
    if not monte_carlo:
        checker.numbers(where, cell, [p], significant=3)
        return
    if "(MC)" not in cell:
        checker.mismatch(where, cell, "a Monte Carlo p, marked (MC)")
        return
    # Two estimates of one p: the report's from REPORT_DRAWS draws, this one's from SIGN_FLIPS.
    slack = 4 * math.sqrt(max(p * (1 - p), 1e-4) * (1 / REPORT_DRAWS + 1 / SIGN_FLIPS)) + 2 / REPORT_DRAWS
    checker.numbers(where, cell.replace("(MC)", ""), [p], slack=slack)
