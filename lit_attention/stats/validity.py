"""What the report checks about its own runs before it compares them, from the records alone:

* pairing: arms of one seed are compared seed by seed only when their records show that they began
  with the same training batch (its hash after augmentation, `first_batch_sha256`) on the same data
  (`data_fingerprints`); an arm whose batches differ is compared unpaired, and one whose data differ
  is not compared at all;
* provenance: every distinct code version, library, machine and data fingerprint among the runs.

Records older than a field are labelled "not recorded", never refused.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

PAIRED, UNCHECKED, UNPAIRED, OTHER_DATA = "paired", "not recorded", "unpaired", "other data"
NO_COMMON_SEED = "no common seed"  # the two arms finished on different seeds: nothing to pair


@dataclass(frozen=True)
class Pairing:
    """How one arm's runs relate to the reference arm's, seed by seed."""

    status: str  # PAIRED, UNCHECKED (no hashes to check), UNPAIRED, OTHER_DATA or NO_COMMON_SEED
    seeds: tuple[int, ...] = ()  # the seeds that differ (UNPAIRED, OTHER_DATA) or lack a hash (UNCHECKED)
    splits: tuple[str, ...] = ()  # OTHER_DATA: the splits whose fingerprints differ
    data_checked: bool = True  # False when some seed's records hold no data fingerprints to compare


def pairing(arm_records: dict[int, dict], reference_records: dict[int, dict]) -> Pairing:
    """Compare the records of two arms ({seed: record}) on the seeds both have."""
    seeds = sorted(arm_records.keys() & reference_records.keys())
    if not seeds:
        return Pairing(NO_COMMON_SEED)
    other_data, other_splits, other_batches, unknown = [], set(), [], []
    data_checked = True
    for seed in seeds:
        mine, theirs = arm_records[seed], reference_records[seed]
        data_checked &= bool(mine.get("data_fingerprints")) and bool(theirs.get("data_fingerprints"))
        splits = differing_splits(mine.get("data_fingerprints"), theirs.get("data_fingerprints"))
        if splits:
            other_data.append(seed)
            other_splits |= set(splits)
        a, b = mine.get("first_batch_sha256"), theirs.get("first_batch_sha256")
        if a is None or b is None:
            unknown.append(seed)
        elif a != b:
            other_batches.append(seed)
    if other_data:
        return Pairing(OTHER_DATA, tuple(other_data), tuple(sorted(other_splits)))
    if other_batches:
        return Pairing(UNPAIRED, tuple(other_batches))
    if unknown:
        return Pairing(UNCHECKED, tuple(unknown), data_checked=data_checked)
    return Pairing(PAIRED, data_checked=data_checked)


def differing_splits(mine: dict | None, theirs: dict | None) -> list[str]:
    """The splits both records fingerprinted and found different."""
    if not mine or not theirs:
        return []
    return [
        split
        for split in ("train", "validation", "test")
        if mine.get(split) is not None and theirs.get(split) is not None and mine[split] != theirs[split]
    ]


def pairing_sentence(pairings: dict[str, Pairing], reference: str) -> str:
    """One line per kind of pairing among the arms compared with `reference`, for the table's header."""

    def arms(status: str) -> list[str]:
        return [f"`{arm}`" for arm, p in pairings.items() if p.status == status]

    lines = []
    unfingerprinted = any(p.status == PAIRED and not p.data_checked for p in pairings.values())
    data = (
        " (their records hold no data fingerprints: the data are checked only through that batch)"
        if unfingerprinted
        else " on the same data"
    )
    if arms(PAIRED) and len(arms(PAIRED)) == len(pairings):
        lines.append(
            f"**Paired:** the records show every arm of every seed beginning with the same training batch "
            f"(after augmentation) as `{reference}`{data}."
        )
    elif arms(PAIRED):
        lines.append(
            f"**Paired** with `{reference}` seed by seed, their records showing the same first training "
            f"batch{data}: {', '.join(arms(PAIRED))}."
        )
    unpaired: dict[tuple[int, ...], list[str]] = {}  # grouped by the seeds that differ, for one line each
    for arm, p in pairings.items():
        if p.status == UNPAIRED:
            unpaired.setdefault(p.seeds, []).append(f"`{arm}`")
        elif p.status == OTHER_DATA:
            lines.append(
                f"**Not compared:** `{arm}` saw other {' and '.join(p.splits)} data than `{reference}` on "
                f"seed(s) {', '.join(map(str, p.seeds))} (their data fingerprints differ)."
            )
    for arm, p in pairings.items():
        if p.status == NO_COMMON_SEED:
            lines.append(
                f"**Not paired:** `{arm}` and `{reference}` finished on no seed in common, so `{arm}` is compared unpaired."
            )
    for seeds, names in unpaired.items():
        lines.append(
            f"**Not paired:** {', '.join(names)} began with other training batches than `{reference}` on "
            f"seed(s) {', '.join(map(str, seeds))}, so {'they are' if len(names) > 1 else 'it is'} compared "
            "unpaired (Welch's interval, a label-permutation p and a two-sample bootstrap)."
        )
    if arms(UNCHECKED):
        lines.append(
            f"**Pairing not recorded** for {', '.join(arms(UNCHECKED))} (records without a first-batch hash): "
            "compared seed by seed as the sweep intended, unchecked."
        )
    return "\n".join(f"{line}\n" for line in lines)


# The provenance table: (row label, how to read it from a record); None is "not recorded".
def _commit(record: dict) -> str | None:
    found = record.get("provenance") or {}
    commit = found.get("commit")
    if commit is None:
        return None
    if "dirty" not in found:  # older records: `<hash>+dirty`, without the diff
        return commit.replace("+dirty", " with uncommitted changes (diff not recorded)")
    if not found["dirty"]:
        return commit
    return f"{commit} with uncommitted changes (diff sha256 {str(found.get('diff_sha256'))[:12]})"


def _field(name: str):
    def read(record: dict):
        value = (record.get("provenance") or {}).get(name)
        return ", ".join(map(str, value)) if isinstance(value, list) else value

    return read


def _data(split: str):
    return lambda record: (record.get("data_fingerprints") or {}).get(split)


PROVENANCE_ROWS = [
    ("commit", _commit),
    ("python", _field("python")),
    ("torch", _field("torch")),
    ("torch build", _field("torch_build")),
    ("lightning", _field("lightning")),
    ("CPU", _field("cpu")),
    ("threads", _field("threads")),
    ("devices", _field("devices")),
    ("training data", _data("train")),
    ("validation data", _data("validation")),
    ("test data", _data("test")),
]


def provenance_rows(records: list[dict]) -> list[list[str]]:
    """[what, its distinct values with how many runs had each] for every PROVENANCE_ROWS entry."""
    rows = []
    for label, read in PROVENANCE_ROWS:
        counts = Counter(str(value) if (value := read(r)) is not None else None for r in records)
        found = [
            f"{value} ({n})"
            for value, n in sorted(counts.items(), key=lambda item: (item[0] is None, str(item[0])))
            if value is not None
        ]
        if counts.get(None):
            found.append(f"not recorded ({counts[None]})")
        rows.append([label, "; ".join(found)])
    return rows
