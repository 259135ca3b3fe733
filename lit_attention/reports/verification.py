"""The report's "Re-run check" section of `compare --verify K` (the re-runs themselves are
lit_attention/sweep/verify.py): each re-run beside its record (best validation value, test value, the
whole validation curve), the largest difference beside the smallest effect the comparison table reports,
and whether the re-runs ran where the records did.

The section is built from the files on disk only, like the rest of the report: a rebuilt report is the
same byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

from lit_attention.reports.tables import markdown
from lit_attention.stats.selection import best_value
from lit_attention.sweep.runs import Plan, RunState, find_state
from lit_attention.sweep.verify import PROVENANCE_FIELDS, VERIFY, run_order, scratch, value_text


def verification_section(plan: Plan, states: list[RunState], output: Path, smallest_effect: float | None) -> str:
    """The markdown section "## Re-run check" from the re-run records under `<output>/verify` of this plan's
    runs ("" when there are none). `smallest_effect`: the smallest absolute mean difference the report's
    comparison table gives (None without one)."""
    recorded = {state.run: state.record for state in states if state.record is not None}
    folder = scratch(output)
    again, failed = {}, []
    for run in sorted(recorded, key=run_order):
        state = find_state(run, folder)
        if state.record is not None:
            again[run] = state.record
        elif state.failure is not None:
            failed.append((run, state.failure.get("message", "")))
    if not again and not failed:
        return ""
    monitor = next(iter(recorded.values()))["monitor"]
    test_name = monitor.replace("val/", "test/")
    rows, differences = [], []
    for run, record in again.items():
        before = recorded[run]
        row = [run.arm, run.point_label, str(run.seed)]
        for value in (best_value, lambda r: (r.get("test") or {}).get(test_name)):
            old, new = value(before), value(record)
            gap = abs(new - old) if old is not None and new is not None else None
            differences += [gap] if gap is not None else []
            row += [value_text(old), value_text(new), "n/a" if gap is None else f"{gap:.4g}"]
        row.append(_curve_match(before.get("curve") or [], record.get("curve") or []))
        rows.append(row)
    header = [
        "arm",
        "grid point",
        "seed",
        f"recorded best {monitor}",
        "re-run",
        "difference",
        f"recorded {test_name}",
        "re-run",
        "difference",
        "curve bit-identical",
    ]
    if all(row[8] == "n/a" for row in rows):  # no re-run and its record both have a test value
        header, rows = header[:6] + header[9:], [row[:6] + row[9:] for row in rows]
    text = (
        f"## Re-run check\n\n{len(again)} finished run(s) trained again in `{VERIFY}/` with the command the sweep "
        "gave them (`--verify`); differences are absolute.\n"
    )
    if again:
        text += "\n" + markdown(header, rows)
    if failed:
        text += "\nRe-runs that failed: " + "; ".join(f"{r.arm} {r.point_label} seed {r.seed}: {m}" for r, m in failed)
        text += ".\n"
    if again:
        text += "\n" + _largest_sentence(max(differences, default=None), smallest_effect)
        text += "\n" + _provenance_part([recorded[run] for run in again], list(again.values()))
    return text


def _largest_sentence(largest: float | None, smallest_effect: float | None) -> str:
    if largest is None:
        return "No re-run has a value its record also has to compare.\n"
    sentence = f"Largest difference between a re-run and its record: {largest:.4g}"
    if smallest_effect is None:
        return sentence + '; the comparison table claims no difference (no "better" or "worse") to set it beside.\n'
    relation = "below" if largest < smallest_effect else "as large as" if largest == smallest_effect else "larger than"
    verdict = (
        "re-running moved no checked result as far as the smallest difference the table claims"
        if largest < smallest_effect
        else "a difference of the smallest claimed size is within what re-running a run moves"
    )
    return (
        f"{sentence}, {relation} the smallest effect the comparison table claims ({smallest_effect:.4g}, the "
        f'smallest "better" or "worse"): {verdict}.\n'
    )


def _provenance_part(before: list[dict], after: list[dict]) -> str:
    """A table of the distinct values of each provenance field among the records and among the re-runs, and
    a sentence: the same place, or the fields that differ."""
    rows, differ, unknown = [], [], []
    for field in PROVENANCE_FIELDS:
        old = [_field(r, field) for r in before]
        new = [_field(r, field) for r in after]
        rows.append([field, ", ".join(sorted(set(old))), ", ".join(sorted(set(new)))])
        if "not recorded" in old + new:
            unknown.append(field)
        elif old != new:
            differ.append(field)
    if differ:
        sentence = f"The re-runs did not all run where their records did: they differ in {', '.join(differ)}"
    else:
        sentence = "The re-runs ran where their records did, as far as both record it"
    if unknown:
        sentence += f" ({', '.join(unknown)}: not recorded by every run)"
    return markdown(["provenance", "records", "re-runs"], rows) + "\n" + sentence + ".\n"


def _field(record: dict, field: str) -> str:
    """A provenance field as the table shows it; a clean tree has no diff to hash, which is not a gap."""
    provenance = record.get("provenance") or {}
    if field == "diff_sha256" and provenance.get(field) is None and provenance.get("dirty") is False:
        return "none (no uncommitted changes)"
    return _show(provenance.get(field))


def _show(value) -> str:
    if value is None:
        return "not recorded"
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value).replace("|", "/")


def _curve_match(before: list, after: list) -> str:
    """`yes` when every (epoch, step, value) point is the same float, else how many points differ."""
    if json.dumps(before) == json.dumps(after):
        return "yes"
    differing = sum(a != b for a, b in zip(before, after)) + abs(len(before) - len(after))
    return f"no ({differing} of {max(len(before), len(after))} points differ)"
