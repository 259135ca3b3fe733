"""Was the budget long enough? How many of each arm's tuned runs were still improving when training
stopped: a run whose best validation value came late may have ranked otherwise with more steps, and a
difference between arms may then measure speed within the budget rather than where each arm ends."""

from __future__ import annotations

from lit_attention.sweep.runs import Plan

# "Late": the best validation value came in the last fifth of the run's evaluated steps.
LATE_FRACTION = 0.8


def late_best(record: dict) -> tuple[bool, bool] | None:
    """(best in the last fifth of the curve's steps, best at the very last evaluation), or None for a
    record without a validation curve."""
    curve, best = record.get("curve") or [], record.get("best") or {}
    if not curve or best.get("step") is None:
        return None
    last = curve[-1][1]
    return best["step"] > LATE_FRACTION * last, best["step"] >= last


def budget_note(plan: Plan, cells: dict, tuned: dict) -> str:
    """One sentence after the tuned table: per arm, how many tuned runs had their best validation value
    late (in the last fifth of training) and how many at the last evaluation."""
    parts = []
    for arm in plan.arms:
        if arm not in tuned:
            continue
        found = [late for r in cells[(arm, tuned[arm])].records if (late := late_best(r)) is not None]
        if found:
            parts.append(f"`{arm}` {sum(late for late, _ in found)}/{len(found)} ({sum(e for _, e in found)}/{len(found)})")
    if not parts:
        return ""
    return (
        "\n**Still improving when training stopped?** Tuned runs whose best validation value came in the last "
        "fifth of their steps (in brackets: at the very last evaluation; a run evaluated four times or fewer has "
        "only its last evaluation in that fifth): " + ", ".join(parts) + ". Where most did, more steps may "
        "change the ranking, and a difference may measure speed within this budget rather than where the arms "
        "end; the curves are in results.png.\n"
    )
