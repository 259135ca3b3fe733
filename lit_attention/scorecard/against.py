"""`--against DIR`: a card beside a reference set of cards (results/scorecards/v1, say) in one table.

A row a card, the card asked for first and then the set's in the order of their folders' names (never by a
score); a column a task, in the protocol's order, each cell the difference from `standard` with its interval
over seeds and the verdict after Holm; then the compute multiplier in FLOPs with its interval. Only cards of the
same protocol (version and hash) are set beside it; any other is named below the table and left out.
"""

from __future__ import annotations

import json
from pathlib import Path

from lit_attention.errors import ConfigError
from lit_attention.markdown import markdown_table

CARD_JSON = "scorecard.json"
MARK = {"better": "better", "worse": "worse", "no detectable difference": "n.d."}


def reference_cards(folder: Path) -> list[tuple[Path, dict]]:
    """(its folder, card) of every finished card directly under `folder`, by name."""
    if not folder.is_dir():
        raise ConfigError(
            f"--against {str(folder)!r} is not a folder; give the folder that holds the cards (results/scorecards/v1)."
        )
    found = [(path.parent, json.loads(path.read_text(encoding="utf-8"))) for path in sorted(folder.glob(f"*/{CARD_JSON}"))]
    if not found:
        raise ConfigError(f"--against {str(folder)!r} holds no card (no */{CARD_JSON}); give the folder that holds the cards.")
    return found


def card_label(card: dict) -> str:
    if card.get("null"):
        seeds = card["null"]["seeds"]
        return f"null: standard, seeds {seeds[0]}-{seeds[-1]}"
    block = card.get("block") or {}
    return card["variant"] + "".join(f" with {key}={value}" for key, value in block.items())


def cell(task: dict) -> str:
    d = task["versus_standard"]
    return f"{d['difference']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}] {MARK.get(d['verdict'], d['verdict'])}"


def multiplier_cell(card: dict) -> str:
    ladder = next((t for t in card["tasks"] if "multipliers" in t), None)
    return "-" if ladder is None else ladder["multipliers"]["variant"]["flops"]["text"]


def against_table(card: dict, own: Path, folder: Path) -> str:
    """The markdown table of `card` (written in `own`) beside the cards under `folder` of its protocol, and a line
    per card left out."""
    others = [(where, other) for where, other in reference_cards(folder) if where.resolve() != own.resolve()]
    return cards_table([(own, card), *others])


def protocol_tasks(lists: list[list[str]]) -> list[str]:
    """Every card's tasks in the protocol's order. A card of a block option some family refuses lacks those tasks
    (its not_offered); each card keeps the protocol's order, so a task missing so far goes right after the task
    it follows in the card that has it."""
    merged: list[str] = []
    for names in sorted(lists, key=len, reverse=True):
        for i, name in enumerate(names):
            if name not in merged:
                merged.insert(merged.index(names[i - 1]) + 1 if i else 0, name)
    return merged


def cards_table(cards: list[tuple[Path, dict]]) -> str:
    """The table of `cards` (the first one's protocol decides which others are set beside it), in the order given."""
    first = cards[0][1]
    sha = first["protocol"]["sha256"]
    same = [(where, other) for where, other in cards if other["protocol"]["sha256"] == sha]
    left_out = [
        f"{where.name} (protocol {other['protocol']['version']}, sha256 {other['protocol']['sha256'][:12]})"
        for where, other in cards
        if other["protocol"]["sha256"] != sha
    ]
    tasks = protocol_tasks([[t["name"] for t in other["tasks"]] for _, other in same])
    rows = []
    for _, other in same:
        by_name = {t["name"]: t for t in other["tasks"]}
        cells = [cell(by_name[t]) if t in by_name else "not offered" for t in tasks]
        rows.append([f"`{card_label(other)}`", *cells, multiplier_cell(other)])
    level = f"{first['confidence']:.0%}"
    header = ["card", *[f"{t}: difference [{level}]" for t in tasks], "compute multiplier (FLOPs)"]
    lines = [
        f"Protocol {first['protocol']['version']} (sha256 {sha[:12]}): each cell is the variant's test-metric difference "
        f"from `standard` (lower is better) with its {level} interval over seeds, and its verdict after Holm over the "
        "card's tasks (n.d.: no detectable difference). Rows are in the order of the cards' folders, not ranked.\n",
        markdown_table(header, rows),
    ]
    if left_out:
        lines.append("\nLeft out, another protocol: " + "; ".join(left_out) + ".\n")
    return "\n".join(lines)
