"""What a card trains: for each task of the protocol, the `lit-attention compare` commands that run it, each
into a folder of its own under the card's output (so `compare --report`, `--verify` and results/recompute.py
work on every one of them).

* The arms at the task's budget (its reference budget where it has a ladder): `standard`, the variant as the
  arm labelled `variant`, and, where their non-embedding parameters differ by more than the protocol's
  tolerance, `standard` resized to the variant's (compare's `--add-control`, labelled `standard~SPEC`).
* A ladder's other budgets: `standard` alone, one folder a budget.

The null card (`--null`) has no variant: its `variant` arm is `standard` itself, trained on the protocol's next
seeds (n .. 2n-1 for n seeds) in a folder of its own beside each task's (`<folder>@null`), and set against
`standard`'s seeds 0 .. n-1 by rank. The two arms are independent draws of one model, so the card's intervals
show each task's noise floor.
"""

from __future__ import annotations

from dataclasses import dataclass

from pathlib import Path

from lit_attention.recipe_names import recipe_path, shipped_name
from lit_attention.scorecard.protocol import Protocol, Task

VARIANT = "variant"  # the arm label of the variant on every card
NULL_STREAM = "@null"  # the suffix of a null card's folders of standard on its second seed stream
CHEAP = "@variant"  # the suffix of the folders of the cheaper-budget check (`--cheap-check`)


@dataclass(frozen=True)
class Job:
    task: str
    folder: str  # under the card's output: `<task>` or `<task>/<key>=<budget>`
    budget: int | None  # a ladder's budget, None for a task without one
    arms: tuple[str, ...]  # the arm labels the folder's results.csv will hold
    argv: tuple[str, ...]  # `lit-attention compare` arguments, without --output and --parallel
    null: bool = False  # a null card's folder of standard on the second seed stream (its `variant` arm)

    def command(self, output: str, parallel: int) -> list[str]:
        return [*self.argv, "--output", f"{output}/{self.folder}", "--parallel", str(parallel)]


def config_path(recipe: str) -> str:
    """The recipe's file as a path relative to the working folder where a clone's root holds it (so that the
    reports and the card name it as the committed sections do), else the shipped one's path."""
    local = Path("recipes") / f"{shipped_name(recipe)}.yaml"
    return str(local) if local.is_file() else recipe_path(recipe)


def fit_arguments(settings: dict) -> list[str]:
    return [f"--{key}={value}" for key, value in settings.items()]


BLOCK_OPTIONS = ("position", "norm", "mlp", "qk_norm")  # the block's options a card may set (--block KEY=VALUE)


def block_arguments(block: dict[str, str]) -> dict[str, str]:
    """The fit settings of `--block` options: each a field of the model's network (`model.init_args.net.KEY`)."""
    return {f"model.init_args.net.{key}": value for key, value in block.items()}


def variant_arm(spec: str, block: dict[str, str]) -> str:
    """compare's `--arm` of the card's variant: the spec, and the block options as the arm's own settings."""
    return ";".join([VARIANT, spec, *(f"{key}={value}" for key, value in block_arguments(block).items())])


def offers(task: Task, spec: str, block: dict[str, str], settings: dict) -> bool:
    """Whether the task's model family takes the block options (ALiBi and no positions are not every family's):
    its model is built with them on the meta device, and a refusal means it does not."""
    from lit_attention.errors import ConfigError
    from lit_attention.sweep.planning import non_embedding

    if not block:
        return True
    try:
        non_embedding([config_path(task.recipe)], spec, (), (), fit_arguments({**settings, **block_arguments(block)}))
    except ConfigError:
        non_embedding([config_path(task.recipe)], spec, (), (), fit_arguments(settings))  # its own fault says so here
        return False
    return True


def control_label(spec: str) -> str:
    return f"standard~{spec}"


def needs_control(task: Task, spec: str, tolerance: float, settings: dict, block: dict[str, str] | None = None) -> bool:
    """Whether the variant's non-embedding parameters (with its block options) differ from `standard`'s by more
    than `tolerance` (counted on the task's model as its settings build it, on the meta device). A block option
    that needs a control is refused: compare's control matches a variant's width, not a block's."""
    from lit_attention.errors import ConfigError
    from lit_attention.sweep.planning import non_embedding

    configs, extra = [config_path(task.recipe)], fit_arguments(settings)
    theirs = non_embedding(configs, "standard", (), (), extra)[0]
    mine = non_embedding(configs, spec, (), (), extra)[0]
    if block:
        with_block = non_embedding(configs, spec, (), (), fit_arguments({**settings, **block_arguments(block)}))[0]
        if abs(with_block - mine) > tolerance * theirs:
            options = ", ".join(f"{key}={value}" for key, value in block.items())
            raise ConfigError(
                f"--block {options} changes {task.name}'s non-embedding parameters by more than "
                f"{tolerance:.0%}, and a card has no parameter control for a block option; give another option."
            )
    return abs(mine - theirs) > tolerance * theirs


def plan_card(protocol: Protocol, spec: str, null: bool = False, block: dict[str, str] | None = None) -> list[Job]:
    """Every compare command of a card for the variant `spec` with the block options `block` (of the null card,
    with `null`), in the protocol's task order. A task whose model family does not take the block options has
    no command: the card leaves it out and says so."""
    block = block or {}
    jobs = []
    for task in protocol.tasks:
        settings = dict(task.settings)
        if task.ladder is not None:
            settings.update(task.ladder.settings_at(task.ladder.reference))
        if not offers(task, spec, block, settings):
            continue
        base = ["--config", config_path(task.recipe), "--seeds", str(protocol.seeds), "--test"]
        arms, labels = ["--variants", "standard"], ("standard",)
        if not null:
            arms += ["--arm", variant_arm(spec, block)]
            labels += (VARIANT,)
        if not null and needs_control(task, spec, protocol.parameter_match_tolerance, settings, block):
            arms += ["--add-control", spec]
            labels += (control_label(spec),)
        folder = task.name if task.ladder is None else f"{task.name}/{task.ladder.key}={task.ladder.reference}"
        budget = task.ladder and task.ladder.reference
        jobs.append(Job(task.name, folder, budget, labels, (*base, *arms, *fit_arguments(settings))))
        if null:  # the same command on the next seeds: standard's second stream, the card's `variant`
            second = (*base, "--first-seed", str(protocol.seeds), *arms, *fit_arguments(settings))
            jobs.append(Job(task.name, folder + NULL_STREAM, budget, labels, second, null=True))
        if task.ladder is None:
            continue
        for budget in task.ladder.budgets:
            if budget == task.ladder.reference:
                continue
            at = {**task.settings, **task.ladder.settings_at(budget)}
            folder = f"{task.name}/{task.ladder.key}={budget}"
            jobs.append(Job(task.name, folder, budget, ("standard",), (*base, "--variants", "standard", *fit_arguments(at))))
    return jobs


def cheap_jobs(protocol: Protocol, spec: str, block: dict[str, str] | None = None) -> list[Job]:
    """`--cheap-check`: the variant at each budget of the multiplier task's ladder below its reference, beside
    standard's ladder runs of that budget (copied in), so that the verdict a cheaper card would give can be set
    against the card's own. Not part of the card: the protocol neither trains nor reads them."""
    task = next((t for t in protocol.tasks if t.name == protocol.multiplier_task and t.ladder is not None), None)
    if task is None or not offers(task, spec, block or {}, {**task.settings, **task.ladder.settings_at(task.ladder.reference)}):
        return []
    jobs = []
    for budget in task.ladder.budgets:
        if budget >= task.ladder.reference:
            continue
        at = {**task.settings, **task.ladder.settings_at(budget)}
        argv = ("--config", config_path(task.recipe), "--seeds", str(protocol.seeds), "--test")
        argv += ("--variants", "standard", "--arm", variant_arm(spec, block or {}), *fit_arguments(at))
        jobs.append(Job(task.name, f"{task.name}/{task.ladder.key}={budget}{CHEAP}", budget, ("standard", VARIANT), argv))
    return jobs


def reference_jobs(jobs: list[Job], task: Task) -> tuple[Job, Job | None]:
    """The task's folder at its budget (its reference budget on a ladder), and a null card's folder of the
    second seed stream beside it (None on any other card)."""
    at = [j for j in jobs if j.task == task.name and (task.ladder is None or j.budget == task.ladder.reference)]
    return next(j for j in at if not j.null), next((j for j in at if j.null), None)


def runs_of(jobs: list[Job], seeds: int) -> int:
    return sum(len(job.arms) for job in jobs) * seeds
