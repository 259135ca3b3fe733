"""`compare --verify K`: reproducibility measured rather than promised. K finished runs, chosen at random
but the same K for the same sweep, are trained again in `<output>/verify/` with exactly the command the
sweep gave them, through the sweep's own launcher; the report then sets each re-run beside its record
(best validation value, test value, the whole validation curve), gives the largest difference beside
the smallest effect the comparison table reports, and says whether the re-runs ran where the records did.

The section is built from the files on disk only, like the rest of the report: a rebuilt report is the
same byte for byte, and a re-run that already finished in the scratch folder is not trained again
(the sweep's resume rules, `find_state`).
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterable
from pathlib import Path

from lit_attention.errors import ConfigError
from lit_attention.sweep.launchers import Job
from lit_attention.sweep.runs import Plan, Run, RunState, clear_failure, find_state, point_label, write_failure
from lit_attention.sweep.selection import best_value
from lit_attention.sweep.tables import markdown

VERIFY = "verify"  # the scratch folder under the sweep's output
# What says where a run ran, as records.provenance names it; a field an older record lacks is "not recorded".
PROVENANCE_FIELDS = ("commit", "dirty", "diff_sha256", "python", "torch", "torch_build", "cpu", "threads", "devices")


def scratch(output: Path) -> Path:
    return Path(output) / VERIFY


def _order(run: Run) -> tuple:
    return run.arm, point_label(run.point), run.seed


def choose_runs(states: Iterable[RunState], k: int) -> list[Run]:
    """K finished runs, drawn with a fixed seed from the finished runs in (arm, grid point, seed) order:
    the same sweep re-checks the same runs every time it is asked, so its report rebuilds identically."""
    finished = sorted((state.run for state in states if state.finished), key=_order)
    if k < 0 or k > len(finished):
        raise ConfigError(f"--verify {k} is invalid: {len(finished)} run(s) of this sweep are finished; give a number "
                          f"from 0 to {len(finished)}.")
    return sorted(random.Random(0).sample(finished, k), key=_order)


def rerun(runs: list[Run], plan: Plan, states: dict[Run, RunState], configs: list[str], extra: list[str], output: Path,
          launcher) -> int:
    """Train `runs` again under `<output>/verify` with the command the sweep gave each (`Run.command`, with
    --test when its record has test scores), skipping the re-runs finished there already; prints a line
    per re-run as it ends. Returns how many failed."""
    folder = scratch(output)
    tested = {run: states[run].record.get("test") is not None for run in runs}
    todo = [run for run in runs if not find_state(run, folder, needs_test=tested[run],
                                                    wanted=plan.configs.get((run.arm, run.point))).finished]
    print(f"compare --verify: {len(runs)} finished run(s) to re-train in {folder}; {len(runs) - len(todo)} re-trained "
          f"earlier, {len(todo)} to run, {launcher.describe()}", flush=True)
    failed = []

    def report(job: Job, status: int, last_line: str) -> None:
        run = job.key
        where = f"{run.arm} seed {run.seed} {run.point_label}"
        if status == 0:
            again, recorded = find_state(run, folder).record or {}, states[run].record
            print(f"verify {where}: best {_value(best_value(again))} (recorded {_value(best_value(recorded))})", flush=True)
        else:
            failed.append(run)
            write_failure(run, folder, status, last_line.removeprefix("error: "))
            print(f"verify {where}: FAILED (exit {status}): {last_line}", flush=True)

    for run in todo:
        clear_failure(run, folder)
    try:
        launcher.run([Job(run, run.command(configs, extra, folder, tested[run]), run.directory(folder) / "compare.log")
                      for run in todo], report)
    except KeyboardInterrupt:
        print("\ncompare --verify: interrupted. The same command resumes the re-runs.", file=sys.stderr, flush=True)
        sys.exit(130)
    if failed:
        print(f"{len(failed)} re-run(s) failed; their errors are in {folder}/runs/**/compare.log.", file=sys.stderr)
    return len(failed)


# ---------------------------------------------------------------------------------------------- the section
# (report.py calls verification_section, so the few lines this needs of a table are written here, not imported)


def verification_section(plan: Plan, states: list[RunState], output: Path, smallest_effect: float | None) -> str:
    """The markdown section "## Re-run check" from the re-run records under `<output>/verify` of this plan's
    runs ("" when there are none). `smallest_effect`: the smallest absolute mean difference the report's
    comparison table gives (None without one)."""
    recorded = {state.run: state.record for state in states if state.record is not None}
    folder = scratch(output)
    again, failed = {}, []
    for run in sorted(recorded, key=_order):
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
            row += [_value(old), _value(new), "n/a" if gap is None else f"{gap:.4g}"]
        row.append(_curve_match(before.get("curve") or [], record.get("curve") or []))
        rows.append(row)
    header = ["arm", "grid point", "seed", f"recorded best {monitor}", "re-run", "difference", f"recorded {test_name}",
              "re-run", "difference", "curve bit-identical"]
    if all(row[8] == "n/a" for row in rows):  # no re-run and its record both have a test value
        header, rows = header[:6] + header[9:], [row[:6] + row[9:] for row in rows]
    text = (f"## Re-run check\n\n{len(again)} finished run(s) trained again in `{VERIFY}/` with the command the sweep "
            "gave them (`--verify`); differences are absolute.\n")
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
        return sentence + "; the comparison table claims no difference (no \"better\" or \"worse\") to set it beside.\n"
    relation = "below" if largest < smallest_effect else "as large as" if largest == smallest_effect else "larger than"
    verdict = ("re-running moved no checked result as far as the smallest difference the table claims" if largest < smallest_effect
               else "a difference of the smallest claimed size is within what re-running a run moves")
    return (f"{sentence}, {relation} the smallest effect the comparison table claims ({smallest_effect:.4g}, the "
            f"smallest \"better\" or \"worse\"): {verdict}.\n")


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


def _value(value) -> str:
    return "n/a" if value is None else f"{value:.6g}"


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
