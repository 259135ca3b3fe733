"""`--baseline CARD`: a card that reuses an earlier card's `standard` runs instead of training them again.

* `check_baseline`: the folder is a finished card of the same protocol, and not the card's own.
* `retrain_check`: before anything is copied, one `standard` run of every task (seed 0, at the task's reference
  budget) is trained again on this machine, into `<output>/baseline-check/`, and its test metric set beside the
  baseline's record of the same run. Runs are bit-identical on one machine but not across CPUs, so this is how
  far the reused runs are from the ones this machine would train. The tolerance is the protocol's margin for the
  task (the smallest difference its rule calls material): a baseline that moved by more is trained afresh here,
  and the card says so.
* `copy_baseline`: the reused runs go into the card's folders, where compare then finds them finished.
* `baseline_of`: what the card says about where its `standard` runs came from.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from lit_attention.errors import ConfigError
from lit_attention.scorecard.plan import Job, reference_jobs

CARD_JSON = "scorecard.json"
CHECK_FOLDER = "baseline-check"  # under the card's output: the re-trained baseline runs
CHECK_SEED = 0


def check_baseline(folder: Path, protocol, output: Path) -> Path:
    """An earlier card's folder of the same protocol, not the output itself; one sentence otherwise."""
    card_file = folder / CARD_JSON
    if not card_file.is_file():
        raise ConfigError(f"--baseline {str(folder)!r} holds no {CARD_JSON}; give the folder of a finished card.")
    card = json.loads(card_file.read_text(encoding="utf-8"))
    if card["protocol"]["sha256"] != protocol.sha256:
        raise ConfigError(
            f"--baseline {str(folder)!r} is a card of protocol {card['protocol']['version']} (sha256 "
            f"{card['protocol']['sha256'][:12]}), not of {protocol.version} (sha256 {protocol.sha256[:12]}); give a "
            "card of the same protocol, or train the baseline afresh without --baseline."
        )
    if folder.resolve() == output.resolve():
        raise ConfigError(f"--baseline {str(folder)!r} is the card's own --output; give an earlier card's folder.")
    return folder


def planned_tasks(protocol, jobs: list[Job]) -> list:
    """The protocol's tasks the card has commands for (a block option's card leaves some out), in order."""
    planned = {job.task for job in jobs}
    return [task for task in protocol.tasks if task.name in planned]


def check_jobs(protocol, jobs: list[Job]) -> list[Job]:
    """One compare command a task: its `standard` run of seed 0 at the task's reference budget, as the card
    trains it (the same recipe and settings), into `baseline-check/<the task's folder>`."""
    found = []
    for task in planned_tasks(protocol, jobs):
        job, _ = reference_jobs(jobs, task)
        argv = list(job.argv)
        argv[argv.index("--seeds") + 1] = "1"
        # Only standard: the arms the card adds (--arm, --add-control) are dropped with their values.
        kept, skip = [], False
        for word in argv:
            if skip:
                skip = False
                continue
            if word in ("--arm", "--add-control"):
                skip = True
                continue
            kept.append(word)
        found.append(Job(task.name, f"{CHECK_FOLDER}/{job.folder}", job.budget, ("standard",), tuple(kept)))
    return found


def retrain_check(protocol, jobs: list[Job], baseline: Path, output: Path) -> list[dict]:
    """Train the check runs (compare resumes them: a finished one is not trained again) and set each beside the
    baseline's record of the same run: [{task, seed, recorded, here, moved, tolerance, same_data}]."""
    from lit_attention.compare import run as compare
    from lit_attention.scorecard.card import records_of

    rows = []
    for task, check in zip(planned_tasks(protocol, jobs), check_jobs(protocol, jobs)):
        print(f"scorecard: re-training the baseline's standard run of seed {CHECK_SEED} for {task.name}", flush=True)
        compare(check.command(str(output), 1))
        folder = check.folder.removeprefix(f"{CHECK_FOLDER}/")
        recorded = records_of(baseline / folder).get("standard", {}).get(CHECK_SEED)
        here = records_of(output / check.folder).get("standard", {}).get(CHECK_SEED)
        if recorded is None or here is None:
            raise ConfigError(
                f"--baseline {str(baseline)!r} has no finished standard run of seed {CHECK_SEED} in {folder}; give a "
                "finished card."
            )
        old, new = float(recorded[0]["test"][task.metric]), float(here[0]["test"][task.metric])
        rows.append(
            {
                "task": task.name,
                "seed": CHECK_SEED,
                "metric": task.metric,
                "recorded": old,
                "here": new,
                "moved": abs(new - old),
                "tolerance": protocol.margins.get(task.name, 0.0),
                "same_data": recorded[0].get("first_batch_sha256") == here[0].get("first_batch_sha256"),
            }
        )
    return rows


def reuse_baseline(protocol, jobs: list[Job], baseline: Path, output: Path) -> dict:
    """The re-train check, then the baseline's runs copied in (or, where they moved too far, left out so that
    the card trains its own); returns what the card says of its baseline (`baseline_of`)."""
    check = retrain_check(protocol, jobs, baseline, output)
    far = moved_too_far(check)
    if not far:
        copied = copy_baseline(baseline, output, jobs)
        largest = max(check, key=lambda row: row["moved"])
        print(
            f"scorecard: {copied} standard runs of {baseline} reused, paired by seed (re-trained here, they moved "
            f"by at most {largest['moved']:.3g}, on {largest['task']})",
            flush=True,
        )
        return baseline_of(baseline, check)
    moves = ", ".join(f"{row['task']} by {row['moved']:.4g} (margin {row['tolerance']:g})" for row in far)
    if copied_earlier(baseline, output, jobs):
        raise ConfigError(
            f"the standard runs of --baseline {str(baseline)!r} moved on this machine ({moves}), but an earlier start "
            "of this card copied them in; start the card again in a new --output, without --baseline."
        )
    print(
        f"scorecard: the standard runs of {baseline} moved when re-trained here ({moves}), by more than the "
        "protocol's margin: the baseline is trained afresh for this card instead.",
        flush=True,
    )
    return baseline_of(baseline, check, retrained=True)


def moved_too_far(rows: list[dict]) -> list[dict]:
    return [row for row in rows if row["moved"] > row["tolerance"] or not row["same_data"]]


def copied_earlier(baseline: Path, output: Path, jobs) -> list[Path]:
    """The baseline's runs an earlier start of this card copied in (their record.json is the baseline's, byte
    for byte)."""
    from lit_attention.scorecard.card import records_of

    found = []
    for job in jobs:
        for _, run in records_of(baseline / job.folder).get("standard", {}).values():
            target = output / job.folder / run.relative_to(baseline / job.folder) / "record.json"
            if target.is_file() and target.read_bytes() == (run / "record.json").read_bytes():
                found.append(target.parent)
    return found


def copy_baseline(baseline: Path, output: Path, jobs) -> int:
    """Copy the baseline card's `standard` runs (their folders: records, per-example outcomes, checkpoints where
    kept) into the same places under `output`, where no run is yet; compare then finds them finished."""
    return sum(copy_standard(baseline / job.folder, output / job.folder) for job in jobs)


def copy_standard(source: Path, target: Path) -> int:
    """Copy the `standard` runs of one compare folder into the same places under another, where no run is yet;
    returns how many were copied."""
    from lit_attention.scorecard.card import records_of

    copied = 0
    for _, run in records_of(source).get("standard", {}).values():
        place = target / run.relative_to(source)
        if not place.exists():
            shutil.copytree(run, place)
            copied += 1
    return copied


def baseline_of(baseline: Path | None, check: list[dict] | None = None, retrained: bool = False) -> dict:
    """Where the card's standard runs came from: this card's own training, or an earlier card (its folder, and
    the commit and CPU its records name), with the re-trained check runs and whether they moved too far (then
    the runs were trained here instead, and `reused_from` is None)."""
    if baseline is None:
        return {"reused_from": None}
    earlier = json.loads((baseline / CARD_JSON).read_text(encoding="utf-8")).get("provenance", {})
    return {
        "reused_from": None if retrained else str(baseline),
        "offered": str(baseline),
        "commit": earlier.get("commit"),
        "cpu": earlier.get("cpu"),
        "checked_here": check is not None,
        "check": check or [],
        "retrained": retrained,
    }
