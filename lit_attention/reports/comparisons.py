"""The comparisons of arms: paired seed by seed where the records show it, Welch's otherwise, none on
other data (validity.py); Holm-corrected over the primary family; and the table that shows them, with
the notes that say what the seeds cannot support (the exact tests' floor, intervals past a bounded
metric's range)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from lit_attention.sweep.runs import Plan
from lit_attention.stats.statistics import (
    ALPHA,
    EXACT_RELABELLINGS_MAX,
    MONTE_CARLO_DRAWS,
    Difference,
    holm,
    paired_difference,
    smallest_exact_p,
    smallest_permutation_p,
    unpaired_difference,
    verdict,
    with_holm,
)
from lit_attention.reports.tables import interval, markdown, p_value
from lit_attention.stats.validity import NO_COMMON_SEED, OTHER_DATA, UNPAIRED, Pairing, pairing, pairing_sentence


@dataclass
class Comparison:
    """`arm` against `reference`: how their runs pair, and the difference (None when not comparable)."""

    arm: str
    reference: str
    pairing: Pairing
    difference: Difference | None
    p_exact_holm: float = math.nan  # the exact p, Holm-corrected over the same primary family
    p_exact_holm_monte_carlo: bool = False  # a Monte Carlo p entered that correction


def compare_arms(
    chosen: dict[str, tuple[dict, dict]], wanted: list[tuple[str, str]], primary: list[tuple[str, str]] | None
) -> list[Comparison]:
    """The comparisons `wanted`, from `chosen` ({arm: ({seed: record}, {seed: value})}): paired where
    the records show it, Welch's where an arm's batches differ, none where its data do; Holm-corrected
    over the primary ones (every one when `primary` is None)."""
    found = []
    for arm, reference in wanted:
        if arm not in chosen or reference not in chosen:
            continue
        (arm_records, arm_values), (reference_records, reference_values) = chosen[arm], chosen[reference]
        how = pairing(arm_records, reference_records)
        if how.status == OTHER_DATA:
            difference = None
        elif how.status in (UNPAIRED, NO_COMMON_SEED):
            difference = unpaired_difference(arm_values, reference_values)
        else:
            difference = paired_difference(arm_values, reference_values)
        found.append(Comparison(arm, reference, how, difference))
    compared = [c for c in found if c.difference is not None]
    mask = None if primary is None else [(c.arm, c.reference) in primary for c in compared]
    for comparison, corrected in zip(compared, with_holm([c.difference for c in compared], mask)):
        comparison.difference = corrected
    family = [c for c in compared if c.difference.primary and not math.isnan(c.difference.p)]
    estimated = any(c.difference.p_exact_monte_carlo for c in family)
    for comparison, p in zip(family, holm([c.difference.p_exact for c in family])):
        comparison.p_exact_holm, comparison.p_exact_holm_monte_carlo = p, estimated
    return found


def wanted_comparisons(plan: Plan, baseline: str, primary: list[tuple[str, str]] | None) -> list[tuple[str, str]]:
    """Every arm against the baseline, then the primary pairs against other references."""
    wanted = [(arm, baseline) for arm in plan.arms if arm != baseline]
    return wanted + [pair for pair in primary or [] if pair not in wanted]


# comparisons.csv's columns, in order: what every table of results.md says of a comparison, at full precision.
# A table over seeds fills the first block, one over seeds and test items the second (reports/item_comparisons.py).
CSV_FIELDS = [
    "table",
    "metric",
    "arm",
    "reference",
    "paired",
    "seeds",
    "seeds_reference",
    "difference",
    "low",
    "high",
    "bootstrap_low",
    "bootstrap_high",
    "simultaneous_low",
    "simultaneous_high",
    "p",
    "p_holm",
    "p_exact",
    "p_exact_holm",
    "p_exact_monte_carlo",
    "p_exact_holm_monte_carlo",
    "primary",
    "verdict",
    "test_items",
    "seeds_only_low",
    "seeds_only_high",
    "two_way_low",
    "two_way_high",
    "item_test",
    "item_p_monte_carlo",
]


def comparison_records(comparisons: list[Comparison], table: str, metric: str, mode: str) -> list[dict]:
    """One row of comparisons.csv per comparison of a table over seeds: the numbers its markdown row shows,
    unrounded (NaN where it shows n/a), and its verdict in the table's words."""
    found = []
    for c in comparisons:
        row = {"table": table, "metric": metric, "arm": c.arm, "reference": c.reference}
        d = c.difference
        if d is None:
            found.append({**row, "verdict": "not compared: other data"})
            continue
        found.append(
            {
                **row,
                "paired": d.paired,
                "seeds": d.n,
                "seeds_reference": d.n_baseline,
                "difference": d.mean,
                "low": d.low,
                "high": d.high,
                "bootstrap_low": d.boot_low,
                "bootstrap_high": d.boot_high,
                "simultaneous_low": d.joint_low,
                "simultaneous_high": d.joint_high,
                "p": d.p,
                "p_holm": d.p_holm,
                "p_exact": d.p_exact,
                "p_exact_holm": c.p_exact_holm,
                "p_exact_monte_carlo": d.p_exact_monte_carlo,
                "p_exact_holm_monte_carlo": c.p_exact_holm_monte_carlo,
                "primary": d.primary,
                "verdict": verdict(d, mode),
            }
        )
    return found


def comparison_table(
    comparisons: list[Comparison],
    baseline: str,
    primary,
    metric: str,
    mode: str,
    where: str,
    rows: list[dict] | None = None,
    table: str = "",
) -> str:
    """The pairing lines, the note on what the columns mean, the table, and the warnings under it; the
    comparisons' rows of comparisons.csv are added to `rows` (their `table` named by `table`)."""
    if rows is not None:
        rows.extend(comparison_records(comparisons, table, metric, mode))
    differences = [c.difference for c in comparisons if c.difference is not None]
    tested = sum(d.primary and not math.isnan(d.p) for d in differences)  # what the corrections count
    pairings = {}
    for c in comparisons:
        pairings.setdefault(c.reference, {})[label(c, baseline)] = c.pairing
    lines = "".join(pairing_sentence(found, reference) for reference, found in pairings.items())
    family = (
        f"the {tested} primary comparison(s) declared with --primary; the others are exploratory: their "
        "p-values are not corrected and they get no verdict"
        if primary is not None
        else f"the {tested} comparison(s) of this table (declare a confirmatory family in advance with --primary)"
    )
    note = (
        f"Differences{where}, seed by seed where paired. 95% interval: the paired t-interval (Welch's where not "
        "paired) of one comparison on its own; bootstrap: the percentile interval of the mean difference (10,000 "
        "resamples); simultaneous: Bonferroni over the corrected family; p: the t-test's; exact p: the sign-flip "
        "test over the paired differences (a label permutation where not paired), which assumes no normality, "
        "then Holm-corrected over the same family. "
        f"The verdict uses the t-test's p corrected with Holm's method over {family}. \"No detectable "
        'difference" means the corrected test did not reject equality: the intervals show the differences '
        "still compatible with the data, not that the arms are equal.\n\n"
    )
    header = [
        "arm",
        "seeds",
        "difference",
        "95% interval",
        "bootstrap 95%",
        f"simultaneous 95% ({tested})",
        "p",
        "p (Holm)",
        "exact p",
        "exact p (Holm)",
        "verdict",
    ]
    rows = []
    for c in comparisons:
        d = c.difference
        if d is None:
            rows.append([label(c, baseline), "-", *["n/a"] * 8, "not compared: other data"])
            continue
        seeds = str(d.n) if d.paired else f"{d.n} + {d.n_baseline} (unpaired)"
        rows.append(
            [
                label(c, baseline),
                seeds,
                "n/a" if math.isnan(d.mean) else f"{d.mean:+.4f}",
                interval(d.low, d.high),
                interval(d.boot_low, d.boot_high),
                interval(d.joint_low, d.joint_high),
                p_value(d.p),
                p_value(d.p_holm),
                marked(d.p_exact, d.p_exact_monte_carlo),
                marked(c.p_exact_holm, c.p_exact_holm_monte_carlo),
                verdict(d, mode),
            ]
        )
    pairs = [(label(c, baseline), c.difference) for c in comparisons if c.difference is not None]
    notes = monte_carlo_note(comparisons) + exact_test_note(comparisons, baseline) + beyond_range_note(pairs, metric)
    return lines + "\n" + note + markdown(header, rows) + notes


def equivalence_note(comparisons: list[Comparison], margins: dict[tuple[str, str], float], baseline: str) -> str:
    """The comparisons declared with --equivalence, each read as two one-sided tests against ±margin at the
    family's level: equivalent when the simultaneous 95% interval lies inside the margin (a 90% interval
    would do for one comparison alone; the wider one keeps the family's 5%)."""
    lines = []
    for c in comparisons:
        margin = margins.get((c.arm, c.reference))
        if margin is None:
            continue
        name, d = label(c, baseline), c.difference
        if d is None or math.isnan(d.joint_low):
            why = "its runs saw other data" if d is None else "too few seeds for an interval"
            lines.append(f"- `{name}`, margin ±{margin:g}: not tested: {why}.")
            continue
        span = interval(d.joint_low, d.joint_high)
        if -margin < d.joint_low and d.joint_high < margin:
            lines.append(
                f"- `{name}`: **equivalent within ±{margin:g}**: its simultaneous 95% interval {span} lies inside the margin."
            )
        else:
            lines.append(
                f"- `{name}`: equivalence within ±{margin:g} **not shown**: its simultaneous 95% interval "
                f"{span} reaches past the margin, so differences that large are still compatible with these seeds."
            )
    if not lines:
        return ""
    return (
        "\n**Equivalence** (declared with --equivalence): an arm is equivalent to its reference when the whole "
        "simultaneous 95% interval of their difference lies within the margin fixed in advance, which rejects "
        "both one-sided hypotheses |difference| ≥ margin at the family's level.\n\n" + "\n".join(lines) + "\n"
    )


def marked(p: float, monte_carlo: bool) -> str:
    """A randomisation p, with "(MC)" when it was estimated from random arrangements rather than enumerated."""
    return p_value(p) + (" (MC)" if monte_carlo and not math.isnan(p) else "")


def monte_carlo_note(comparisons: list[Comparison]) -> str:
    """What "(MC)" in the exact-p columns means, when a row has it."""
    if not any(c.difference is not None and c.difference.p_exact_monte_carlo for c in comparisons):
        return ""
    return (
        f"\n(MC): not exact. That test has more than {EXACT_RELABELLINGS_MAX:,} sign assignments or relabellings, "
        f"so its p is a Monte Carlo estimate from {MONTE_CARLO_DRAWS:,} random ones (fixed seed), (hits + 1) / "
        f"(draws + 1), with a standard error of at most 0.0016; a Holm value marked so has such a p among its inputs.\n"
    )


def label(comparison: Comparison, baseline: str) -> str:
    return comparison.arm if comparison.reference == baseline else f"{comparison.arm} vs {comparison.reference}"


def exact_test_note(comparisons: list[Comparison], baseline: str) -> str:
    """A warning naming the primary comparisons whose exact test cannot reach Holm's first threshold
    (ALPHA over the family) at these seeds, whatever the data: their verdicts rest on the t-test alone."""
    family = [c for c in comparisons if c.difference is not None and c.difference.primary and not math.isnan(c.difference.p)]
    if not family:
        return ""
    threshold = ALPHA / len(family)
    short = [(label(c, baseline), floor) for c in family if (floor := smallest_exact(c.difference)) > threshold]
    if not short:
        return ""
    paired = max(1, math.ceil(math.log2(2 / threshold)))  # the paired seeds whose sign-flip floor is below it
    names = ", ".join(f"`{name}` ({floor:.3g})" for name, floor in short)
    return (
        f"\nThe exact tests cannot confirm {names} at these seeds: the smallest p each can reach (in brackets) is "
        f"above {threshold:.3g}, the threshold Holm's correction over {len(family)} comparison(s) sets for the "
        f"first, so a verdict of theirs rests on the t-test's assumption of normal differences (paired, "
        f"{paired} seeds would let the sign-flip test reach it).\n"
    )


def smallest_exact(difference: Difference) -> float:
    """The smallest p the comparison's exact test can give with its numbers of seeds: the sign-flip test's
    2 / 2^n, or the label permutation's at two fully separated groups."""
    if difference.paired:
        return smallest_exact_p(difference.n)
    return smallest_permutation_p(difference.n, difference.n_baseline)


# The largest difference two runs can have in a bounded metric (the last part of its name).
DIFFERENCE_BOUNDS = {"acc": 1.0, "acc_top5": 1.0, "f1_macro": 1.0, "bleu": 100.0}


def beyond_range_note(pairs: list[tuple[str, Difference]], metric: str) -> str:
    """A sentence naming the arms whose intervals reach past what a difference of a bounded metric can be:
    printed as computed, so that the width says how little these seeds pin the difference down."""
    bound = DIFFERENCE_BOUNDS.get(metric.split("/")[-1])
    if bound is None:
        return ""
    wide = [arm for arm, d in pairs if not math.isnan(d.joint_low) and (d.joint_low < -bound or d.joint_high > bound)]
    if not wide:
        return ""
    return (
        f"\nThe intervals of {', '.join(f'`{arm}`' for arm in wide)} reach past ±{bound:g}, the most a difference "
        f"in {metric} can be: they are left as computed, and say that these seeds are too few to bound that "
        "difference (add seeds), not that such values are possible.\n"
    )
