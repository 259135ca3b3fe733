"""How far a card's verdict can be trusted, from the reference set's cards (and RESULTS.md section 4's sizes):
the four checks of RESULTS.md's scorecard section, written as its markdown.

    python -m lit_attention.scorecard.trust results/scorecards/v1 results/gpt_scaling

1. Calibration: on the null card (`standard` against its own second seed stream) how many tasks' intervals
   hold 0, over seeds and over seeds and items.
2. Cheap against full: over every card with `--cheap-check` rows, how often the verdict a card at a quarter and
   at a half of the ladder's reference budget gives is the card's own, with a Wilson interval, beside the
   agreement chance would give (Cohen's); a budget no better than chance is flagged.
3. Small against large: in a `compare --scale` sweep, how often each smaller size's verdict on a declared
   comparison is the largest size's.
4. The literature: what published work found at scale for what the set covers, and whether the card agrees
   (by a rule stated for each claim); a claim without its card says so. Per task, how many claims it
   contradicts against how many chance would; a task past chance is flagged.

Every number here is read from the cards' scorecard.json and the sizes' comparisons.csv, which
results/recompute.py checks against the records; results/recompute/trust_check.py recounts these.
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path
from statistics import NormalDist

from lit_attention.markdown import markdown_table
from lit_attention.scorecard.against import cards_table, protocol_tasks, reference_cards

# (claim, source, card folder, rule). Rules: "not worse" (no task worse after Holm), "not worse on T" (task T not
# worse: a claim about one kind of task), "better on T" (task T's verdict better).
LITERATURE = [
    (
        "Removing W_V (`optimized`) loses little against standard attention",
        "arXiv:2403.01643",
        "optimized",
        "not worse",
    ),
    ("Removing W_K and W_V (`efficient`) loses little", "arXiv:2403.01643", "efficient", "not worse"),
    ("Super attention beats standard on vision", "arXiv:2403.01643", "super", "better on vit_digits"),
    ("W_Q can be the identity (`identity_query`)", "arXiv:2603.13381", "identity_query", "not worse"),
    ("A residual query X + f(X) does no worse than W_Q", "arXiv:2603.13381", "residual_query", "not worse"),
    (
        "The nonlinear query lowers language-modelling loss",
        "arXiv:2603.13381",
        "nonlinear_query",
        "better on lm_ladder",
    ),
    (
        "Grouped-query attention with a few key-value heads comes close to multi-head quality",
        "Ainslie et al. 2023, arXiv:2305.13245",
        "standard+kv_heads-2",
        "not worse",
    ),
    (
        "One key-value head (multi-query) costs only a little quality",
        "Shazeer 2019, arXiv:1911.02150",
        "standard+kv_heads-1",
        "not worse",
    ),
    (
        "SwiGLU beats the GELU MLP at matched parameters",
        "Shazeer 2020, arXiv:2002.05202",
        "standard+mlp-swiglu",
        "better on lm_ladder",
    ),
    (
        "Rotary positions beat learned ones",
        "Su et al. 2021, arXiv:2104.09864; the GPT-NeoX and Llama reports",
        "standard+position-rope",
        "better on lm_ladder",
    ),
    (
        "A causal language model without position encodings comes close to one with them",
        "Haviv et al. 2022, arXiv:2203.16634",
        "standard+position-none",
        "not worse on lm_ladder",
    ),
    (
        "ALiBi does as well as learned or sinusoidal positions in language modelling at the training length",
        "Press et al. 2022, arXiv:2108.12409",
        "standard+position-alibi",
        "not worse on lm_ladder",
    ),
    (
        "RMSNorm matches LayerNorm's quality at less cost",
        "Zhang and Sennrich 2019, arXiv:1910.07467",
        "standard+norm-rmsnorm",
        "not worse",
    ),
    (
        "QK-norm is neutral to helpful",
        "Henry et al. 2020, arXiv:2010.04245; Dehghani et al. 2023, arXiv:2302.05442",
        "standard+qk_norm-true",
        "not worse",
    ),
]


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for a proportion (nan, nan for n = 0)."""
    if n == 0:
        return math.nan, math.nan
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    share = successes / n
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def calibration(null: dict) -> dict:
    rows = []
    for task in null["tasks"]:
        d = task["versus_standard"]
        items = None if d["items_low"] is None else d["items_low"] <= 0 <= d["items_high"]
        rows.append({"task": task["name"], "difference": d["difference"], "low": d["low"], "high": d["high"]})
        rows[-1].update(held=d["low"] <= 0 <= d["high"], items_low=d["items_low"], items_high=d["items_high"], items_held=items)
    return {
        "rows": rows,
        "held": sum(r["held"] for r in rows),
        "items_held": sum(bool(r["items_held"]) for r in rows),
        "items_of": sum(r["items_held"] is not None for r in rows),
        "of": len(rows),
    }


def cheap_agreement(cards: dict[str, dict]) -> dict[float, dict]:
    """{share of the reference budget: {"rows": [(card, verdict there, the card's verdict)], agree, of, low, high}}."""
    found: dict[float, dict] = {}
    for name, card in cards.items():
        for row in card.get("cheap") or []:
            entry = found.setdefault(row["share_of_reference"], {"rows": []})
            entry["rows"].append((name, row["verdict"], row["reference_verdict"]))
    for entry in found.values():
        entry["agree"] = sum(mine == theirs for _, mine, theirs in entry["rows"])
        entry["of"] = len(entry["rows"])
        entry["low"], entry["high"] = wilson(entry["agree"], entry["of"])
        entry["chance"] = chance_agreement([(mine, theirs) for _, mine, theirs in entry["rows"]])
        entry["flagged"] = entry["agree"] / entry["of"] <= entry["chance"]
    return dict(sorted(found.items()))


def chance_agreement(pairs: list[tuple[str, str]]) -> float:
    """The agreement two verdicts would reach if the cheap one told nothing of the full one: the sum over verdicts
    of the product of their shares in each column (Cohen's expected agreement). A budget whose agreement is no
    higher than this disagrees as often as chance would, and is flagged for the next protocol version."""
    n = len(pairs)
    verdicts = {v for pair in pairs for v in pair}
    return sum(sum(a == v for a, _ in pairs) * sum(b == v for _, b in pairs) for v in verdicts) / (n * n)


def size_verdicts(sweep: Path) -> dict[str, dict[str, str]]:
    """{size label: {"arm − reference": verdict}} of the declared (primary) comparisons of each size's tuned table."""
    found = {}
    for folder in sorted((sweep / "sizes").iterdir(), key=lambda p: int(p.name.split(",")[0].split("=")[1])):
        with open(folder / "comparisons.csv", newline="", encoding="utf-8") as file:
            rows = [r for r in csv.DictReader(file) if r["table"] == "tuned" and r["primary"] == "True"]
        found[folder.name.split(",")[0]] = {f"{r['arm']} − {r['reference']}": r["verdict"] for r in rows}
    return found


def small_against_large(sweep: Path) -> dict[str, dict]:
    verdicts = size_verdicts(sweep)
    largest = list(verdicts)[-1]
    found = {}
    for size, mine in list(verdicts.items())[:-1]:
        rows = [(c, mine[c], verdicts[largest][c]) for c in verdicts[largest] if c in mine]
        agree = sum(a == b for _, a, b in rows)
        found[size] = {"rows": rows, "agree": agree, "of": len(rows), "largest": largest}
        found[size]["low"], found[size]["high"] = wilson(agree, len(rows))
    return found


def agreement(card: dict, rule: str) -> str:
    """A claim's rule read on its card. "not worse" (on every task it reads): disagrees where one is worse after
    Holm, else consistent (no detectable harm is not shown equivalence). "better on T": agrees where T is better,
    disagrees where it is worse, else not shown. A task the card left out is not shown."""
    verdicts = task_verdicts(card)
    read = [verdicts.get(name) for name in rule_tasks(rule, verdicts)]
    if rule.startswith("not worse"):
        return "disagrees" if "worse" in read else "consistent" if None not in read else "not shown"
    return {"better": "agrees", "worse": "disagrees"}.get(read[0], "not shown")


def task_verdicts(card: dict) -> dict[str, str]:
    """{task: its verdict against standard} of a card, in the protocol's order."""
    return {t["name"]: t["versus_standard"]["verdict"] for t in card["tasks"]}


def rule_tasks(rule: str, verdicts: dict[str, str]) -> list[str]:
    """The tasks a claim's rule reads: every task of the card for "not worse", else the one it names."""
    return list(verdicts) if rule == "not worse" else [rule.split(" on ", 1)[1]]


def literature(cards: dict[str, dict]) -> list[dict]:
    rows = []
    for claim, source, folder, rule in LITERATURE:
        card = cards.get(folder) if folder else None
        if card is None:
            said, found = "not carded in this edition", "n/a"
        else:
            said, found = verdicts_text(card), agreement(card, rule)
        rows.append({"claim": claim, "source": source, "card": folder, "rule": rule, "card_says": said, "agreement": found})
    return rows


# If a claim held here too, a task's verdict of "worse" on its card would be a false positive of a two-sided 5% test
# in one direction: at most 2.5% (Holm over the card's tasks makes it rarer still).
FALSE_WORSE = 0.025


def literature_by_task(cards: dict[str, dict]) -> list[dict]:
    """Per task, in the protocol's order: how many carded claims read it ("not worse" reads every task, "better on
    T" and "not worse on T" read T; a task the card left out is not read), how many of them it contradicts (its
    verdict is worse), and the chance of at least that many if every claim held here (binomial, FALSE_WORSE
    each). A task contradicting the literature more often than that (p < 0.05) is flagged for the next protocol
    version."""
    counts: dict[str, list[int]] = {}
    for _, _, folder, rule in LITERATURE:
        card = cards.get(folder)
        if card is None:
            continue
        verdicts = task_verdicts(card)
        for name in (name for name in rule_tasks(rule, verdicts) if name in verdicts):
            entry = counts.setdefault(name, [0, 0])
            entry[0] += 1
            entry[1] += verdicts[name] == "worse"
    order = protocol_tasks([[t["name"] for t in card["tasks"]] for card in cards.values()])
    rows = []
    for name, (n, k) in sorted(counts.items(), key=lambda item: order.index(item[0])):
        p = binomial_tail(k, n, FALSE_WORSE)
        rows.append({"task": name, "claims": n, "contradicted": k, "p": p, "flagged": p < 0.05})
    return rows


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def percent(low: float, high: float) -> str:
    return "n/a" if math.isnan(low) else f"[{low:.0%}, {high:.0%}]"


def verdicts_text(card: dict) -> str:
    """The card's verdicts in a few words: the tasks that are not "no detectable difference", then the rest."""
    said = [f"{t['versus_standard']['verdict']} on {t['name']}" for t in card["tasks"]]
    plain = [s for s in said if not s.startswith("no detectable")]
    return "; ".join(plain + ["no detectable difference " + ("elsewhere" if plain else "on any task")])


def trust_markdown(folder: Path, sweep: Path) -> str:
    found = reference_cards(folder)  # read once: the table, and the checks by folder name
    cards = {where.name: card for where, card in found}
    parts = ["**The reference set.**\n\n" + cards_table(found) + "\n"]
    null = next((card for card in cards.values() if card.get("null")), None)
    if null is not None:
        c = calibration(null)
        rows = [
            [
                r["task"],
                f"{r['difference']:+.4f}",
                f"[{r['low']:+.4f}, {r['high']:+.4f}]",
                "yes" if r["held"] else "NO",
                "n/a" if r["items_held"] is None else ("yes" if r["items_held"] else "NO"),
            ]
            for r in c["rows"]
        ]
        header = ["task (null card)", "difference", "95% interval (seeds)", "holds 0", "holds 0 (seeds and items)"]
        parts.append(
            f"**Calibration.** The null card's intervals hold 0 on {c['held']} of {c['of']} tasks over seeds and on "
            f"{c['items_held']} of {c['items_of']} over seeds and items.\n\n" + markdown_table(header, rows) + "\n"
        )
    cheap = cheap_agreement(cards)
    if cheap:
        rows = [
            [
                f"{share:.0%}",
                f"{e['agree']} of {e['of']}",
                percent(e["low"], e["high"]),
                f"{e['chance']:.0%}",
                "flagged" if e["flagged"] else "no",
                ", ".join(c for c, _, _ in e["rows"]),
            ]
            for share, e in cheap.items()
        ]
        header = ["budget (share of the reference)", "same lm_ladder verdict as the card", "95% interval (Wilson)"]
        header += ["chance agreement", "no better than chance", "cards"]
        parts.append("**Cheap against full.**\n\n" + markdown_table(header, rows) + "\n")
    small = small_against_large(sweep)
    if small:
        rows = [[size, f"{e['agree']} of {e['of']}", percent(e["low"], e["high"])] for size, e in small.items()]
        largest = next(iter(small.values()))["largest"]
        header = ["size (small against large)", f"same verdict as {largest}", "95% interval (Wilson)"]
        parts.append(f"**Small against large** ({sweep.name}).\n\n" + markdown_table(header, rows) + "\n")
    rows = [
        [r["claim"], r["source"], f"`{r['card']}`" if r["card"] else "-", r["rule"], r["card_says"], r["agreement"]]
        for r in literature(cards)
    ]
    header = ["claim at scale", "source", "card", "agreement means", "the card says", "agreement"]
    parts.append("**The literature at scale.**\n\n" + markdown_table(header, rows) + "\n")
    parts.append(
        f"**The literature, by task.** Were every claim true here too, a verdict of worse would be a false positive "
        f"(at most {FALSE_WORSE:.1%} a claim); a task that contradicts more claims than that would (p < 0.05) is "
        "flagged.\n\n" + literature_by_task_table(cards) + "\n"
    )
    return "\n".join(parts)


def literature_by_task_table(cards: dict[str, dict]) -> str:
    # p to 3 significant figures: four decimals printed a chance of 1e-05 as 0.0000, a chance of none
    rows = [
        [r["task"], str(r["claims"]), str(r["contradicted"]), f"{r['p']:.3g}", "flagged" if r["flagged"] else "no"]
        for r in literature_by_task(cards)
    ]
    header = ["task (literature)", "carded claims it reads", "it contradicts", "chance of as many (p)", "flag"]
    return markdown_table(header, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cards", type=Path, help="the folder of the reference cards (results/scorecards/v1)")
    parser.add_argument("sweep", type=Path, help="a compare --scale output with sizes/ (results/gpt_scaling)")
    args = parser.parse_args()
    print(trust_markdown(args.cards, args.sweep))


if __name__ == "__main__":
    main()
