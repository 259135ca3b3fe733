"""A section's runs as the report saw them: the records on disk, the command's grid, seeds, baseline and
primary family, and each arm's tuned grid point (with the --extend-edges rounds replayed)."""

from __future__ import annotations

import itertools
import json
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

TIE = 1e-6  # equal validation means, relative: the records keep float32 values


def number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def label(point: tuple) -> str:
    return ",".join(f"{key.split('.')[-1]}={value}" for key, value in point) if point else "default"


@dataclass
class Sweep:
    command: str
    grid: list[tuple]  # the grid's own points, each ((key, value), ...)
    seeds: list[int]
    baseline: str
    primary: list[tuple[str, str]] | None
    extend_rounds: int  # 0 without --extend-edges
    cross_fit: bool
    at: tuple | None
    threshold: float | None = None  # --success-threshold
    cells: dict = field(default_factory=dict)  # {(arm, point): {seed: record}}
    places: dict = field(default_factory=dict)  # {(arm, point): {seed: the folder of its record.json}}
    arms: list[str] = field(default_factory=list)
    points: dict = field(default_factory=dict)  # {arm: the grid's points, then its extensions}

    @property
    def mode(self) -> str:
        return next(iter(next(iter(self.cells.values())).values()))["mode"]

    @property
    def monitor(self) -> str:
        return next(iter(next(iter(self.cells.values())).values()))["monitor"]


def options(words: list[str]) -> dict[str, list[list[str]]]:
    """{--option: [the words after each of its occurrences]}."""
    found: dict[str, list[list[str]]] = {}
    current = None
    for word in words:
        if word.startswith("--"):
            name, _, value = word.partition("=")
            current = found.setdefault(name, [])
            current.append([value] if value else [])
        elif current is not None:
            current[-1].append(word)
    return found


def parse_command(results_md: str) -> tuple[str, dict]:
    found = re.search(r"^`(lit-attention compare [^`]*)`$", results_md, re.MULTILINE)
    if found is None:
        raise ValueError("the report names no `lit-attention compare ...` command: nothing says how it was made")
    command = found.group(1)
    return command, options(shlex.split(command, posix=False))


# What a scaled sweep's records add to their settings besides the grid point and the arm: the size's label
# and its budget (--tokens-per-parameter). They name the size, not a point tuned over.
SIZE_SETTINGS = ("size", "tokens_per_parameter", "tokens_per_step", "max_steps", "warmup_steps")


def scaled(directory: Path) -> bool:
    return "--scale" in parse_command((directory / "results.md").read_text(encoding="utf-8"))[1]


def load(directory: Path, runs: Path | None = None) -> Sweep:
    """The sweep `directory`'s results.md reports, from the records under `runs` (default: its runs/; a
    size of a scaled sweep: <output>/runs/<size>)."""
    command, given = parse_command((directory / "results.md").read_text(encoding="utf-8"))
    axes = []
    for words in given.get("--grid", []):
        key, _, values = words[0].partition("=")
        axes.append([(key, value) for value in values.split(",")])
    grid = [tuple(point) for point in itertools.product(*axes)]
    n = int(given["--seeds"][0][0]) if "--seeds" in given else 3
    first = int(given["--first-seed"][0][0]) if "--first-seed" in given else 0
    primary = None
    if "--primary" in given:
        baseline = given["--baseline"][0][0] if "--baseline" in given else "standard"
        primary = [tuple(pair.split(":", 1)) if ":" in pair else (pair, baseline) for pair in given["--primary"][0][0].split(",")]
    rounds = int(given["--max-extensions"][0][0]) if "--max-extensions" in given else 3
    at = None
    if "--at" in given:
        at = tuple(item.split("=", 1) for item in given["--at"][0][0].split(","))
    sweep = Sweep(
        command,
        grid,
        list(range(first, first + n)),
        given["--baseline"][0][0] if "--baseline" in given else "standard",
        primary,
        rounds if "--extend-edges" in given else 0,
        "--cross-fit" in given,
        at,
    )
    for path in sorted((runs or directory / "runs").rglob("record.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        settings = dict(record["settings"])
        arm = settings.pop("arm")
        if "size" in settings:
            settings = {key: value for key, value in settings.items() if key not in SIZE_SETTINGS}
        point = tuple(settings.items())
        sweep.cells.setdefault((arm, point), {})[record["seed"]] = record
        sweep.places.setdefault((arm, point), {})[record["seed"]] = path.parent
        if arm not in sweep.arms:
            sweep.arms.append(arm)
    if "--success-threshold" in given:
        sweep.threshold = float(given["--success-threshold"][0][0])
    if sweep.at is not None:  # --at names keys by their last part
        full = {key.split(".")[-1]: key for key, _ in grid[0]}
        sweep.at = tuple((full.get(k, k), v) for k, v in sweep.at)
    order = arm_order(given)
    if order and "all" not in order:
        # Records of arms the command does not name (a later, larger command writing into the same output)
        # are outside this report's plan: orphans(), noted, not compared.
        sweep.arms = [arm for arm in sweep.arms if arm in order]
    if "--scale" in given:  # a size where an arm has no record yet still plans (and reports) its runs
        sweep.arms += [arm for arm in order if arm not in sweep.arms]
    sweep.arms.sort(key=lambda arm: order.index(arm) if arm in order else len(order))
    sweep.points = {arm: list(grid) for arm in sweep.arms}
    replay_extensions(sweep)
    return sweep


def arm_order(given: dict) -> list[str]:
    """The arms in the order the command names them: variants, controls (standard~X), --arm."""
    names = [w for words in given.get("--variants", []) for w in _variant_names(words)]
    names += [f"standard~{words[0]}" for words in given.get("--add-control", [])]
    names += [words[0].split(";")[0] for words in given.get("--arm", [])]
    return names


def _variant_names(words: list[str]) -> list[str]:
    """`a,b,c d,k=v`: the first word lists presets by commas; a later word is one preset with settings."""
    names = []
    for i, word in enumerate(words):
        names += word.split(",") if i == 0 else [word]
    return names


def best(record: dict) -> float | None:
    return record["best"]["value"] if record.get("best") else None


def test(record: dict) -> float | None:
    return (record.get("test") or {}).get(record["monitor"].replace("val/", "test/"))


def setting_key(point: tuple) -> tuple:
    return tuple((0, number(v), "") if number(v) is not None else (1, 0.0, v) for _, v in point)


def choose(sweep: Sweep, arm: str, points: list[tuple], seeds: set[int] | None = None) -> tuple[tuple | None, list]:
    """(the point with the best mean validation value over `seeds`, the points tied with it). Points where
    one of those seeds did not finish take part only when no point is complete."""
    wanted = set(sweep.seeds) if seeds is None else seeds

    def runs(p):
        return {s: r for s, r in sweep.cells.get((arm, p), {}).items() if s in wanted and best(r) is not None}

    complete = [p for p in points if wanted <= runs(p).keys()]
    scored = [(sum(map(best, runs(p).values())) / len(runs(p)), p) for p in (complete or points) if runs(p)]
    if not scored:
        return None, []
    top = (max if sweep.mode == "max" else min)(m for m, _ in scored)
    tied = [p for m, p in scored if abs(m - top) <= TIE * max(abs(m), abs(top))]
    chosen = min(tied, key=setting_key)
    return chosen, [p for p in tied if p != chosen]


def edges(point: tuple, points: list[tuple]) -> list[tuple[str, str]]:
    """(key, "lowest"/"highest") for each numeric axis through `point` that it ends."""
    found = []
    for key, value in point:
        rest = [kv for kv in point if kv[0] != key]
        line = [dict(p)[key] for p in points if [kv for kv in p if kv[0] != key] == rest]
        values = [number(v) for v in dict.fromkeys(line)]
        if len(values) < 2 or None in values:
            continue
        if number(value) == max(values):
            found.append((key, "highest"))
        elif number(value) == min(values):
            found.append((key, "lowest"))
    return found


def beyond(point: tuple, key: str, side: str, points: list[tuple]) -> float | None:
    """The value one step past the edge, at the ratio of the axis's last step (the difference if signs mix)."""
    rest = [kv for kv in point if kv[0] != key]
    line = sorted({number(dict(p)[key]) for p in points if [kv for kv in p if kv[0] != key] == rest})
    near, end = (line[-2], line[-1]) if side == "highest" else (line[1], line[0])
    return end * (end / near) if near * end > 0 else end + (end - near)


def replay_extensions(sweep: Sweep) -> None:
    """--extend-edges: while an arm's choice ends an axis, the point past it joins that arm's points, round
    by round, as long as the round has runs on disk (a round with none was never run)."""
    on_disk = {}
    for arm, point in sweep.cells:
        on_disk.setdefault(arm, []).append(point)
    for _ in range(sweep.extend_rounds):
        added = []
        for arm in sweep.arms:
            chosen, _ = choose(sweep, arm, sweep.points[arm])
            if chosen is None:
                continue
            for key, side in edges(chosen, sweep.points[arm]):
                value = beyond(chosen, key, side, sweep.points[arm])
                match = [
                    p
                    for p in on_disk[arm]
                    if all(
                        k == key and math.isclose(number(v), value, rel_tol=1e-3) or k != key and (k, v) in chosen for k, v in p
                    )
                ]
                if match and match[0] not in sweep.points[arm]:
                    sweep.points[arm].append(match[0])
                    added.append(arm)
        if not added:
            break


def tuned(sweep: Sweep) -> dict[str, tuple[tuple, list]]:
    return {arm: found for arm in sweep.arms if (found := choose(sweep, arm, sweep.points[arm]))[0] is not None}


def orphans(sweep: Sweep) -> list[str]:
    """The points on disk that no arm's plan includes (an extension round a later rule no longer asks for)."""
    return [f"{arm} {label(point)}" for (arm, point) in sweep.cells if point not in sweep.points.get(arm, [])]
