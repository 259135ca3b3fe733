"""scorecard.md (one page) and scorecard.png (the ladder with the variant on it) from a card's numbers
(card.py): every number here is in scorecard.json too."""

from __future__ import annotations

import math
from pathlib import Path

from lit_attention.markdown import markdown_table
from lit_attention.scorecard.against import card_label
from lit_attention.reports.tables import interval, p_value

FIGURE = "scorecard.png"


def number(value, places: int = 4) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:+.{places}f}"


def difference_cells(entry: dict | None) -> list[str]:
    if entry is None:
        return ["-", "-", "-", "-"]
    items = "n/a" if entry["items_low"] is None else interval(entry["items_low"], entry["items_high"])
    return [number(entry["difference"]), interval(entry["low"], entry["high"]), items, p_value(entry.get("p_holm", math.nan))]


def card_markdown(card: dict) -> str:
    protocol = card["protocol"]
    provenance = card["provenance"]
    rows = []
    for task in card["tasks"]:
        versus = task["versus_standard"]
        rows.append(
            [
                task["name"],
                task["metric"],
                f"{task['means']['variant']:.4f}",
                f"{task['means']['standard']:.4f}",
                f"{task['floor']:.3f} ({task['floor_label']}){'' if task['standard_clears_floor'] else ' NOT CLEARED'}",
                *difference_cells(versus),
                f"±{task['detectable']:.4f}" if not math.isnan(task["detectable"]) else "n/a",
                versus["verdict"],
                *difference_cells(task.get("versus_control"))[:3],
            ]
        )
    level = f"{card['confidence']:.0%}"
    header = [
        "task",
        "metric",
        "variant",
        "standard",
        "floor",
        "difference vs standard",
        f"{level} interval (seeds)",
        f"{level} interval (seeds and items)",
        "p (Holm, tasks)",
        f"smallest detectable ({card['power']:.0%} power)",
        "verdict",
        "difference vs control",
        f"{level} interval (seeds)",
        f"{level} interval (seeds and items)",
    ]
    null = card.get("null")
    parts = [
        "# Scorecard: the null card (`standard` against itself)\n" if null else f"# Scorecard: `{card_label(card)}`\n",
        *([not_offered_line(card)] if card.get("not_offered") else []),
        f"Protocol {protocol['version']} (sha256 {protocol['sha256'][:12]}), {card['seeds']} seeds an arm; "
        f"trained at commit {str(provenance.get('commit'))[:7]}{' (dirty)' if provenance.get('dirty') else ''} "
        f"on {provenance.get('cpu')} with {provenance.get('threads')} threads (lit-attention {provenance.get('lit_attention')})"
        + (
            f"; its records come from commits {', '.join(c[:7] for c in card.get('commits', []))}"
            if len(card.get("commits", [])) > 1
            else ""
        )
        + ".\n",
        baseline_line(card.get("baseline") or {}),
        *([null_line(card)] if null else []),
        "Differences are variant − standard (and variant − the parameter-matched control) in each task's test "
        "metric, lower is better; paired over seeds, Holm over the card's tasks; the seeds-and-items interval "
        "is a two-way bootstrap of the runs' per-example outcomes. A difference inside ± the smallest detectable "
        'one is one this design would usually miss: "no detectable difference" is not "the same".\n',
        markdown_table(header, rows),
    ]
    for task in card["tasks"]:
        if "multipliers" not in task:
            continue
        lines = [f"\n## Compute multiplier on `{task['name']}`\n"]
        for label, entry in task["multipliers"].items():
            if label == "ladder":
                continue
            flops, seconds = entry["flops"], entry["seconds"]
            law = flops.get("law_check")
            lines.append(
                f"- `{label}`: {flops['text']} in training FLOPs"
                + (
                    f" (the fitted law, as a check: {law:.3g}×)"
                    if law is not None
                    else " (the fitted law never reaches its loss)"
                )
                + (
                    f"; {seconds['text']} in measured training seconds"
                    if seconds
                    else "; no reading in training seconds (they did not rise with the budget, or the runs were trained on "
                    "different machines or at different commits, under loads that need not match)"
                )
                + "\n"
            )
        ladder = task["multipliers"]["ladder"]
        if card["seeds"] < 5:
            lines.append(
                f"\nWith {card['seeds']} seeds the multiplier's bootstrap interval holds the truth less often than its level says (5 or more are needed).\n"
            )
        lines.append(
            f"\nThe training compute `standard` needs to reach the arm's test loss, over what the arm used: read on "
            f"`standard`'s ladder of {ladder['key']} = {', '.join(str(b) for b in ladder['budgets'])} (a monotone fit "
            "and the monotone cubic in log compute), censored outside it, with a paired bootstrap over seeds. Training "
            "seconds are as measured: another process on the machine slows the runs it overlaps, so that reading is "
            "only as steady as the machine was.\n"
        )
        parts.append("".join(lines))
    if card.get("cheap"):
        parts.append(cheap_section(card))
    overall = card["overall"]
    parts.append(
        "\n## Verdict\n\n"
        + (
            "Worth more compute than it costs, by the protocol's rule.\n"
            if overall["worth_more_compute_than_it_costs"]
            else "Not shown to be worth more compute than it costs: " + "; ".join(overall["reasons"]) + ".\n"
        )
    )
    if any("multipliers" in task for task in card["tasks"]):
        parts.append(f"\n![ladder]({FIGURE})\n")
    return "\n".join(parts)


def cheap_section(card: dict) -> str:
    """`--cheap-check`: the verdict a card at a cheaper budget would give, beside this card's."""
    rows = [
        [
            f"`{row['task']}` at {row['budget']} ({row['share_of_reference']:.0%} of the reference)",
            number(row["difference"]),
            interval(row["low"], row["high"]),
            p_value(row["p_holm"]),
            row["verdict"],
            row["reference_verdict"],
        ]
        for row in card["cheap"]
    ]
    header = ["budget", "difference vs standard", f"{card['confidence']:.0%} interval (seeds)", "p (Holm, tasks)"]
    header += ["verdict at this budget", "the card's verdict"]
    return (
        "\n## At cheaper budgets (a trust check, not part of the verdict)\n\n"
        "The variant trained again at the ladder's smaller budgets, beside `standard`'s runs there: the verdict a "
        "card at that budget would give (Holm over the card's tasks, with this budget's p-value in place of the "
        "reference budget's), against the card's own.\n\n" + markdown_table(header, rows) + "\n"
    )


def not_offered_line(card: dict) -> str:
    return (
        f"Left out: {', '.join(card['not_offered'])}, whose model family does not take "
        f"{', '.join(f'{k}={v}' for k, v in card['block'].items())}; Holm runs over the card's other tasks.\n"
    )


def null_line(card: dict) -> str:
    seeds = card["null"]["seeds"]
    return (
        f"The null card: its `variant` is `standard` trained on seeds {seeds[0]}–{seeds[-1]}, set against `standard`'s "
        f"seeds 0–{card['seeds'] - 1} by rank. The two arms are independent draws of one model, so each interval "
        f"should hold 0 in about {card['confidence']:.0%} of such cards; the width of each shows the task's noise floor, "
        "and an interval that misses 0 is an error this design makes by chance.\n"
    )


def baseline_line(baseline: dict) -> str:
    offered = baseline.get("offered") or baseline.get("reused_from")
    if not offered:
        return "`standard`'s runs were trained for this card.\n"
    where = f"the card in `{offered}` (trained at commit {str(baseline.get('commit'))[:7]} on {baseline.get('cpu')})"
    check = baseline.get("check") or []
    if baseline.get("retrained"):
        far = [row for row in check if row["moved"] > row["tolerance"] or not row["same_data"]]
        moves = ", ".join(f"{row['task']} by {row['moved']:.4g} (margin {row['tolerance']:g})" for row in far)
        return (
            f"`standard`'s runs were trained for this card: those of {where} moved when re-trained on this machine "
            f"({moves}), by more than the protocol's margin, so they were not reused.\n"
        )
    if not baseline.get("checked_here"):
        return f"`standard`'s runs were reused from {where}, paired by seed; none was re-trained on this machine to check it.\n"
    identical = sum(row["moved"] == 0 for row in check)
    largest = max(check, key=lambda row: row["moved"])
    return (
        f"`standard`'s runs were reused from {where}, paired by seed. Re-trained on this machine to check them, the "
        f"run of seed {largest['seed']} of each of the {len(check)} tasks gave the same test metric "
        + (
            "to the last bit on every task.\n"
            if identical == len(check)
            else f"on {identical} of them; the largest move was {largest['moved']:.3g} on {largest['task']} (its margin "
            f"{largest['tolerance']:g}).\n"
        )
    )


def card_figure(card: dict, path: Path) -> None:
    """The ladder's losses against training FLOPs, with each arm's point at its own FLOPs."""
    task = next((t for t in card["tasks"] if "multipliers" in t), None)
    if task is None:
        return
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    ladder = task["multipliers"]["ladder"]
    figure, axes = pyplot.subplots(figsize=(5, 3.5))
    budgets = ladder["budgets"]
    axes.plot([ladder["flops"][b] for b in budgets], [ladder["losses"][b] for b in budgets], "o-", label="standard")
    for label, mean in task["means"].items():
        if label != "standard" and label in task["multipliers"]:
            axes.plot([task["flops"][label]], [mean], "s", label=label)
    law = ladder.get("law")
    if law:  # the fitted law, dashed, over the ladder's range: a check on the reading, not the reading
        import numpy as np

        costs = np.geomspace(ladder["flops"][budgets[0]], ladder["flops"][budgets[-1]], 50)
        axes.plot(
            costs, law["E"] + law["A"] * costs ** -law["alpha"], "--", color="grey", linewidth=1, label="fitted law (check)"
        )
    axes.axhline(task["floor"], color="grey", linestyle=":", label=task["floor_label"])
    axes.set_xscale("log")
    axes.set_xlabel("training FLOPs")
    axes.set_ylabel(task["metric"])
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)
