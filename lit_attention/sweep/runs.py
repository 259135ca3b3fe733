"""What a `compare` sweep runs: the arms (variants, parameter-matched controls) x grid points x seeds,
where each run lives on disk, the `lit-attention fit` command that trains it (`Run.command`, built on
`Run.arguments`, which compare also checks the run with before the sweep starts), and its state.

A run's directory is `<output>/runs/<grid point>[/<arm>]/<variant>/seed_<n>/version_<k>/` (the
ordinary run layout with the grid point as the run name; a `--scale` sweep's runs have their size's
label in front: `<output>/runs/<size>/<grid point>/...`; `--run.recipe` keeps the recipe's own name
in the record and TensorBoard). A run is finished when its newest version holds a record.json;
otherwise re-running the sweep resumes it from its last.ckpt (`fit --ckpt_path last`, which starts it
afresh when it has none).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from lit_attention.modeling.attention import list_presets, resolve_spec
from lit_attention.modeling.variants import presets_help
from lit_attention.errors import ConfigError
from lit_attention.training.records import RECORD, config_differences, read_record
from lit_attention.training.run_dirs import recipe_name, versions, version_dir

FAILURE = "failure.json"
LIT_ATTENTION = [sys.executable, "-m", "lit_attention"]  # how every run's command starts
# Settings the sweep itself sets for every run, and the compare option to use instead.
CONTROLLED = {
    "model.attention": "--variants",
    "model.init_args.attention": "--variants",
    "seed_everything": "--seeds",
    "run.root": "--output",
    "run.name": "--output",
    "run.recipe": "--config",
    "run.settings": "--grid",
    "run.test": "--test",
    "ckpt_path": "nothing: compare resumes interrupted runs itself",
    "model": "--config to choose the task",
}


@dataclass(frozen=True)
class Run:
    arm: str  # the row label: the variant's name, or a control's ("standard~efficient")
    variant: str  # the attention spec's name
    point: tuple[tuple[str, str], ...]  # the grid values, in --grid order
    seed: int
    overrides: tuple[str, ...] = ()  # the arm's own arguments (a matched control's MLP ratio)
    size: str = ""  # with --scale: the size's label ("dim=32"), which its folder and settings carry
    budget: tuple[tuple[str, str], ...] = ()  # with --scale: the size's budget, written into the settings

    @property
    def point_label(self) -> str:
        return point_label(self.point)

    def directory(self, output: Path) -> Path:
        """`<output>/runs/<point>[/<arm>]/<variant>/seed_<n>`: what `fit --run.root/--run.name` makes."""
        return Path(output) / "runs" / self.run_name / self.variant / f"seed_{self.seed}"

    @property
    def run_name(self) -> str:
        """The grid point, and the arm when its label is not just its variant (controls, --arm): two arms
        of one variant never share a directory."""
        name = slug(self.point_label)
        name = f"{name}/{slug(self.arm)}" if self.arm != self.variant or self.overrides else name
        return f"{slug(self.size)}/{name}" if self.size else name

    def arguments(self, configs: list[str], extra: list[str]) -> list[str]:
        """The `fit` arguments that decide what this run computes: what compare checks the run with
        before the sweep starts (planning.plan_run), and the start of the command that trains it."""
        return [
            *[w for c in configs for w in ("--config", c)],
            f"--model.init_args.attention={self.variant}",
            f"--seed_everything={self.seed}",
            "--trainer.enable_progress_bar=false",
            *[f"--{key}={value}" for key, value in self.point],
            *self.overrides,
            *extra,
        ]

    def command(self, configs: list[str], extra: list[str], output: Path, test: bool) -> list[str]:
        """The `lit-attention fit` that trains this run: its arguments, then where it is written and what
        it is labelled (settings compare controls, so `extra` cannot set them) and a resume from its last
        checkpoint."""
        settings = {**dict(self.point), "arm": self.arm, **({"size": self.size, **dict(self.budget)} if self.size else {})}
        return [
            *LIT_ATTENTION,
            "fit",
            *self.arguments(configs, extra),
            f"--run.root={Path(output) / 'runs'}",
            f"--run.name={self.run_name}",
            f"--run.recipe={recipe_name(configs)}",
            f"--run.test={str(test).lower()}",
            f"--run.settings={json.dumps(settings)}",
            "--ckpt_path=last",
        ]


@dataclass
class RunState:
    run: Run
    record: dict | None = None
    failure: dict | None = None
    directory: Path | None = None  # the version directory holding `record` (its per-example file is beside it)

    @property
    def finished(self) -> bool:
        return self.record is not None


@dataclass
class Plan:
    runs: list[Run] = field(default_factory=list)
    configs: dict[tuple, dict] = field(default_factory=dict)  # (arm, point) -> the resolved config its runs use
    arms: list[str] = field(default_factory=list)  # in table order
    points: list[tuple[tuple[str, str], ...]] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    # Points past the grid's edge that `--extend-edges` added for one arm only, in the order added.
    extensions: dict[str, list[tuple[tuple[str, str], ...]]] = field(default_factory=dict)

    def points_of(self, arm: str) -> list[tuple[tuple[str, str], ...]]:
        """The grid points `arm` ran at: the grid's, then its extensions."""
        return self.points + self.extensions.get(arm, [])

    @property
    def all_points(self) -> list[tuple[tuple[str, str], ...]]:
        """Every point some arm ran at: the grid's, then the extensions in the order they were added."""
        return list(dict.fromkeys(self.points + [p for arm in self.arms for p in self.extensions.get(arm, [])]))


def parse_variants(tokens: list[str], option: str = "--variants") -> list[str]:
    """`all`, comma-separated presets (with their settings after a preset: `super,value_mix_init=xavier`
    is one spec), or whole axes specs; returns spec names, each once. `option` names the words in an error."""
    variants: list[str] = []
    for token in tokens:
        for part in re.split(r",(?=[^,=]+(?:,|$))", token) if "=" in token else token.split(","):
            part = part.strip()
            if part == "all":
                variants += list_presets()
            elif part:
                variants.append(resolve_spec(part).name)  # a typo fails here, before any training
    if not variants:
        raise ConfigError(
            f"{option} {' '.join(tokens)!r} names no variant; give 'all' or comma-separated variants, each {presets_help()}."
        )
    return list(dict.fromkeys(variants))


def axis_item(item: str, option: str, example: str) -> tuple[str, list[str]]:
    """(key, [values]) of one `KEY=V1,V2,...` item of `option` (--grid, --scale), the key written with or
    without `--`, and checked as a key compare may vary; `example` ends the sentence for a malformed one."""
    key, sep, values = item.partition("=")
    key = key.strip().lstrip("-")
    choices = [v.strip() for v in values.split(",")]
    if not sep or not key or not all(choices):
        raise ConfigError(f"{option} {item!r} is malformed; write KEY=V1,V2,... such as {example}.")
    check_not_controlled(key, f"{option} {key}")
    return key, choices


def parse_grid(items: list[str]) -> list[tuple[str, list[str]]]:
    """[(key, [values])] from `KEY=V1,V2,...` items; keys may be written with or without `--`."""
    grid: list[tuple[str, list[str]]] = []
    for item in items:
        key, choices = axis_item(item, "--grid", "model.init_args.lr=3e-4,1e-3,3e-3")
        for earlier, _ in grid:
            if key == earlier:
                raise ConfigError(f"--grid {key} is given twice; put all its values in one --grid {key}=V1,V2,...")
            if same_key(key, earlier):
                raise ConfigError(
                    f"--grid {earlier} and --grid {key} set the same key; put all its values in one --grid {earlier}=V1,V2,..."
                )
        check_distinct_values(key, choices)
        grid.append((key, choices))
    return grid


def same_key(a: str, b: str) -> bool:
    """Whether two spellings of a key set one setting (`model.lr` is `model.init_args.lr`)."""
    return a.replace(".init_args.", ".") == b.replace(".init_args.", ".")


def check_distinct_values(key: str, values: list[str]) -> None:
    """Each value of an axis once: `1e-3,0.001` would run one point twice and count its seeds double."""
    seen: dict[object, str] = {}
    for value in values:
        try:
            meaning: object = float(value)
        except ValueError:
            meaning = value
        if meaning in seen:
            twice = f"{value!r} twice" if seen[meaning] == value else f"{seen[meaning]!r} and {value!r}, which are one value"
            raise ConfigError(f"--grid {key} gives {twice}; give each value once.")
        seen[meaning] = value


def check_not_controlled(key: str, where: str) -> None:
    key = key.lstrip("-").split("=")[0]
    bare = key.replace(".init_args.", ".")
    for controlled, instead in CONTROLLED.items():
        if key == controlled or bare == controlled.replace(".init_args.", "."):
            raise ConfigError(f"{where} sets {key}, which compare sets for every run itself; use {instead}.")


def check_extra_arguments(extra: list[str], grid: list[tuple[str, list[str]]]) -> None:
    """Arguments passed on to every fit may not set what the sweep varies."""
    for word in extra:
        if not word.startswith("--"):
            continue
        key = word[2:].split("=")[0]
        check_not_controlled(key, f"The extra argument {word!r}")
        for grid_key, _ in grid:
            if same_key(key, grid_key):
                raise ConfigError(f"The extra argument {word!r} sets {key}, which --grid varies; drop one of them.")


def baseline_arm(plan: Plan, baseline: str) -> str:
    """The arm `--baseline` names: an arm's label, or the variant of exactly one arm (with
    --match-parameters, `standard` is the arm `standard~efficient`)."""
    if baseline in plan.arms:
        return baseline
    name = parse_variants([baseline], "--baseline")[0]
    matching = list(dict.fromkeys(run.arm for run in plan.runs if run.variant == name))
    if len(matching) == 1:
        return matching[0]
    raise ConfigError(f"--baseline {baseline!r} is not one of this sweep's arms; choose one of {', '.join(plan.arms)}.")


def comparison_pair(plan: Plan, text: str, item: str, baseline: str, flag: str) -> tuple[str, str]:
    """(arm, reference) from `ARM[:REFERENCE]` (each arm named as --baseline names one; no REFERENCE: the
    baseline); `item` and `flag` name what the user wrote in an error."""
    arm, _, reference = text.partition(":")
    try:
        pair = (baseline_arm(plan, arm), baseline_arm(plan, reference) if reference else baseline)
    except ConfigError:
        raise ConfigError(
            f"{flag} {item!r} names an arm this sweep does not have; its arms are {', '.join(plan.arms)}."
        ) from None
    if pair[0] == pair[1]:
        raise ConfigError(f"{flag} {item!r} compares {pair[0]} with itself; name another arm or reference.")
    return pair


def split_comparisons(text: str, plan: Plan) -> list[str]:
    """The `ARM[:REFERENCE]` items of `--primary`'s text, split at the commas between items but not at those
    inside an arm's name (`identity_query,kv_heads=2`, as the report prints it): a comma ends an item when
    what precedes it is a name of the sweep (an arm's label or its variant) that no longer name continues."""
    names = set(plan.arms) | {run.variant for run in plan.runs}
    items, current = [], ""
    parts = text.split(",")
    for index, part in enumerate(parts):
        current = f"{current},{part}" if current else part
        side = current.rpartition(":")[2].strip()  # the name being read: the reference, else the arm
        if index + 1 < len(parts):
            extended = f"{side},{parts[index + 1].partition(':')[0].strip()}"
            if any(name == extended or name.startswith(extended + ",") for name in names):
                continue  # the comma is inside a name
        if current.strip():
            items.append(current.strip())
        current = ""
    return items


def parse_primary(plan: Plan, text: str | None, baseline: str) -> list[tuple[str, str]] | None:
    """[(arm, reference)] from `ARM[:REFERENCE],...` (each arm named as --baseline names one); None
    without --primary."""
    if text is None:
        return None
    pairs = []
    for item in split_comparisons(text, plan):
        pairs.append(comparison_pair(plan, item, item, baseline, "--primary"))
    if not pairs:
        raise ConfigError("--primary is empty; name the comparisons to confirm, such as --primary super,efficient.")
    return list(dict.fromkeys(pairs))


def parse_equivalence(
    plan: Plan, items: list[str], baseline: str, primary: list[tuple[str, str]] | None
) -> dict[tuple[str, str], float]:
    """{(arm, reference): margin} from `ARM[:REFERENCE]=MARGIN` items (--equivalence): comparisons declared
    in advance to test for equivalence within ±MARGIN, in the metric's units; each must be one of the
    --primary comparisons, whose family sets the interval it is read from."""
    margins = {}
    for item in items:
        pair_text, _, margin_text = item.rpartition("=")  # the margin after the last '=': a name may hold one
        try:
            margin = float(margin_text)
        except ValueError:
            margin = math.nan
        if not (math.isfinite(margin) and margin > 0):
            raise ConfigError(
                f"--equivalence {item!r} needs a positive margin after '=', in the metric's units, "
                "such as --equivalence identity_query=0.02."
            )
        pair = comparison_pair(plan, pair_text.strip(), item, baseline, "--equivalence")
        if primary is not None and pair not in primary:
            declared = ", ".join(a if r == baseline else f"{a}:{r}" for a, r in primary)
            raise ConfigError(
                f"--equivalence {item!r} is not one of the --primary comparisons ({declared}); an "
                "equivalence is confirmatory, so add it to --primary."
            )
        if pair in margins:
            raise ConfigError(f"--equivalence gives {pair_text.strip()!r} twice; give each comparison one margin.")
        margins[pair] = margin
    return margins


def parse_point(plan: Plan, text: str | None) -> tuple | None:
    """The grid point `--at` names, written as the tables write it (`lr=2e-3`); None without --at."""
    if text is None:
        return None
    if len(plan.points) < 2:
        raise ConfigError(f"--at {text!r} needs a --grid of two or more points to choose from.")
    labels = {point_label(point): point for point in plan.points}
    if text.strip() not in labels:
        raise ConfigError(
            f"--at {text!r} is not a point of this sweep's grid (points past its edges are not: not "
            f"every arm runs there); choose one of: {', '.join(labels)}."
        )
    return labels[text.strip()]


def parse_arms(items: list[str], grid) -> list[tuple[str, str, tuple[str, ...]]]:
    """[(label, variant spec name, (--key=value, ...))] from `LABEL;VARIANT;KEY=VALUE;...` items."""
    arms = []
    for item in items:
        parts = [part.strip() for part in item.split(";")]
        if len(parts) < 2 or not parts[0] or not parts[1] or not all("=" in part for part in parts[2:]):
            raise ConfigError(
                f"--arm {item!r} is malformed; write 'LABEL;VARIANT;KEY=VALUE;...', such as "
                "'mlp4.75;standard;model.init_args.net.mlp_ratio=4.75'."
            )
        overrides = tuple(f"--{part.lstrip('-')}" for part in parts[2:])
        check_extra_arguments(list(overrides), grid)
        arms.append((parts[0], parse_variants([parts[1]])[0], overrides))
    return arms


def grid_points(grid: list[tuple[str, list[str]]]) -> list[tuple[tuple[str, str], ...]]:
    keys = [key for key, _ in grid]
    return [tuple(zip(keys, values)) for values in itertools.product(*(values for _, values in grid))]


def point_label(point: tuple[tuple[str, str], ...]) -> str:
    """`lr=1e-3,weight_decay=0.1` (the last part of each key), or `default` without a grid."""
    if not point:
        return "default"
    return ",".join(f"{key.split('.')[-1]}={value}" for key, value in point)


def slug(text: str) -> str:
    return re.sub(r"[^\w.,=+~-]", "_", text)


def check_folder_names(arms: list[str], points: list[tuple]) -> None:
    """Two arm labels (or grid points) that become one folder name (`a b` and `a_b`: a name keeps letters,
    digits and . , = + ~ - only; `A` and `a`: some file systems ignore case) would share their runs and
    inspect reports: refused."""
    for what, names in (("arms", arms), ("grid points", [point_label(p) for p in points])):
        folders: dict[str, str] = {}
        for name in names:
            other = folders.setdefault(slug(name).casefold(), name)
            if other != name:
                raise ConfigError(
                    f"The {what} {other!r} and {name!r} would share the folder {slug(name)!r} (folder "
                    "names keep letters, digits and . , = + ~ - only, whatever their case); give them "
                    "names that differ in those."
                )


def find_state(run: Run, output: Path, needs_test: bool = False, wanted: dict | None = None) -> RunState:
    """A run's state on disk: its record (the newest version holding one) or its last failure. A record
    without test scores when `needs_test` counts as unfinished: fitting it again trains nothing (the run
    is at its end) and adds them. A record made with settings other than `wanted` (the planned config)
    is refused: the sweep would report numbers this command did not ask for."""
    base = run.directory(output)
    for number in reversed(versions(base)):
        path = version_dir(base, number) / RECORD
        if path.is_file():
            record = read_record(path)
            changed = config_differences(record["config"], wanted) if wanted and record.get("config") else []
            if changed:
                raise ConfigError(
                    f"{str(base)!r} holds a run made with other settings than this command's ({'; '.join(changed[:3])}); "
                    "use another --output, or delete that run to train it again."
                )
            if needs_test and record.get("test") is None:
                return RunState(run)
            return RunState(run, record=record, directory=path.parent)
    failure = base / FAILURE
    return RunState(run, failure=json.loads(failure.read_text()) if failure.is_file() else None)


def write_failure(run: Run, output: Path, status: int, message: str) -> None:
    base = run.directory(output)
    base.mkdir(parents=True, exist_ok=True)
    (base / FAILURE).write_text(json.dumps({"exit_status": status, "message": message}) + "\n")


def clear_failure(run: Run, output: Path) -> None:
    (run.directory(output) / FAILURE).unlink(missing_ok=True)
