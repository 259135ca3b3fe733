"""A scorecard protocol: the versioned file that declares a card's tasks, arms, seeds and decision rule
(protocols/v1.yaml is the first). It is read and checked here, before anything is trained; its sha256 goes on
every card, so two cards are comparable only where their versions and hashes agree.

    protocol = load_protocol("v1")          # a shipped version by name, or a path to a file of one's own
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lit_attention.errors import ConfigError

SHIPPED = Path(__file__).with_name("protocols")
FLOORS = ("bigram", "chance")
TOP_KEYS = {"version", "seeds", "confidence", "power", "arms", "rule", "tasks", "excluded"}
TASK_KEYS = {"name", "what", "recipe", "settings", "metric", "beside", "floor", "ladder"}
LADDER_KEYS = {"key", "budgets", "reference", "with"}


@dataclass(frozen=True)
class Ladder:
    """The baseline trained at every budget (values of `key`), the other arms at `reference`; each key of
    `scaled` is set to its share of the budget (warm-up 0.1: a tenth of the steps)."""

    key: str
    budgets: tuple[int, ...]
    reference: int
    scaled: dict[str, float] = field(default_factory=dict)

    def settings_at(self, budget: int) -> dict[str, int]:
        return {self.key: budget, **{key: max(1, round(share * budget)) for key, share in self.scaled.items()}}


@dataclass(frozen=True)
class Task:
    name: str
    what: str
    recipe: str
    settings: dict
    metric: str
    beside: str | None
    floor: str
    ladder: Ladder | None


@dataclass(frozen=True)
class Protocol:
    version: str
    sha256: str
    seeds: int
    confidence: float
    power: float
    parameter_match_tolerance: float
    multiplier_task: str | None
    margins: dict[str, float]
    tasks: tuple[Task, ...]
    excluded: dict[str, str]
    source: str  # where it was read from


def protocol_path(name: str) -> Path:
    """A shipped version's file (`v1`), or the path given."""
    shipped = SHIPPED / f"{name}.yaml"
    if "/" not in name and not name.endswith((".yaml", ".yml")):
        if not shipped.is_file():
            versions = ", ".join(sorted(p.stem for p in SHIPPED.glob("*.yaml")))
            raise ConfigError(
                f"--protocol {name!r} is not a shipped protocol; valid choices are {versions}, or a path to a protocol file."
            )
        return shipped
    path = Path(name)
    if not path.is_file():
        raise ConfigError(f"--protocol {name!r} is not a file; give a shipped version (v1) or a protocol file's path.")
    return path


def load_protocol(name: str) -> Protocol:
    """The protocol `name` (a shipped version or a path), checked; one sentence for anything wrong."""
    path = protocol_path(name)
    data = path.read_bytes()
    where = f"protocol {str(path)!r}"
    try:
        raw = yaml.safe_load(data)
    except yaml.YAMLError as error:
        raise ConfigError(f"{where} is not valid YAML ({str(error).splitlines()[0]}); fix the file.") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} holds no mapping; a protocol has keys {', '.join(sorted(TOP_KEYS))}.")
    unknown(raw, TOP_KEYS, where)
    for key in ("version", "seeds", "tasks"):
        if key not in raw:
            raise ConfigError(f"{where} has no {key!r}; a protocol declares version, seeds and tasks.")
    seeds = raw["seeds"]
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 2:
        raise ConfigError(f"{where}: seeds {seeds!r} is invalid; give a whole number of at least 2 (5 or more for a multiplier).")
    confidence, power = raw.get("confidence", 0.95), raw.get("power", 0.80)
    for label, value in (("confidence", confidence), ("power", power)):
        if not isinstance(value, (int, float)) or not 0 < value < 1:
            raise ConfigError(f"{where}: {label} {value!r} is invalid; give a share between 0 and 1, such as 0.95.")
    tasks = raw["tasks"]
    if not isinstance(tasks, list) or not tasks:
        raise ConfigError(f"{where}: tasks must be a non-empty list of tasks.")
    parsed = tuple(task_of(entry, i, where) for i, entry in enumerate(tasks))
    names = [task.name for task in parsed]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"{where}: task names must differ; {', '.join(repeated)} is given more than once.")
    arms, rule = raw.get("arms") or {}, raw.get("rule") or {}
    unknown(arms, {"parameter_match_tolerance"}, f"{where}, arms")
    unknown(rule, {"multiplier_task", "margins"}, f"{where}, rule")
    multiplier_task = rule.get("multiplier_task")
    ladders = [task.name for task in parsed if task.ladder is not None]
    if multiplier_task is not None and multiplier_task not in ladders:
        raise ConfigError(
            f"{where}: rule.multiplier_task {multiplier_task!r} is not a task with a ladder; valid choices are "
            f"{', '.join(ladders) or 'none (no task has a ladder)'}."
        )
    margins = rule.get("margins") or {}
    unknown(margins, set(margins), f"{where}, rule.margins")
    for name, margin in margins.items():
        if not is_number(margin) or margin < 0:
            raise ConfigError(
                f"{where}: rule.margins.{name} {margin!r} is invalid; give a number of 0 or more, in the task's loss."
            )
    stray = sorted(set(margins) - set(names))
    if stray:
        raise ConfigError(f"{where}: rule.margins names {', '.join(stray)}, not a task; valid choices are {', '.join(names)}.")
    return Protocol(
        version=str(raw["version"]),
        sha256=hashlib.sha256(data).hexdigest(),
        seeds=seeds,
        confidence=float(confidence),
        power=float(power),
        parameter_match_tolerance=float(arms.get("parameter_match_tolerance", 0.01)),
        multiplier_task=multiplier_task,
        margins={name: float(margin) for name, margin in margins.items()},
        tasks=parsed,
        excluded=dict(raw.get("excluded") or {}),
        source=str(path),
    )


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def unknown(mapping: dict, known: set[str], where: str) -> None:
    if not isinstance(mapping, dict):
        raise ConfigError(f"{where} must be a mapping of {', '.join(sorted(known))}.")
    stray = sorted(set(mapping) - known)
    if stray:
        raise ConfigError(f"{where} has the unknown key {stray[0]!r}; valid keys are {', '.join(sorted(known))}.")


def task_of(entry, index: int, where: str) -> Task:
    if not isinstance(entry, dict) or "name" not in entry:
        raise ConfigError(f"{where}: task {index + 1} has no name; each task is a mapping with a name.")
    at = f"{where}, task {entry['name']!r}"
    unknown(entry, TASK_KEYS, at)
    for key in ("recipe", "metric", "floor"):
        if key not in entry:
            raise ConfigError(f"{at} has no {key!r}; a task declares its recipe, metric and floor.")
    if entry["floor"] not in FLOORS:
        raise ConfigError(f"{at}: floor {entry['floor']!r} is invalid; valid choices are {', '.join(FLOORS)}.")
    if not (str(entry["metric"]).startswith("test/") and str(entry["metric"]).endswith("loss")):
        raise ConfigError(
            f"{at}: metric {entry['metric']!r} is invalid; a card compares test losses (lower is better): give test/loss."
        )
    if entry.get("beside") is not None and not str(entry["beside"]).startswith("test/"):
        raise ConfigError(f"{at}: beside {entry['beside']!r} is invalid; give a test metric, such as test/acc.")
    settings = entry.get("settings") or {}
    unknown(settings, set(settings), at)  # a mapping of fit keys
    ladder = entry.get("ladder")
    return Task(
        name=str(entry["name"]),
        what=str(entry.get("what", "")),
        recipe=str(entry["recipe"]),
        settings=dict(settings),
        metric=str(entry["metric"]),
        beside=entry.get("beside"),
        floor=entry["floor"],
        ladder=None if ladder is None else ladder_of(ladder, at),
    )


def ladder_of(ladder, at: str) -> Ladder:
    unknown(ladder, LADDER_KEYS, f"{at}, ladder")
    budgets = ladder.get("budgets")
    if not isinstance(budgets, list) or len(budgets) < 2 or any(not isinstance(b, int) or b < 1 for b in budgets):
        raise ConfigError(f"{at}: ladder.budgets {budgets!r} is invalid; give 2 or more whole numbers of at least 1.")
    if budgets != sorted(set(budgets)):
        raise ConfigError(f"{at}: ladder.budgets {budgets} must rise; give them smallest first, each once.")
    if ladder.get("reference") not in budgets:
        raise ConfigError(f"{at}: ladder.reference {ladder.get('reference')!r} is not one of its budgets {budgets}.")
    if "key" not in ladder:
        raise ConfigError(f"{at}: the ladder has no key; give the fit key its budgets set, such as trainer.max_steps.")
    scaled = ladder.get("with") or {}
    unknown(scaled, set(scaled), f"{at}, ladder.with")
    for key, share in scaled.items():
        if not is_number(share) or not 0 < share <= 1:
            raise ConfigError(f"{at}: ladder.with.{key} {share!r} is invalid; give a share of the budget, above 0 and at most 1.")
    return Ladder(str(ladder["key"]), tuple(budgets), int(ladder["reference"]), {k: float(v) for k, v in scaled.items()})
