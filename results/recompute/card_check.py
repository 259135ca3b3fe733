"""A scorecard (`lit-attention scorecard`, results/scorecards/<protocol>/<variant>/), from its runs' records alone.

Each of its folders is a compare output and is checked as a section (section_check.py). Then the card's own
numbers in scorecard.json, unrounded, to float rounding:
- per task, the variant's paired difference from `standard` and from the parameter control (mean, t-interval,
  p), Holm over the tasks' differences from `standard`, each verdict, and the smallest detectable difference,
  (t_{1-α/2m} + t_power) × SE with m the tasks;
- each task's floor: the bigram table's test loss the records keep, or the log of the number of answers the
  data's settings allow;
- on the ladder, each arm's compute multiplier in FLOPs: standard's mean test loss per budget made
  non-increasing (pool-adjacent-violators, written out here), the monotone cubic of scipy's PchipInterpolator
  through it in log FLOPs, and the crossing found with brentq (the card bisects: agreement to 1e-7);
- the verdict by the protocol's rule.
The bootstrap intervals (the multiplier's, and those over seeds and items) are randomised: skipped and counted.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from scipy import interpolate, optimize
from scipy import stats as scipy_stats

import seed_statistics as stats
from printed_numbers import Checker
from section_check import check_section

CARD = "scorecard.json"


def card_folders(results: Path) -> list[Path]:
    return sorted(path.parent for path in (results / "scorecards").glob("*/*/" + CARD))


def arm_records(folder: Path) -> dict[str, dict[int, dict]]:
    """{arm: {seed: record}} of a compare output: in each seed's folder, the record of the highest version_<k>."""
    newest: dict[Path, tuple[int, Path]] = {}
    for path in folder.glob("runs/**/version_*/record.json"):
        k = int(path.parent.name.split("_")[-1])
        if path.parent.parent not in newest or k > newest[path.parent.parent][0]:
            newest[path.parent.parent] = (k, path)
    found: dict[str, dict[int, dict]] = {}
    for _, path in sorted(newest.values()):
        record = json.loads(path.read_text(encoding="utf-8"))
        arm = (record.get("settings") or {}).get("arm", record["variant"])
        found.setdefault(arm, {})[int(record["seed"])] = record
    return found


def chance_answers(record: dict) -> int:
    config = record["config"]
    data = config["data.class_path"].rsplit(".", 1)[-1]
    vocab = config.get("data.init_args.vocab_size")
    return {
        "MQARDataModule": lambda: vocab - vocab // 2,  # values are [V/2, V)
        "SelectiveCopyDataModule": lambda: vocab - 2,  # blank and separator are never answers
        "TransductionDataModule": lambda: config["data.init_args.data_tokens"] + 1,  # a data token, or eos
        "ImageDataModule": lambda: config["model.init_args.net.num_classes"],
    }[data]()


def non_increasing(values: list[float]) -> list[float]:
    """Pool adjacent violators: the least-squares non-increasing sequence."""
    blocks: list[list[float]] = []
    for value in values:
        blocks.append([value, 1.0])
        while len(blocks) > 1 and blocks[-2][0] < blocks[-1][0]:
            v, n = blocks.pop()
            blocks[-1] = [(blocks[-1][0] * blocks[-1][1] + v * n) / (blocks[-1][1] + n), blocks[-1][1] + n]
    return [v for v, n in blocks for _ in range(int(n))]


def multiplier(losses: list[float], costs: list[float], loss: float, own: float) -> tuple[float, str | None]:
    curve = non_increasing(losses)
    if loss > curve[0]:
        return costs[0] / own, "below"
    if loss < curve[-1]:
        return costs[-1] / own, "above"
    first = next(i for i, c in enumerate(curve) if c <= loss)
    if first == 0 or curve[first] == loss:
        return costs[first] / own, None
    x = np.log(costs)
    cubic = interpolate.PchipInterpolator(x, curve)
    root = optimize.brentq(lambda at: float(cubic(at)) - loss, x[first - 1], x[first], xtol=1e-14)
    return math.exp(root) / own, None


def task_arms(directory: Path, card: dict, task: dict) -> dict[str, dict[int, dict]]:
    """{arm: {seed: record}} of the task's folder at its reference budget. On the null card its `variant` is
    standard's second seed stream (the folder beside it), taken by rank: its k-th seed against standard's."""
    if "folder" not in task:  # a card written before cards named their folders: the one with a variant arm
        folder = next(f for f in card["commands"] if "variant" in arm_records(directory / f) and f.split("/")[0] == task["name"])
        return arm_records(directory / folder)
    arms = arm_records(directory / task["folder"])
    if task.get("null_folder"):
        stream = arm_records(directory / task["null_folder"])["standard"]
        arms["variant"] = {rank: stream[seed] for rank, seed in enumerate(sorted(stream))}
    return arms


def check_card(directory: Path, checker: Checker) -> None:
    card = json.loads((directory / CARD).read_text(encoding="utf-8"))
    for folder in card["commands"]:
        check_section(directory / folder, checker, name=f"{directory.name}/{folder}")
    results, controls, where = [], [], directory.name
    for task in card["tasks"]:
        arms = task_arms(directory, card, task)
        if task.get("null_folder"):  # the seeds the null card says its variant's runs had
            stream = sorted(arm_records(directory / task["null_folder"])["standard"])
            checker.text(f"{where}, {task['name']}, null seeds", str(card["null"]["seeds"]), str(stream))
        metric = task["metric"]
        values = {arm: {s: r["test"][metric] for s, r in runs.items()} for arm, runs in arms.items()}
        at = f"{where}, {task['name']}"
        for side, reference in (("versus_standard", "standard"), ("versus_control", task.get("control"))):
            if reference is None:
                continue
            r = stats.paired(values["variant"], values[reference])
            written = task[side]
            for column, mine in (("difference", r.mean), ("low", r.low), ("high", r.high), ("p", r.p)):
                checker.close(f"{at}, {side} {column}", repr(written[column]), mine)
            checker.skip(2)  # the interval over seeds and items: a bootstrap
            if side == "versus_standard":
                results.append((task, r))
            else:
                controls.append((task, r))
        first = arms["standard"][min(arms["standard"])]
        if task["floor_label"].startswith("bigram"):
            checker.close(f"{at}, floor", repr(task["floor"]), first["ngram_floors"]["bigram"]["test"])
        else:
            checker.close(f"{at}, floor", repr(task["floor"]), math.log(chance_answers(first)))
        mean = float(np.mean(list(values["standard"].values())))
        checker.text(f"{at}, standard clears its floor", str(task["standard_clears_floor"]), str(mean < task["floor"]))
        if "multipliers" in task:
            check_multipliers(directory, card, task, arms, at, checker)
    check_baseline_rows(directory, card, checker)
    check_cheap_rows(directory, card, results, checker)
    stats.correct([r for _, r in results], [True] * len(results))
    level = (1 - card["confidence"]) / len(results)
    for task, r in results:
        at = f"{where}, {task['name']}"
        checker.close(f"{at}, p (Holm)", repr(task["versus_standard"]["p_holm"]), r.p_holm)
        checker.text(f"{at}, verdict", task["versus_standard"]["verdict"], stats.verdict(r, "min"))
        detectable = (scipy_stats.t.ppf(1 - level / 2, r.df) + scipy_stats.t.ppf(card["power"], r.df)) * r.error
        checker.close(f"{at}, smallest detectable", repr(task["detectable"]), detectable)
    stats.correct([r for _, r in controls], [True] * len(controls))
    for task, r in controls:
        at = f"{where}, {task['name']}, versus control"
        checker.close(f"{at}, p (Holm)", repr(task["versus_control"]["p_holm"]), r.p_holm)
        checker.text(f"{at}, verdict", task["versus_control"]["verdict"], stats.verdict(r, "min"))
    check_rule(card, [(task, stats.verdict(r, "min"), r.mean) for task, r in results], checker)


def check_cheap_rows(directory: Path, card: dict, results: list, checker: Checker) -> None:
    """--cheap-check: the variant's difference from standard at a cheaper ladder budget, and the verdict with
    that budget's p-value in the card's Holm family in place of the reference budget's."""
    for row in card.get("cheap") or []:
        at = f"{directory.name}, cheaper budget {row['budget']}"
        arms = arm_records(directory / row["folder"])
        metric = next(t["metric"] for t in card["tasks"] if t["name"] == row["task"])
        values = {arm: {s: r["test"][metric] for s, r in runs.items()} for arm, runs in arms.items()}
        family = []
        for task, _ in results:
            if task["name"] == row["task"]:
                mine = stats.paired(values["variant"], values["standard"])
                family.append(mine)
            else:
                family.append(stats.paired(*task_values(directory, card, task)))
        stats.correct(family, [True] * len(family))
        for column, value in (("difference", mine.mean), ("low", mine.low), ("high", mine.high), ("p", mine.p)):
            checker.close(f"{at}, {column}", repr(row[column]), value)
        checker.close(f"{at}, p (Holm)", repr(row["p_holm"]), mine.p_holm)
        checker.text(f"{at}, verdict", row["verdict"], stats.verdict(mine, "min"))


def task_values(directory: Path, card: dict, task: dict) -> tuple[dict, dict]:
    arms = task_arms(directory, card, task)
    values = {arm: {s: r["test"][task["metric"]] for s, r in runs.items()} for arm, runs in arms.items()}
    return values["variant"], values["standard"]


def check_baseline_rows(directory: Path, card: dict, checker: Checker) -> None:
    """A reused baseline's re-train check: each re-trained run's test metric (baseline-check/<folder>) and, where
    the runs were reused, the copied record's, and how far apart they are."""
    baseline = card.get("baseline") or {}
    folders = {task["name"]: task.get("folder") for task in card["tasks"]}
    for row in baseline.get("check", []):
        at = f"{directory.name}, baseline check, {row['task']}"
        here = arm_records(directory / "baseline-check" / folders[row["task"]])["standard"][row["seed"]]
        checker.close(f"{at}, here", repr(row["here"]), here["test"][row["metric"]])
        if baseline.get("reused_from"):
            recorded = arm_records(directory / folders[row["task"]])["standard"][row["seed"]]["test"][row["metric"]]
            checker.close(f"{at}, recorded", repr(row["recorded"]), recorded)
            checker.close(f"{at}, moved", repr(row["moved"]), abs(here["test"][row["metric"]] - recorded))


def check_rule(card: dict, verdicts: list, checker: Checker) -> None:
    """The protocol's rule, as the card states it: the multiplier's lower bound above 1 and above the control's
    estimate, no task worse beyond its margin, standard clear of every floor."""
    margins = card["rule"]["margins"]
    fine = all(not (v == "worse" and mean > margins.get(task["name"], 0.0)) for task, v, mean in verdicts)
    fine &= all(task["standard_clears_floor"] for task in card["tasks"])
    ladder = next((t for t in card["tasks"] if t["name"] == card["rule"]["multiplier_task"]), None)
    fine &= ladder is not None or not card["rule"]["multiplier_task"]  # a card without its ladder cannot pass
    if ladder is not None:
        mine = ladder["multipliers"]["variant"]["flops"]
        control = ladder["multipliers"].get(ladder["control"] or "", {}).get("flops")
        fine &= mine["low_censored"] != "below" and mine["low"] > 1  # the bound itself is a bootstrap: read, not redrawn
        # A control censored above the ladder has only a lower bound: the comparison cannot be decided.
        fine &= control is None or (control["censored"] != "above" and mine["low"] > control["estimate"])
    checker.text(f"{card['variant']}, verdict", str(card["overall"]["worth_more_compute_than_it_costs"]), str(fine))


def check_multipliers(directory: Path, card: dict, task: dict, arms: dict, at: str, checker: Checker) -> None:
    ladder = task["multipliers"]["ladder"]
    seeds = sorted(arms["standard"])
    standard = {}
    for budget in ladder["budgets"]:
        folder = directory / task["name"] / f"{ladder['key']}={budget}"
        standard[budget] = arm_records(folder)["standard"]
    losses = [float(np.mean([standard[b][s]["test"][task["metric"]] for s in seeds])) for b in ladder["budgets"]]
    costs = [float(np.median([standard[b][s]["train_flops"] for s in seeds])) for b in ladder["budgets"]]
    for arm, entry in task["multipliers"].items():
        if arm == "ladder":
            continue
        loss = float(np.mean([arms[arm][s]["test"][task["metric"]] for s in seeds]))
        own = float(np.median([arms[arm][s]["train_flops"] for s in seeds]))
        m, side = multiplier(losses, costs, loss, own)
        checker.close(f"{at}, {arm} multiplier (FLOPs)", repr(entry["flops"]["estimate"]), m, relative=1e-7)
        checker.text(f"{at}, {arm} multiplier censored", str(entry["flops"]["censored"]), str(side))
        checker.skip(2)  # its bootstrap interval
