"""RESULTS.md's scorecard section (its number in SECTION) against the cards and the sizes it quotes, recounted
here without the project: the cards' numbers (scorecard.json, each checked against its records by
card_check.py), each size's declared verdicts (comparisons.csv, checked by section_check.py).

Its tables, by their first header:
- `card`: the reference set, a row a card (`variant`, or the null card's `null: standard, seeds A-B`), each
  cell a task's difference from standard, its interval and its verdict, and the multiplier's text;
- `task (null card)`: each interval of the null card, and whether it holds 0;
- `budget (share of the reference)`: how many cards' cheaper-budget verdicts are their own, with Wilson's
  interval, the agreement chance would give (Cohen's: the sum over verdicts of the two columns' shares
  multiplied) and whether the count is no better than it;
- `size (small against large)`: how many of a size's declared verdicts are the largest size's;
- `claim at scale`: each claim's agreement with its card by the rule the row states ("not worse", on every
  task or "on T": disagrees where a task it reads is worse, else consistent; "better on T": agrees, disagrees,
  or not shown where T has no detectable difference);
- `task (literature)`: per task, the carded claims of that table that read it and those it contradicts (its
  verdict is worse), the binomial chance of as many were each claim true here (2.5% a claim), and the flag.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from statistics import NormalDist

from printed_numbers import Checker, numbers_in

SECTION = "9"
SWEEP = "gpt_scaling"  # the scaled sweep the small-against-large table reads
MARK = {"better": "better", "worse": "worse", "no detectable difference": "n.d."}


def cards_by_folder(results: Path) -> dict[str, dict]:
    """{folder name: its scorecard.json} of results/scorecards/v1/*, by name."""
    return {
        path.parent.name: json.loads(path.read_text(encoding="utf-8"))
        for path in sorted((results / "scorecards" / "v1").glob("*/scorecard.json"))
    }


def task_verdicts(card: dict) -> dict[str, str]:
    return {t["name"]: t["versus_standard"]["verdict"] for t in card["tasks"]}


def cards(results: Path) -> dict[str, dict]:
    """{the row label RESULTS.md gives a card: its scorecard.json} of results/scorecards/v1/*."""
    found = {}
    for card in cards_by_folder(results).values():
        label = card["variant"] + "".join(f" with {key}={value}" for key, value in (card.get("block") or {}).items())
        if card.get("null"):
            seeds = card["null"]["seeds"]
            label = f"null: standard, seeds {seeds[0]}-{seeds[-1]}"
        found[f"`{label}`"] = card
    return found


def wilson(successes: int, n: int) -> tuple[float, float]:
    z = NormalDist().inv_cdf(0.975)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def close_numbers(where: str, cell: str, values: list[float], decimals: int, checker: Checker) -> None:
    printed = numbers_in(cell)
    checker.checked += len(values)
    if len(printed) < len(values) or any(abs(float(p) - v) > 0.5 * 10**-decimals * (1 + 1e-6) for p, v in zip(printed, values)):
        checker.mismatch(where, cell, repr([round(v, decimals) for v in values]))


def check_cards_table(table: list[dict], results: Path, where: str, checker: Checker) -> None:
    found = cards(results)
    for row in table:
        card = found.get(row["card"])
        if card is None:
            checker.mismatch(f"{where}, {row['card']}", "a card", "no such card under results/scorecards/v1")
            continue
        for task in card["tasks"]:
            cell = row.get(f"{task['name']}: difference [95%]", "")
            d = task["versus_standard"]
            close_numbers(f"{where}, {row['card']}, {task['name']}", cell, [d["difference"], d["low"], d["high"]], 4, checker)
            checker.text(f"{where}, {row['card']}, {task['name']} verdict", cell.split("]")[-1], MARK[d["verdict"]])
        names = {task["name"] for task in card["tasks"]}
        for column in row:  # a task the card left out (its family refuses the block option) says so
            if column.endswith(": difference [95%]") and column.split(":")[0] not in names:
                checker.text(f"{where}, {row['card']}, {column.split(':')[0]}", row[column], "not offered")
        ladder = next((t for t in card["tasks"] if "multipliers" in t), None)
        if ladder is not None:
            written = ladder["multipliers"]["variant"]["flops"]["text"]
            checker.text(f"{where}, {row['card']}, multiplier", row["compute multiplier (FLOPs)"], written)


def check_calibration(table: list[dict], results: Path, where: str, checker: Checker) -> None:
    null = next((c for c in cards(results).values() if c.get("null")), None)
    if null is None:
        checker.mismatch(where, "the null card's table", "no null card under results/scorecards/v1")
        return
    tasks = {t["name"]: t["versus_standard"] for t in null["tasks"]}
    for row in table:
        d = tasks[row["task (null card)"]]
        at = f"{where}, {row['task (null card)']}"
        close_numbers(at, row["difference"], [d["difference"]], 4, checker)
        close_numbers(at, row["95% interval (seeds)"], [d["low"], d["high"]], 4, checker)
        checker.text(f"{at}, holds 0", row["holds 0"], "yes" if d["low"] <= 0 <= d["high"] else "NO")
        items = "n/a" if d["items_low"] is None else ("yes" if d["items_low"] <= 0 <= d["items_high"] else "NO")
        checker.text(f"{at}, holds 0 over items", row["holds 0 (seeds and items)"], items)


def proportion_cells(where: str, row: dict, count: str, interval: str, agree: int, n: int, checker: Checker) -> None:
    checker.text(f"{where}, count", row[count], f"{agree} of {n}")
    low, high = wilson(agree, n)
    checker.text(f"{where}, interval", row[interval], f"[{low:.0%}, {high:.0%}]")


def check_cheap(table: list[dict], results: Path, where: str, checker: Checker) -> None:
    by_share: dict[str, list[tuple[str, bool, tuple[str, str]]]] = {}
    for name, card in cards(results).items():
        for row in card.get("cheap") or []:
            same = row["verdict"] == row["reference_verdict"]
            pair = (row["verdict"], row["reference_verdict"])
            by_share.setdefault(f"{row['share_of_reference']:.0%}", []).append((name, same, pair))
    for row in table:
        rows = by_share.get(row["budget (share of the reference)"], [])
        at = f"{where}, {row['budget (share of the reference)']}"
        agree = sum(same for _, same, _ in rows)
        proportion_cells(at, row, "same lm_ladder verdict as the card", "95% interval (Wilson)", agree, len(rows), checker)
        pairs = [pair for _, _, pair in rows]
        verdicts = {v for pair in pairs for v in pair}
        chance = sum(sum(a == v for a, _ in pairs) * sum(b == v for _, b in pairs) for v in verdicts) / len(pairs) ** 2
        checker.text(f"{at}, chance", row["chance agreement"], f"{chance:.0%}")
        checker.text(f"{at}, flag", row["no better than chance"], "flagged" if agree / len(rows) <= chance else "no")


def size_verdicts(results: Path) -> dict[str, dict[str, str]]:
    found = {}
    folders = sorted((results / SWEEP / "sizes").iterdir(), key=lambda p: int(p.name.split(",")[0].split("=")[1]))
    for folder in folders:
        with open(folder / "comparisons.csv", newline="", encoding="utf-8") as file:
            rows = [r for r in csv.DictReader(file) if r["table"] == "tuned" and r["primary"] == "True"]
        found[folder.name.split(",")[0]] = {(r["arm"], r["reference"]): r["verdict"] for r in rows}
    return found


def check_small_large(table: list[dict], results: Path, where: str, checker: Checker) -> None:
    verdicts = size_verdicts(results)
    largest = verdicts[list(verdicts)[-1]]
    for row in table:
        mine = verdicts.get(row["size (small against large)"], {})
        agree = sum(mine.get(c) == v for c, v in largest.items())
        column = next(c for c in row if c.startswith("same verdict as "))
        proportion_cells(
            f"{where}, {row['size (small against large)']}", row, column, "95% interval (Wilson)", agree, len(largest), checker
        )


def check_literature(table: list[dict], results: Path, where: str, checker: Checker) -> None:
    by_folder = cards_by_folder(results)
    for row in table:
        folder = row["card"].strip("`")
        card = by_folder.get(folder)
        at = f"{where}, {row['claim at scale'][:40]}"
        if card is None:
            checker.text(at, row["agreement"], "n/a")
            continue
        verdicts = task_verdicts(card)
        rule = row["agreement means"]
        read = [verdicts.get(name) for name in tasks_read(rule, verdicts)]
        if rule.startswith("not worse"):  # no detectable harm is consistent with the claim, not a proof of it
            expected = "disagrees" if "worse" in read else "consistent" if None not in read else "not shown"
        else:
            expected = {"better": "agrees", "worse": "disagrees"}.get(read[0], "not shown")
        checker.text(at, row["agreement"], expected)


def tasks_read(rule: str, verdicts: dict[str, str]) -> list[str]:
    """ "not worse" reads every task of the card; "not worse on T" and "better on T" read T."""
    return list(verdicts) if rule == "not worse" else [rule.split(" on ", 1)[1]]


FALSE_WORSE = 0.025  # the most a false "worse" happens on a task, were a claim true here too


def check_literature_by_task(table: list[dict], claims: list[dict], results: Path, where: str, checker: Checker) -> None:
    """Each task's count of the carded claims it reads and contradicts, from `claims` (the section's claim table,
    checked by check_literature) and the cards; the binomial chance of as many contradictions, and the flag at
    p < 0.05."""
    by_folder = cards_by_folder(results)
    counts: dict[str, list[int]] = {}
    for claim in claims:
        card = by_folder.get(claim["card"].strip("`"))
        if card is None:
            continue
        verdicts = task_verdicts(card)
        rule = claim["agreement means"]
        for name in (name for name in tasks_read(rule, verdicts) if name in verdicts):  # a left-out task is not read
            n_k = counts.setdefault(name, [0, 0])
            n_k[0], n_k[1] = n_k[0] + 1, n_k[1] + (verdicts[name] == "worse")
    for row in table:
        n, k = counts.get(row["task (literature)"], [0, 0])
        at = f"{where}, {row['task (literature)']}"
        checker.text(f"{at}, claims", row["carded claims it reads"], str(n))
        checker.text(f"{at}, contradicted", row["it contradicts"], str(k))
        p = sum(math.comb(n, i) * FALSE_WORSE**i * (1 - FALSE_WORSE) ** (n - i) for i in range(k, n + 1))
        checker.text(f"{at}, p", row["chance of as many (p)"], f"{p:.3g}")  # 3 significant figures, as trust.py prints it
        checker.text(f"{at}, flag", row["flag"], "flagged" if p < 0.05 else "no")
    if {row["task (literature)"] for row in table} != counts.keys():
        checker.mismatch(where, "its tasks", f"the tasks the carded claims read: {sorted(counts)}")


RULES = {
    "card": check_cards_table,
    "task (null card)": check_calibration,
    "budget (share of the reference)": check_cheap,
    "size (small against large)": check_small_large,
    "claim at scale": check_literature,
}
