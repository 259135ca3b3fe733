"""A card's numbers, from the runs' records alone (the folders plan.py's compare commands wrote):

* per task, the variant's difference in the protocol's metric from `standard` and, where the card has one,
  from the parameter-matched control: paired over seeds (t-interval), and over seeds and test items (a two-way
  bootstrap of the runs' per-example outcomes) where the runs kept them;
* Holm over the card's tasks (the differences from `standard`, one per task, one family), each task's verdict
  from it (better, worse, or no detectable difference), and the smallest difference the design detects with
  the protocol's power at the family's first Holm level (α/m, two-sided, as measured: (t_{1-α/2m} + t_power) × SE);
* the trivial floor the task's `standard` must clear, and whether it did;
* on a ladder, the compute multiplier of the variant and of the control (stats/compute_multiplier.py), in
  training FLOPs and in measured training seconds (on the machine the records name);
* the overall verdict by the protocol's rule.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from lit_attention.errors import ConfigError
from lit_attention.reports.item_comparisons import matrices, outcomes_of
from lit_attention.scorecard.plan import VARIANT, Job, reference_jobs
from lit_attention.scorecard.protocol import Protocol, Task
from lit_attention.stats.compute_multiplier import compute_multiplier
from lit_attention.stats.item_statistics import two_way_bootstrap
from lit_attention.stats.statistics import paired_difference, verdict, with_holm
from lit_attention.stats.validity import PAIRED, UNCHECKED, pairing


def version_number(run: Path) -> int:
    return int(run.name.rpartition("_")[2]) if run.name.startswith("version_") and run.name[8:].isdigit() else -1


def records_of(folder: Path) -> dict[str, dict[int, tuple[dict, Path]]]:
    """{arm label: {seed: (record, run folder)}} of a compare output's finished runs: in each seed's folder, the
    newest version that holds a record (the one compare reads)."""
    found: dict[str, dict[int, tuple[dict, Path]]] = {}
    newest: dict[Path, Path] = {}
    for path in folder.glob("runs/**/record.json"):
        run = path.parent
        if run.parent not in newest or version_number(run) > version_number(newest[run.parent]):
            newest[run.parent] = run
    for run in sorted(newest.values()):
        record = json.loads((run / "record.json").read_text(encoding="utf-8"))
        arm = (record.get("settings") or {}).get("arm", record["variant"])
        found.setdefault(arm, {})[int(record["seed"])] = (record, run)
    return found


def values_of(runs: dict[int, tuple[dict, Path]], metric: str) -> dict[int, float]:
    return {seed: float(record["test"][metric]) for seed, (record, _) in runs.items() if metric in (record.get("test") or {})}


def check_finite(task: Task, arms: dict) -> None:
    """A run whose test metric is not a number (it diverged) is named in one sentence: no statistic of the card
    can take it, and dropping it would unpair the seeds."""
    for label, runs in arms.items():
        for seed, value in sorted(values_of(runs, task.metric).items()):
            if not math.isfinite(value):
                raise ConfigError(
                    f"task {task.name!r}: the {label} run of seed {seed} ended with {task.metric} = {value} (it diverged), "
                    "so the card cannot compare it; see its folder's compare.log, and lower that task's learning rate "
                    "in a new protocol version."
                )


def floor_of(task: Task, record: dict) -> tuple[float, str]:
    """The task's trivial level in its loss (nats): the bigram table's test loss, or chance among the answers."""
    if task.floor == "bigram":
        floors = record.get("ngram_floors") or {}
        return float(floors["bigram"]["test"]), "bigram table (test)"
    config, data = record["config"], record["config"].get("data.class_path", "").rsplit(".", 1)[-1]
    answers = {
        "MQARDataModule": lambda: config["data.init_args.vocab_size"] - config["data.init_args.vocab_size"] // 2,
        "SelectiveCopyDataModule": lambda: config["data.init_args.vocab_size"] - 2,
        "TransductionDataModule": lambda: config["data.init_args.data_tokens"] + 1,  # a data token or eos
        "ImageDataModule": lambda: config["model.init_args.net.num_classes"],
    }
    if data not in answers:
        raise ConfigError(f"task {task.name!r}: no chance level is known for {data}; give its floor as bigram, or add one.")
    count = answers[data]()
    return math.log(count), f"chance among {count} answers"


def item_interval(arm: dict, reference: dict, metric: str, confidence: float) -> tuple[float, float] | None:
    """The two-way bootstrap interval of arm − reference over seeds and test items, or None where the runs
    kept no per-item outcomes of the metric (only losses and accuracies decompose by item)."""
    measure = {"loss": "loss", "acc": "correct"}.get(metric.split("/", 1)[1])
    if measure is None:
        return None
    sides = [{s: o for s, (r, d) in runs.items() if (o := outcomes_of(r, d, "test")) is not None} for runs in (arm, reference)]
    made = matrices(*sides, measure)
    if isinstance(made, str):
        return None
    mine, theirs, weights, _, _ = made
    return two_way_bootstrap(mine, theirs, weights, confidence=confidence)


def check_paired(task: Task, arms: dict) -> None:
    """Every arm began each seed with standard's first batch on the same data (its records say so); a card
    whose arms saw other data (a reused baseline made with other data, say) is refused, not reported."""
    reference = {seed: record for seed, (record, _) in arms["standard"].items()}
    for label, runs in arms.items():
        found = pairing({seed: record for seed, (record, _) in runs.items()}, reference)
        if found.status not in (PAIRED, UNCHECKED):
            where = f" (splits {', '.join(found.splits)})" if found.splits else ""
            raise ConfigError(
                f"task {task.name!r}: the {label} runs are {found.status} with standard's on seeds "
                f"{', '.join(map(str, found.seeds))}{where}, so they cannot be compared; where standard's runs came "
                "from another card (--baseline), train the card afresh without it."
            )


def difference_entry(d, items) -> dict:
    return {
        "difference": d.mean,
        "low": d.low,
        "high": d.high,
        "p": d.p,
        "seeds": d.n,
        "items_low": None if items is None else items[0],
        "items_high": None if items is None else items[1],
    }


def ladder_multipliers(task: Task, output: Path, jobs: list[Job], arms: dict, seeds: list[int], confidence: float) -> dict:
    """The variant's and the control's multipliers on the ladder, in FLOPs and in training seconds."""
    ladder_jobs = [job for job in jobs if job.task == task.name and not job.null]
    budgets = sorted(job.budget for job in ladder_jobs)
    folders = {job.budget: output / job.folder for job in ladder_jobs}
    for budget, folder in folders.items():
        have = set(records_of(folder).get("standard", {}))
        if not set(seeds) <= have:
            raise ConfigError(
                f"{folder} lacks finished standard runs of seeds {sorted(set(seeds) - have)}; run the scorecard "
                "command again to finish them."
            )
    standard = {budget: records_of(folder)["standard"] for budget, folder in folders.items()}
    ladder = np.array([[float(standard[b][s][0]["test"][task.metric]) for s in seeds] for b in budgets])  # (budgets, seeds)
    found = {}
    for label, runs in arms.items():
        if label == "standard":
            continue
        entry = {}
        mine = np.array([float(runs[s][0]["test"][task.metric]) for s in seeds])
        for cost_name, cost_of in (
            ("flops", lambda r: float(r["train_flops"])),
            ("seconds", lambda r: float(r["train_seconds"])),
        ):
            costs = np.array([np.median([cost_of(standard[b][s][0]) for s in seeds]) for b in budgets])
            own = float(np.median([cost_of(runs[s][0]) for s in seeds]))
            if np.any(np.diff(costs) <= 0):  # measured seconds need not rise with the budget on a busy machine
                entry[cost_name] = None
                continue
            if cost_name == "seconds" and len(machines(standard, runs, seeds)) > 1:  # another machine's seconds
                entry[cost_name] = None
                continue
            m = compute_multiplier(ladder, costs, mine, own, confidence=confidence)
            entry[cost_name] = {
                "estimate": m.estimate,
                "censored": m.censored,
                "low": m.low,
                "low_censored": m.low_censored,
                "high": m.high,
                "high_censored": m.high_censored,
                "range": [m.range_low, m.range_high],
                "text": m.text(),
            }
        found[label] = entry
    losses = {b: float(np.mean(row)) for b, row in zip(budgets, ladder)}
    flops = {b: float(np.median([float(standard[b][s][0]["train_flops"]) for s in seeds])) for b in budgets}
    law = law_check(flops, losses, arms, seeds, task.metric, found)
    found["ladder"] = {"budgets": budgets, "key": task.ladder.key, "losses": losses, "flops": flops, "law": law}
    return found


def machines(standard: dict, runs: dict, seeds: list[int]) -> set:
    """The (CPU, threads, devices, commit) the ladder's and the arm's records name: seconds compare within one
    only. The commit stands for the session: runs reused from an earlier card were timed under another load
    (the null card, standard against itself with a reused ladder, read 2.16x in seconds and 0.98x in FLOPs)."""
    records = [standard[b][s][0] for b in standard for s in seeds] + [runs[s][0] for s in seeds]
    return {tuple(str(r["provenance"].get(key)) for key in ("cpu", "threads", "devices", "commit")) for r in records}


def law_check(flops: dict, losses: dict, arms: dict, seeds: list[int], metric: str, found: dict) -> dict:
    """L = E + A C^-α fitted to the ladder's mean losses (stats/scaling_laws.py), and each arm's multiplier read
    on it (`law_check` beside its FLOPs reading): a check on the monotone reading, never the headline (four
    points and three parameters; it extrapolates where the reading is censored)."""
    from lit_attention.stats.scaling_laws import fit_law

    budgets = sorted(flops)
    law = fit_law([flops[b] for b in budgets], [losses[b] for b in budgets], pure=False)
    for label, entry in found.items():
        mine = float(np.mean([float(arms[label][s][0]["test"][metric]) for s in seeds]))
        own = float(np.median([float(arms[label][s][0]["train_flops"]) for s in seeds]))
        reached = float(law.size_at(mine))
        entry["flops"]["law_check"] = reached / own if math.isfinite(reached) else None
    return {"E": law.E, "A": law.A, "alpha": law.alpha, "converged": law.converged}


def build_card(protocol: Protocol, spec: str, output: Path, jobs: list[Job], block: dict[str, str] | None = None) -> dict:
    """The card's every number, as a JSON-able dict (scorecard.json)."""
    from scipy import stats

    tasks, versus_standard, versus_control, provenance, commits = [], [], [], {}, set()
    null_seeds = None
    planned = {job.task for job in jobs}
    not_offered = [task.name for task in protocol.tasks if task.name not in planned]  # the block options' refusals
    for task in protocol.tasks:
        if task.name not in planned:
            continue
        job, second = reference_jobs(jobs, task)
        arms = records_of(output / job.folder)
        for folder, found in ((job, arms), *([(second, records_of(output / second.folder))] if second else [])):
            missing = [label for label in folder.arms if len(found.get(label, {})) < protocol.seeds]
            if missing:
                raise ConfigError(
                    f"{output / folder.folder} lacks finished runs of {', '.join(missing)}; run the scorecard command "
                    "again to finish them."
                )
        if second is not None:  # the null card: standard's second seed stream, by rank, is its `variant`
            stream = records_of(output / second.folder)["standard"]
            null_seeds = sorted(stream)
            arms[VARIANT] = {rank: stream[seed] for rank, seed in enumerate(null_seeds)}
        check_paired(task, {label: runs for label, runs in arms.items() if not (second and label == VARIANT)})
        check_finite(task, arms)
        values = {label: values_of(runs, task.metric) for label, runs in arms.items()}
        seeds = sorted(values["standard"])
        control = next((label for label in job.arms if label.startswith("standard~")), None)
        first = arms["standard"][seeds[0]][0]
        provenance = provenance or arms[VARIANT][seeds[0]][0]["provenance"]  # the runs this card trained
        commits.update(str(r["provenance"].get("commit")) for runs in arms.values() for r, _ in runs.values())
        floor, floor_label = floor_of(task, first)
        entry = {
            "name": task.name,
            "what": task.what,
            "metric": task.metric,
            "means": {label: float(np.mean(list(v.values()))) for label, v in values.items()},
            "floor": floor,
            "floor_label": floor_label,
            "standard_clears_floor": bool(np.mean(list(values["standard"].values())) < floor),
            "parameters": {label: int(runs[seeds[0]][0]["params"]["non_embedding"]) for label, runs in arms.items()},
            "flops": {
                label: float(np.median([float(r["train_flops"]) for r, _ in runs.values()])) for label, runs in arms.items()
            },
            "control": control,
            "folder": job.folder,  # where its arms' records are (and, on the null card, its variant's)
            "null_folder": second.folder if second else None,
        }
        if task.beside:
            entry["beside"] = {label: float(np.mean(list(values_of(runs, task.beside).values()))) for label, runs in arms.items()}
        d = paired_difference(values[VARIANT], values["standard"], protocol.confidence)
        versus_standard.append(d)
        entry["versus_standard"] = difference_entry(
            d, item_interval(arms[VARIANT], arms["standard"], task.metric, protocol.confidence)
        )
        if control is not None:
            c = paired_difference(values[VARIANT], values[control], protocol.confidence)
            versus_control.append(c)
            entry["versus_control"] = difference_entry(
                c, item_interval(arms[VARIANT], arms[control], task.metric, protocol.confidence)
            )
        else:
            versus_control.append(None)
        if task.ladder is not None:
            entry["multipliers"] = ladder_multipliers(task, output, jobs, arms, seeds, protocol.confidence)
        tasks.append(entry)
    family = len(versus_standard)
    for entry, d in zip(tasks, with_holm(versus_standard)):
        entry["versus_standard"].update(p_holm=d.p_holm, verdict=verdict(d, "min"))
        level = (1 - protocol.confidence) / family
        entry["detectable"] = (stats.t.ppf(1 - level / 2, d.df) + stats.t.ppf(protocol.power, d.df)) * d.error
    controls = [c for c in versus_control if c is not None]
    for entry, c in zip([e for e in tasks if "versus_control" in e], with_holm(controls)):
        entry["versus_control"].update(p_holm=c.p_holm, verdict=verdict(c, "min"))
    return {
        "cheap": cheap_readings(protocol, spec, output, tasks, versus_standard, block),
        "block": dict(block or {}),  # the block options of the variant arm (--block), beside its spec
        "not_offered": not_offered,  # tasks whose model family does not take those options: left out
        "protocol": {"version": protocol.version, "sha256": protocol.sha256, "source": protocol.source},
        "variant": spec,
        # On the null card: the seeds of standard's second stream, paired with seeds 0 .. n-1 by rank.
        "null": None if null_seeds is None else {"seeds": null_seeds, "paired": "by rank: independent runs"},
        "seeds": protocol.seeds,
        "confidence": protocol.confidence,
        "power": protocol.power,
        "tasks": tasks,
        "rule": {"multiplier_task": protocol.multiplier_task, "margins": protocol.margins},
        "overall": overall(protocol, tasks),
        # Each folder's compare command: with --report added it rebuilds that folder's tables from its records.
        "commands": {job.folder: job.command(str(output), 1) for job in jobs},
        "provenance": {key: provenance.get(key) for key in ("commit", "dirty", "cpu", "threads", "torch", "lit_attention")},
        "commits": sorted(commits),
    }


def cheap_readings(
    protocol: Protocol, spec: str, output: Path, tasks: list[dict], versus_standard: list, block: dict | None = None
) -> list[dict] | None:
    """`--cheap-check`: at each ladder budget below the reference, the variant's difference from standard there
    and the verdict the card would give with it (Holm over the card's tasks, this budget's p-value in place of
    the reference budget's), beside the card's own verdict. None where those runs were not trained."""
    from lit_attention.scorecard.plan import cheap_jobs

    found = []
    names = [t["name"] for t in tasks]
    for job in cheap_jobs(protocol, spec, block):
        arms = records_of(output / job.folder)
        if any(len(arms.get(label, {})) < protocol.seeds for label in job.arms):
            return None
        task = next(t for t in protocol.tasks if t.name == job.task)
        d = paired_difference(
            values_of(arms[VARIANT], task.metric), values_of(arms["standard"], task.metric), protocol.confidence
        )
        family = list(versus_standard)
        family[names.index(job.task)] = d
        cheap = with_holm(family)[names.index(job.task)]
        reference = task.ladder.reference
        found.append(
            {
                "task": job.task,
                "budget": job.budget,
                "share_of_reference": job.budget / reference,
                "folder": job.folder,
                "difference": d.mean,
                "low": d.low,
                "high": d.high,
                "p": d.p,
                "p_holm": cheap.p_holm,
                "verdict": verdict(cheap, "min"),
                "reference_verdict": tasks[names.index(job.task)]["versus_standard"]["verdict"],
            }
        )
    return found or None


def overall(protocol: Protocol, tasks: list[dict]) -> dict:
    """The protocol's rule: the multiplier's lower bound above 1 and above the control's estimate, no task
    worse (after Holm) by more than its margin, and `standard` clear of every task's floor."""
    worse = [
        t["name"]
        for t in tasks
        if t["versus_standard"]["verdict"] == "worse"
        and t["versus_standard"]["difference"] > protocol.margins.get(t["name"], 0.0)
    ]
    ladder = next((t for t in tasks if t["name"] == protocol.multiplier_task), None)
    reasons = [f"worse than standard beyond its margin on {', '.join(worse)}"] if worse else []
    uncleared = [t["name"] for t in tasks if not t["standard_clears_floor"]]
    if uncleared:  # a task whose baseline stays at its trivial level measures nothing about attention
        reasons.append(f"standard does not clear its floor on {', '.join(uncleared)}, so the card is not valid there")
    if ladder is not None:
        mine = ladder["multipliers"][VARIANT]["flops"]
        control = ladder["multipliers"].get(ladder["control"] or "", {}).get("flops")
        if mine["low_censored"] == "below" or mine["low"] <= 1:
            reasons.append(f"the compute multiplier's lower bound ({mine['text']}) is not above 1")
        elif control is not None and control["censored"] == "above":  # its estimate is only a bound from below
            reasons.append(
                f"the parameter control's multiplier is beyond the ladder ({control['text']}), so whether the variant's lower bound exceeds it cannot be decided"
            )
        elif control is not None and mine["low"] <= control["estimate"]:
            reasons.append(f"the multiplier's lower bound is not above the parameter control's {control['estimate']:.3g}×")
    elif protocol.multiplier_task:  # left out (its family refuses the block options): the rule cannot be met
        reasons.append(f"the card has no {protocol.multiplier_task} task, so no compute multiplier to read")
    worth = not reasons
    return {"worth_more_compute_than_it_costs": worth, "reasons": reasons}
