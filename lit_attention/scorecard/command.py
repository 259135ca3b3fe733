"""`lit-attention scorecard --variant SPEC`: what an attention variant is worth, on a declared, versioned set of
offline tasks (a protocol: protocol.py, protocols/v1.yaml), in one command that trains what it needs and
writes one card.

    lit-attention scorecard --variant nonlinear_query --output runs/scorecards/nonlinear_query --parallel 2
    lit-attention scorecard --variant super --dry-run      # the compare commands and their run counts, nothing run

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
        required=True,
        metavar="SPEC",
        help="the attention variant: a preset, a preset with "
        "settings ('standard,kv_heads=2') or every axis, as compare's --variants takes one",
    )
    found.add_argument("--protocol", default="v1", help="a shipped protocol version (v1) or a protocol file (default v1)")
    found.add_argument(
        "--output", metavar="DIR", help="where the card and its runs go (default runs/scorecards/<protocol>/<variant>)"
    )
    found.add_argument("--parallel", type=int, default=1, help="runs at a time within each compare (default 1)")
    found.add_argument(
        "--dry-run", action="store_true", help="print the compare commands and how many runs each trains; run nothing"
    )
    return found


def default_output(protocol: str, spec: str) -> Path:
    return Path("runs") / "scorecards" / Path(protocol).stem / spec.replace("/", "_").replace(",", "+").replace("=", "-")


def run(argv: list[str]) -> None:
    from lit_attention.modeling.variants import resolve_spec
    from lit_attention.scorecard.plan import plan_card, runs_of
    from lit_attention.scorecard.protocol import load_protocol

    args = parser().parse_args(argv)
    if args.parallel < 1:
        raise ConfigError(f"--parallel {args.parallel} is invalid; give at least 1.")
    resolve_spec(args.variant)  # a bad spec is one sentence before any work
    protocol = load_protocol(args.protocol)
    output = Path(args.output) if args.output else default_output(args.protocol, args.variant)
    jobs = plan_card(protocol, args.variant)
    if args.dry_run:
        print(
            f"Protocol {protocol.version} (sha256 {protocol.sha256[:12]}), variant {args.variant!r}: "
            f"{len(jobs)} compare commands, {runs_of(jobs, protocol.seeds)} runs, into {output}/"
        )
        for job in jobs:
            print(
                f"  [{job.task}] {len(job.arms) * protocol.seeds} runs: lit-attention compare "
                + shlex.join(job.command(str(output), args.parallel))
            )
        return
    check_card_folder(output, protocol, args.variant)
    from lit_attention.compare import run as compare

    output.mkdir(parents=True, exist_ok=True)
    for job in jobs:
        print(f"scorecard: task {job.task}, {job.folder}", flush=True)
        compare(job.command(str(output), args.parallel))
    write_card(protocol, args.variant, output, jobs)


def write_card(protocol, spec: str, output: Path, jobs) -> dict:
    from lit_attention.scorecard.card import build_card
    from lit_attention.scorecard.report import FIGURE, card_figure, card_markdown

    card = build_card(protocol, spec, output, jobs)
    text = json.dumps(card, indent=2, sort_keys=True, default=float) + "\n"
    replace_file(output / CARD_JSON, lambda file: file.write(text.encode("utf-8")))
    page = card_markdown(card)
    replace_file(output / CARD_MD, lambda file: file.write(page.encode("utf-8")))
    card_figure(card, output / FIGURE)
    print(f"Wrote {output / CARD_MD}, {CARD_JSON} and {FIGURE}.", flush=True)
    return card


def check_card_folder(output: Path, protocol, spec: str) -> None:
    """A folder holding another protocol's or variant's card is refused: its runs would be mixed."""
    earlier = output / CARD_JSON
    if not earlier.is_file():
        return
    card = json.loads(earlier.read_text(encoding="utf-8"))
    if card["protocol"]["sha256"] != protocol.sha256 or card["variant"] != spec:
        raise ConfigError(
            f"--output {str(output)!r} holds the card of {card['variant']!r} under protocol {card['protocol']['version']} "
            f"(sha256 {card['protocol']['sha256'][:12]}); give another folder for {spec!r} under {protocol.version} "
            f"(sha256 {protocol.sha256[:12]})."
        )
