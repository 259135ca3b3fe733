"""`lit-attention scorecard --variant SPEC`: what an attention variant is worth, on a declared, versioned set of
offline tasks (a protocol: protocol.py, protocols/v1.yaml), in one command that trains what it needs and
writes one card.

    lit-attention scorecard --variant nonlinear_query --output runs/scorecards/nonlinear_query --parallel 2
    lit-attention scorecard --variant super --dry-run      # the compare commands and their run counts, nothing run
    lit-attention scorecard --null --baseline runs/scorecards/v1/nonlinear_query   # standard against itself

Each task is one or more `lit-attention compare` runs into folders of their own under --output (plan.py), so
an interrupted card resumes where it stopped, and `compare --report`, `--verify` and results/recompute.py work
on each. Then scorecard.json (every number), scorecard.md (one page) and scorecard.png (the ladder) are written
from the records (card.py, report.py).
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from lit_attention.analysis.command import SentenceParser
from lit_attention.atomic_files import replace_file
from lit_attention.errors import ConfigError

CARD_JSON, CARD_MD = "scorecard.json", "scorecard.md"
PLAN_JSON = "scorecard-plan.json"  # written before the first run: which card the folder's runs belong to


def parser() -> argparse.ArgumentParser:
    found = SentenceParser(
        prog="lit-attention scorecard",
        description=__doc__.split("\n\n")[0],
        allow_abbrev=False,
        epilog="example:\n  lit-attention scorecard --variant nonlinear_query --output runs/scorecards/nonlinear_query --parallel 2",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    found.add_argument(
        "--variant",
        metavar="SPEC",
        help="the attention variant: a preset, a preset with "
        "settings ('standard,kv_heads=2') or every axis, as compare's --variants takes one",
    )
    found.add_argument(
        "--block",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a block option of the variant's arm (position, norm, mlp, qk_norm; e.g. qk_norm=true, "
        "position=rope), against the default block of standard; repeatable. --variant defaults to standard; "
        "a task whose model family does not take the option is left out of the card, which says so",
    )
    found.add_argument(
        "--null",
        action="store_true",
        help="the null card: standard against its own runs on the protocol's next seeds, paired by rank; its "
        "intervals show each task's noise floor (no --variant, or --variant standard)",
    )
    found.add_argument("--protocol", default="v1", help="a shipped protocol version (v1) or a protocol file (default v1)")
    found.add_argument(
        "--output", metavar="DIR", help="where the card and its runs go (default runs/scorecards/<protocol>/<card>)"
    )
    found.add_argument("--parallel", type=int, default=1, help="runs at a time within each compare (default 1)")
    found.add_argument(
        "--cheap-check",
        action="store_true",
        help="also train the variant at the ladder's budgets below the reference (a quarter and a half of it "
        "under v1), beside standard's runs there: the card then sets the verdict a cheaper card would give "
        "beside its own (a trust check; the protocol's verdict does not read them)",
    )
    found.add_argument(
        "--against",
        metavar="DIR",
        help="after the card, print it beside every card of the same protocol under DIR (results/scorecards/v1), "
        "one table, tasks in the protocol's order",
    )
    found.add_argument(
        "--dry-run", action="store_true", help="print the compare commands and how many runs each trains; run nothing"
    )
    found.add_argument(
        "--baseline",
        metavar="CARD",
        help="reuse the standard runs of an earlier card of the same protocol (its folder): seed 0 of each task is "
        "re-trained here first, and only if none moved past its task's margin are they copied in, paired by seed, "
        "so that only this variant's runs are trained",
    )
    return found


def card_name(spec: str, block: dict[str, str], null: bool = False) -> str:
    """A card's folder name: `null`, the spec (`standard,kv_heads=2` → `standard+kv_heads-2`), and its block
    options after it (`standard+qk_norm-true`)."""
    if null:
        return "null"
    words = [spec, *(f"{key}={value}" for key, value in block.items())]
    return "+".join(words).replace("/", "_").replace(",", "+").replace("=", "-")


def default_output(protocol: str, spec: str, null: bool = False, block: dict[str, str] | None = None) -> Path:
    return Path("runs") / "scorecards" / Path(protocol).stem / card_name(spec, block or {}, null)


def parse_block(items: list[str]) -> dict[str, str]:
    """{option: value} of the --block items; one sentence for an unknown option or a malformed item."""
    from lit_attention.scorecard.plan import BLOCK_OPTIONS

    block: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in BLOCK_OPTIONS or not value:
            raise ConfigError(
                f"--block {item!r} is not KEY=VALUE with KEY one of {', '.join(BLOCK_OPTIONS)}; write, say, --block qk_norm=true."
            )
        if key in block:
            raise ConfigError(f"--block {key} is given twice; give each option once.")
        offered = option_labels(key)
        if value not in offered:
            raise ConfigError(f"--block {key}={value} is not a value any model family offers; give one of {', '.join(offered)}.")
        block[key] = value
    return block


def option_labels(key: str) -> list[str]:
    """Every value some model family offers for the block option `key`, as a fit argument writes it."""
    from lit_attention.modeling.block_options import FAMILIES, option_label, option_values

    labels = [option_label(v) for config_class in FAMILIES.values() for v in option_values(config_class, key) or ()]
    return list(dict.fromkeys(labels))


def card_variant(args) -> str:
    """The spec the card is of: --variant, or `standard` on the null card; one sentence for a card that would
    compare standard with itself on the same seeds, or a null card of another variant."""
    from lit_attention.modeling.variants import resolve_spec

    if args.variant is None and not args.null and not args.block:
        raise ConfigError(
            "give --variant SPEC (the attention variant the card is of), --block KEY=VALUE, or --null for the null card."
        )
    spec = args.variant or "standard"
    name = resolve_spec(spec).name  # a bad spec is one sentence before any work
    if args.null and (name != "standard" or args.block):
        given = f"--variant {spec!r}" if name != "standard" else "--block"
        raise ConfigError(f"--null is the card of standard against itself, not of {given}; leave it out.")
    if not args.null and name == "standard" and not args.block:
        raise ConfigError(
            f"--variant {spec!r} is standard itself: on the same seeds every difference would be 0; give --null for "
            "standard against its own runs on other seeds."
        )
    return spec


def run(argv: list[str]) -> None:
    from lit_attention.scorecard.baseline import check_baseline, reuse_baseline
    from lit_attention.scorecard.plan import CHEAP, plan_card, runs_of
    from lit_attention.scorecard.protocol import load_protocol

    args = parser().parse_args(argv)
    if args.parallel < 1:
        raise ConfigError(f"--parallel {args.parallel} is invalid; give at least 1.")
    spec = card_variant(args)
    block = parse_block(args.block)
    if args.against is not None:  # a folder without cards is said before anything trains
        from lit_attention.scorecard.against import reference_cards

        reference_cards(Path(args.against))
    protocol = load_protocol(args.protocol)
    output = Path(args.output) if args.output else default_output(args.protocol, spec, args.null, block)
    jobs = plan_card(protocol, spec, null=args.null, block=block)
    if args.dry_run:
        card = "the null card" if args.null else f"variant {card_name(spec, block)!r}"
        print(
            f"Protocol {protocol.version} (sha256 {protocol.sha256[:12]}), {card}: "
            f"{len(jobs)} compare commands, {runs_of(jobs, protocol.seeds)} runs, into {output}/"
        )
        for job in jobs:
            print(
                f"  [{job.task}] {len(job.arms) * protocol.seeds} runs: lit-attention compare "
                + shlex.join(job.command(str(output), args.parallel))
            )
        if args.cheap_check and not args.null:
            from lit_attention.scorecard.plan import cheap_jobs

            for job in cheap_jobs(protocol, spec, block):  # standard's runs there are copied from the ladder
                print(
                    f"  [--cheap-check] {protocol.seeds} runs: lit-attention compare "
                    + shlex.join(job.command(str(output), args.parallel))
                )
        return
    earlier = check_card_folder(output, protocol, spec, args.null, block)
    if args.baseline is not None:
        check_baseline(Path(args.baseline), protocol, output)
        if earlier and earlier.get("baseline") != args.baseline:
            began = f"with {earlier['baseline']!r}" if earlier.get("baseline") else "without one"
            raise ConfigError(
                f"--baseline {args.baseline!r} differs from the baseline this card began {began}; resume it as it "
                "began, or give another --output."
            )
    given = args.baseline if args.baseline is not None else earlier.get("baseline")  # a resumed card keeps its baseline
    baseline = None if given is None else check_baseline(Path(given), protocol, output)
    from lit_attention.compare import run as compare

    output.mkdir(parents=True, exist_ok=True)
    plan = {
        "variant": spec,
        "null": args.null,
        "block": block,
        "protocol": {"version": protocol.version, "sha256": protocol.sha256},
        "baseline": given,
    }
    text = json.dumps(plan, indent=2) + "\n"
    replace_file(output / PLAN_JSON, lambda file: file.write(text.encode("utf-8")))
    entry = reuse_baseline(protocol, jobs, baseline, output) if baseline is not None else {"reused_from": None}
    for job in jobs:
        print(f"scorecard: task {job.task}, {job.folder}", flush=True)
        compare(job.command(str(output), args.parallel))
    if args.cheap_check and not args.null:
        from lit_attention.scorecard.baseline import copy_standard
        from lit_attention.scorecard.plan import cheap_jobs

        for job in cheap_jobs(protocol, spec, block):
            copy_standard(output / job.folder.removesuffix(CHEAP), output / job.folder)
            print(f"scorecard: the cheaper-budget check, {job.folder}", flush=True)
            compare(job.command(str(output), args.parallel))
    card = write_card(protocol, spec, output, jobs, entry, block)
    if args.against is not None:
        from lit_attention.scorecard.against import against_table

        print("\n" + against_table(card, output, Path(args.against)), flush=True)


def write_card(protocol, spec: str, output: Path, jobs, baseline: dict | None = None, block: dict | None = None) -> dict:
    from lit_attention.scorecard.card import build_card
    from lit_attention.scorecard.report import FIGURE, card_figure, card_markdown

    card = build_card(protocol, spec, output, jobs, block)
    card["baseline"] = baseline or {"reused_from": None}
    text = json.dumps(card, indent=2, sort_keys=True, default=float) + "\n"
    replace_file(output / CARD_JSON, lambda file: file.write(text.encode("utf-8")))
    page = card_markdown(card)
    replace_file(output / CARD_MD, lambda file: file.write(page.encode("utf-8")))
    card_figure(card, output / FIGURE)
    print(f"Wrote {output / CARD_MD}, {CARD_JSON} and {FIGURE}.", flush=True)
    return card


def check_card_folder(output: Path, protocol, spec: str, null: bool = False, block: dict | None = None) -> dict:
    """A folder begun for another protocol's or variant's card (or the null card's, or not the null card's) is
    refused (its runs would be mixed, the other variant's under this one's arm); returns what the folder's plan
    says ({} for a new folder)."""
    earlier = output / PLAN_JSON if (output / PLAN_JSON).is_file() else output / CARD_JSON
    if not earlier.is_file():
        return {}
    card = json.loads(earlier.read_text(encoding="utf-8"))
    if earlier.name == CARD_JSON:  # a card written before plans were kept: its baseline as the plan says it
        card["baseline"] = (card.get("baseline") or {}).get("reused_from")
    was_null, was_block, block = bool(card.get("null")), card.get("block") or {}, block or {}
    if card["protocol"]["sha256"] != protocol.sha256 or card["variant"] != spec or was_null != null or was_block != block:
        theirs, mine = (
            "the null card" if n else f"the card of {card_name(v, b)!r}"
            for n, v, b in ((was_null, card["variant"], was_block), (null, spec, block))
        )
        raise ConfigError(
            f"--output {str(output)!r} holds {theirs} under protocol {card['protocol']['version']} "
            f"(sha256 {card['protocol']['sha256'][:12]}); give another folder for {mine} under {protocol.version} "
            f"(sha256 {protocol.sha256[:12]})."
        )
    return card
