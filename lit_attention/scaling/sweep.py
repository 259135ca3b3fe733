"""`compare --scale`: every size is a sweep of its own (the arms x the grid x the seeds, planned,
run, edge-extended and tuned exactly as a sweep without --scale), all of them planned before any
trains, run one size after another; the report adds the scaling laws over the sizes
(report.py). `--verify K` re-trains K runs of every size, and `--inspect` inspects every
size's tuned runs, each into that size's report folder (`<output>/sizes/<size>/verify`, `.../inspect`),
where that size's report reads them as a sweep without --scale reads its own."""

from __future__ import annotations

import shlex
from pathlib import Path

from lit_attention.errors import ConfigError
from lit_attention.sweep.running import end_sweep, extend_edges, launch, make_launcher
from lit_attention.sweep.runs import baseline_arm, find_state, parse_equivalence, parse_point, parse_primary, slug
from lit_attention.scaling.report import SIZES
from lit_attention.sweep.verify import choose_runs, rerun, scratch


def run_scaled_sweep(args, argv: list[str], variants: list[str], grid, extra: list[str], output: Path, sizes) -> None:
    """Plan every size, run what is not finished, and report, while this command holds the output's lock."""
    from lit_attention.scaling.sizes import plan_sizes
    from lit_attention.scaling.report import write_scaled_report

    planned = plan_sizes(args, variants, grid, extra, sizes)
    first = planned[0][1]
    args.baseline = baseline_arm(first, args.baseline)
    primary = parse_primary(first, args.primary, args.baseline)
    equivalence = parse_equivalence(first, args.equivalence, args.baseline, primary)
    common_point = parse_point(first, args.at)
    parts = []
    for size, plan, size_extra in planned:
        states = {
            r: find_state(r, output, needs_test=args.test and not args.report, wanted=plan.configs[(r.arm, r.point)])
            for r in plan.runs
        }
        parts.append((size, plan, states, size_extra))
    check_verify_count(args, parts)
    failed = 0
    for size, plan, states, size_extra in parts:
        if not args.report:
            print(f"compare: size {size.label}", flush=True)
            failed += launch(args, plan, states, output, size_extra)
            states.update({r: find_state(r, output) for r in plan.runs})
        if args.extend_edges:
            failed += extend_edges(args, plan, states, output, size_extra)
    skipped = []  # what --verify or --inspect could not do at a size: said once the report is written
    for size, plan, states, size_extra in parts:
        folder = output / SIZES / slug(size.label)  # the size's report folder, which reads its checks
        if args.verify:
            try:
                chosen = choose_runs(states.values(), args.verify)
                failed += rerun(chosen, plan, states, args.config, size_extra, folder, make_launcher(args, scratch(folder)))
            except ConfigError as error:
                skipped.append(f"--verify was not done at size {size.label}: {error}")
        if args.inspect:
            from lit_attention.reports.inspection import inspect_arms

            try:
                inspect_arms(plan, list(states.values()), output, report=folder)
            except ConfigError as error:
                skipped.append(f"--inspect was not done at size {size.label}: {error}")
    # The sweep's command, the same whether it trained or --report rebuilt it: the report rebuilds byte for byte.
    command = "lit-attention compare " + " ".join(word for word in argv if word != "--report")
    text = write_scaled_report(
        [(size, plan, list(states.values())) for size, plan, states, _ in parts],
        output,
        command,
        args.baseline,
        args.success_threshold,
        primary=primary,
        cross_fitted=args.cross_fit,
        common_point=common_point,
        equivalence=equivalence,
        extension_rounds=args.max_extensions if args.extend_edges else None,
    )
    print("\n" + text)
    print(
        f"Wrote {output}/results.md (each size's tables in {output}/sizes/); curves: tensorboard --logdir "
        f"{shlex.quote(str(output / 'runs'))}"
    )
    end_sweep(failed, skipped, "the tables")


def check_verify_count(args, parts) -> None:
    """--verify K re-trains K runs of every size: a K past what a size plans (or, with --report, has
    finished) is refused before anything trains."""
    if not args.verify:
        return
    for size, plan, states, _ in parts:
        finished = sum(state.finished for state in states.values())
        most = finished if args.report else len(plan.runs)
        if args.verify > most:
            raise ConfigError(
                f"--verify {args.verify} re-trains that many runs at every size, but size {size.label} "
                f"has {finished} finished (of the {len(plan.runs)} it plans); give at most {most}."
            )
