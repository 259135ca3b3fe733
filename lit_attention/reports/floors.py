"""The line under a language model's loss tables: the unigram and bigram losses of its data, fitted on
the training split and scored on validation and test (datamodules/ngram_floors.py, kept in each record
as `ngram_floors`), so a reader sees how far above counting the models are. Records without them
(older ones, other tasks' data) give no line, so the reports of such records stay as they were."""

from __future__ import annotations

import json


def distinct_floors(records: list[dict]) -> list[dict]:
    """The different `ngram_floors` the records of a language model's loss carry (none for other tasks)."""
    if not records or records[0].get("monitor") != "val/loss":
        return []
    found = {json.dumps(r["ngram_floors"], sort_keys=True) for r in records if r.get("ngram_floors")}
    return [json.loads(text) for text in sorted(found)]


def floor_values(records: list[dict], split: str = "validation") -> dict[str, float]:
    """{"unigram": loss, "bigram": loss} on `split` where every record with floors agrees, else {}."""
    found = distinct_floors(records)
    if len(found) != 1:
        return {}
    return {model: found[0][model][split] for model in ("unigram", "bigram") if split in found[0].get(model, {})}


def floors_line(records: list[dict]) -> str:
    """One line, or "" when no record has floors; a sentence instead where the records' data disagree."""
    found = distinct_floors(records)
    if not found:
        return ""
    if len(found) > 1:
        return "\nThe runs' n-gram floors differ (their data differ), so none is given.\n"
    floors = found[0]
    splits = [s for s in ("validation", "test") if s in floors["unigram"] and s in floors["bigram"]]
    values = ", ".join(f"{model} {' / '.join(f'{floors[model][s]:.4f}' for s in splits)}" for model in ("unigram", "bigram"))
    return (
        f"\nn-gram floors on this data (fitted on the training split, scored on {' / '.join(splits)}): "
        f"{values} {floors['unit']}.\n"
    )
