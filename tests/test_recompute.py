"""results/recompute.py, the recomputation of the committed reports that imports nothing of the project:
it agrees with every committed section and with RESULTS.md, and it names a number a report misprints."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import scipy.stats  # noqa: F401  (imported with the module, as the project's own statistics tests do: not the test's cost)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
SCRIPT = RESULTS / "recompute.py"
MODULES = RESULTS / "recompute"
STANDALONE = """
import runpy, sys
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as end:
    status = end.code
imported = sorted({name.split(".")[0] for name in sys.modules} & {"lit_attention", "datamodules"})
print("project imported:", imported) if imported else None
sys.exit(3 if imported else status)
"""
SECTION = "vit_digits_500_long"  # the smallest section with a primary family and a cross-fitted table


@pytest.mark.slow
def test_the_committed_reports_agree_with_their_records():
    # A fresh interpreter that runs the script, then fails if the project's packages were imported: the
    # recomputation must stand on its own.
    done = subprocess.run([sys.executable, "-I", "-c", STANDALONE, str(SCRIPT)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "MISMATCH" not in done.stdout
    summaries = [line for line in done.stdout.splitlines() if "numbers checked" in line]
    assert any(line.startswith("RESULTS.md:") for line in summaries)
    assert any(line.startswith(f"{SECTION}:") for line in summaries)
    assert all(", 0 mismatches" in line and not line.split(": ", 1)[1].startswith("0 numbers") for line in summaries)


@pytest.fixture
def recompute_modules():
    """The script's modules, imported from results/recompute/ and forgotten afterwards."""
    before = set(sys.modules)
    sys.path.insert(0, str(MODULES))
    try:
        import printed_numbers
        import section_check

        yield printed_numbers, section_check
    finally:
        sys.path.remove(str(MODULES))
        for name in set(sys.modules) - before:
            if getattr(sys.modules[name], "__file__", "") and str(MODULES) in sys.modules[name].__file__:
                del sys.modules[name]


def section_copy(tmp_path: Path) -> tuple[Path, str]:
    """SECTION's records (linked) beside a copy of its report to alter, and the report's text."""
    copy = tmp_path / SECTION
    copy.mkdir()
    (copy / "runs").symlink_to(RESULTS / SECTION / "runs")
    return copy, (RESULTS / SECTION / "results.md").read_text(encoding="utf-8")


def test_a_misprinted_number_is_named_with_its_section_row_and_column(tmp_path, capsys, recompute_modules):
    printed_numbers, section_check = recompute_modules
    copy, text = section_copy(tmp_path)
    # super's paired t-test p of the comparison table (and of the cross-fitted one), one unit off in its
    # third significant digit.
    row = "| super | 10 | +0.0222 | [+0.0121, +0.0323] | [+0.0142, +0.0306] | [+0.0121, +0.0323] | 0.000757 |"
    assert text.count(row) == 2
    (copy / "results.md").write_text(text.replace(row, row.replace("0.000757 |", "0.000767 |")), encoding="utf-8")
    checker = printed_numbers.Checker()
    section_check.check_section(copy, checker)
    out = capsys.readouterr().out
    assert checker.total_mismatches == 2
    assert f"MISMATCH {SECTION} comparison, super, p: printed '0.000767'" in out
    assert f"MISMATCH {SECTION} cross-fit comparison, super, p: printed '0.000767'" in out


def test_a_misprinted_number_of_the_cross_fit_over_every_point_is_named(tmp_path, capsys, recompute_modules):
    printed_numbers, section_check = recompute_modules
    copy, text = section_copy(tmp_path)
    # super's second half chooses 8e-3, a point --extend-edges added, only in the table over every point
    # run: its value at the other half's choice and its difference, each one unit off in the last digit.
    choice = "| super | lr=4e-3 | lr=0.008 | 0.9567 ± 0.0092 |"
    row = "| super | 10 | +0.0189 | [+0.0063, +0.0314] |"
    assert text.count(choice) == 1 and text.count(row) == 1
    text = text.replace(choice, choice.replace("0.9567", "0.9577")).replace(row, row.replace("+0.0189", "+0.0199"))
    (copy / "results.md").write_text(text, encoding="utf-8")
    checker = printed_numbers.Checker()
    section_check.check_section(copy, checker)
    out = capsys.readouterr().out
    assert checker.total_mismatches == 2
    assert (f"MISMATCH {SECTION} extended cross-fit, super, test/acc (other half's choice): printed '0.9577 ± 0.0092'") in out
    assert f"MISMATCH {SECTION} extended cross-fit comparison, super, difference: printed '+0.0199'" in out


def test_a_wrong_number_of_comparisons_csv_is_named(tmp_path, capsys, recompute_modules):
    """comparisons.csv is checked unrounded: super's difference in the tuned table moved in its tenth digit, and
    its p in the cross-fitted one, are each named (the markdown, unchanged, agrees)."""
    import csv

    printed_numbers, section_check = recompute_modules
    copy, text = section_copy(tmp_path)
    (copy / "results.md").write_text(text, encoding="utf-8")
    with (RESULTS / SECTION / "comparisons.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    tuned = next(r for r in rows if r["table"] == "tuned" and r["arm"] == "super")
    tuned["difference"] = repr(float(tuned["difference"]) * (1 + 1e-8))
    fitted = next(r for r in rows if r["table"] == "cross-fit" and r["arm"] == "super")
    fitted["p"] = repr(float(fitted["p"]) * 1.001)
    with (copy / "comparisons.csv").open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    checker = printed_numbers.Checker()
    section_check.check_section(copy, checker)
    out = capsys.readouterr().out
    assert checker.total_mismatches == 2, out
    assert f"MISMATCH {SECTION} comparison (comparisons.csv), super vs standard, difference" in out
    assert f"MISMATCH {SECTION} cross-fit comparison (comparisons.csv), super vs standard, p" in out


# A scaled sweep built from synthetic records, reported by the project itself: on L = 2 + 30·N^(-0.5), four
# sizes (so each law fits its floor E), the baseline, its parameter control (1.125x the parameters) and an
# arm that does at N what the baseline does at 1.3·N, two rates (the better one falls with size, so the
# tuned-rate trend has a slope) and two seeds, with a little noise seeded per run.
DIM = "model.init_args.net.dim"
SCALED_COMMAND = (
    "lit-attention compare --config recipes/quickstart/gpt_stdlib.yaml --variants standard,nonlinear_query "
    "--arm standard+12.5%;standard;model.init_args.net.mlp_ratio=4.5 "
    f"--scale {DIM}=16,32,64,128 --tokens-per-parameter 20 --grid model.init_args.lr=1e-3,3e-3 --seeds 2 "
    "--test --output out"
)
ARMS = (
    ("standard", "standard", 1.0, 1.0),
    ("standard+12.5%", "standard", 1.125, 1.0),
    ("nonlinear_query", "nonlinear_query", 1.0, 1.3),
)  # (arm, variant, parameters x, worth x)


def synthetic_record(arm: str, variant: str, seed: int, settings: dict, params: float, loss: float) -> dict:
    steps = int(settings["max_steps"])
    return {
        "variant": variant,
        "seed": seed,
        "settings": settings,
        "monitor": "val/loss",
        "mode": "min",
        "curve": [[0, steps, loss]],
        "best": {"epoch": 0, "step": steps, "value": loss},
        "final": loss,
        "test": {"test/loss": loss + 0.05},
        "train_flops": 6 * params * steps * 64,
        "params": {"total": params + 100, "non_embedding": params, "attention": params / 3},
    }


@pytest.fixture(scope="module")
def scaled_output(tmp_path_factory) -> Path:
    """The synthetic sweep's records where compare writes them, and the report compare writes from them."""
    import numpy as np

    from lit_attention.sweep.runs import Plan, Run, RunState
    from lit_attention.scaling.report import write_scaled_report
    from lit_attention.scaling.sizes import Size

    output = tmp_path_factory.mktemp("scaled") / "out"
    noise = np.random.default_rng(0)
    parts = []
    for dim in (16, 32, 64, 128):
        n = 10.0 * dim
        budget = (
            ("tokens_per_parameter", "20"),
            ("tokens_per_step", "64"),
            ("max_steps", str(round(20 * n / 64))),
            ("warmup_steps", "3"),
        )
        size = Size(f"dim={dim}", ((DIM, str(dim)),), budget)
        points = [(("model.init_args.lr", lr),) for lr in ("1e-3", "3e-3")]
        plan = Plan(arms=[arm for arm, *_ in ARMS], points=points, seeds=[0, 1])
        states = []
        for arm, variant, factor, worth in ARMS:
            for point in points:
                for seed in plan.seeds:
                    run = Run(arm, variant, point, seed, ("--x=1",) if arm != variant else (), size.label, budget)
                    plan.runs.append(run)
                    off_rate = 0.02 if (point[0][1] == "3e-3") == (dim > 32) else 0.0
                    loss = 2 + 30 * (worth * n * factor) ** -0.5 + off_rate + float(noise.normal(0, 0.003))
                    settings = {"model.init_args.lr": point[0][1], "arm": arm, "size": size.label, **dict(budget)}
                    record = synthetic_record(arm, variant, seed, settings, n * factor, loss)
                    where = run.directory(output) / "version_0" / "record.json"
                    where.parent.mkdir(parents=True)
                    where.write_text(json.dumps(record), encoding="utf-8")
                    states.append(RunState(run, record=record))
        parts.append((size, plan, states))
    write_scaled_report(parts, output, SCALED_COMMAND, "standard", None)
    return output


@pytest.mark.slow
def test_a_scaled_sweeps_report_agrees_with_its_records(scaled_output, capsys, recompute_modules):
    printed_numbers, _ = recompute_modules
    import scaled_check

    checker = printed_numbers.Checker()
    scaled_check.check_scaled(scaled_output, checker)
    out = capsys.readouterr().out
    assert checker.total_mismatches == 0, out
    text = (scaled_output / "results.md").read_text(encoding="utf-8")
    # What the sweep was built to show, so that each part of the check had something to check.
    assert text.count("| with floor E |") == 12 and "0 (held)" not in text
    assert "| nonlinear_query | N | dim=64 | 640 | 1.000 |" in text
    assert "`nonlinear_query`'s m against 1.125 (beats `standard+12.5%`" in text
    assert "| standard | 4 | -0.634 [" in text
    assert checker.checked > 500 and checker.skipped > 0


@pytest.mark.slow
def test_a_misprinted_law_multiplier_or_rate_of_a_scaled_sweep_is_named(scaled_output, tmp_path, capsys, recompute_modules):
    printed_numbers, _ = recompute_modules
    import scaled_check

    copy = tmp_path / "out"
    copy.mkdir()
    for part in ("runs", "sizes"):
        (copy / part).symlink_to(scaled_output / part)
    text = (scaled_output / "results.md").read_text(encoding="utf-8")
    # Two units off in the last printed digit (one unit can stay within half a unit of the unrounded value):
    # the baseline's α against N and a multiplier's point value; one unit off: the rate trend's exponent and
    # a size's budget.
    law = next(line for line in text.splitlines() if line.startswith("| standard | N | validation |"))
    alpha = law.split(" | ")[7].split(" ")[0]
    wrong_alpha = f"{float(alpha) + 0.002:.3f}"
    multiplier = next(line for line in text.splitlines() if line.startswith("| nonlinear_query | N | dim=64 |"))
    m = multiplier.split(" | ")[5].split(" ")[0]
    wrong_m = f"{float(m) + 0.02:.3g}"
    rate = next(line for line in text.splitlines() if line.startswith("| standard | 4 | "))
    changed = (
        text.replace(law, law.replace(f"| {alpha} [", f"| {wrong_alpha} ["))
        .replace(multiplier, multiplier.replace(f"| {m} [", f"| {wrong_m} [", 1))
        .replace(rate, rate.replace("| -0.634 [", "| -0.635 ["))
        .replace("| 64 | 200 | 3 |", "| 64 | 201 | 3 |")
    )
    (copy / "results.md").write_text(changed, encoding="utf-8")
    checker = printed_numbers.Checker()
    scaled_check.check_scaled(copy, checker)
    out = capsys.readouterr().out
    assert checker.total_mismatches == 4, out
    assert f"MISMATCH out laws, standard N validation, α: printed '{wrong_alpha}'" in out
    assert f"MISMATCH out multipliers, nonlinear_query N dim=64, m (validation): printed '{wrong_m}'" in out
    assert "MISMATCH out tuned lr, standard, exponent: printed '-0.635 [" in out
    assert "MISMATCH out sizes, dim=64, max_steps: printed '201', recomputed '200'" in out


ITEMS_SECTION = "super_mechanism"  # a section whose runs keep their per-example outcomes
ITEM_ROW = (
    "| super | 10 × 360 | +0.0242 | [+0.0161, +0.0331] | [+0.0086, +0.0406] | McNemar: 53 items for, "
    "19 against | 7.56e-05 | 0.000529 |"
)


def items_copy(tmp_path: Path) -> tuple[Path, str]:
    """ITEMS_SECTION's records and per-example files, copied (so one can be altered), beside its report's text."""
    copy, runs = tmp_path / ITEMS_SECTION, RESULTS / ITEMS_SECTION / "runs"
    for kept in [*runs.rglob("record.json"), *runs.rglob("per_example-*.npz")]:  # what git keeps of a run
        (copy / "runs" / kept.relative_to(runs)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(kept, copy / "runs" / kept.relative_to(runs))
    return copy, (RESULTS / ITEMS_SECTION / "results.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_misprinted_number_over_seeds_and_test_items_is_named(tmp_path, capsys, recompute_modules):
    printed_numbers, section_check = recompute_modules
    copy, text = items_copy(tmp_path)
    assert text.count(ITEM_ROW) == 1
    # One image moved from "against" to "for" (McNemar's count and so its p), and the two-way interval's
    # lower end 0.004 lower: well past the Monte Carlo tolerance of a bootstrap drawn again.
    wrong = ITEM_ROW.replace("53 items for, 19 against", "54 items for, 18 against").replace("[+0.0086,", "[+0.0046,")
    (copy / "results.md").write_text(text.replace(ITEM_ROW, wrong), encoding="utf-8")
    checker = printed_numbers.Checker()
    section_check.check_section(copy, checker)
    out = capsys.readouterr().out
    where = f"MISMATCH {ITEMS_SECTION} over seeds and test items, super"
    assert f"{where}, paired test: printed 'McNemar: 54 items for, 18 against'" in out
    assert f"{where}, over seeds and test items: printed '[+0.0046, +0.0406]'" in out
    assert checker.total_mismatches == 2, out


@pytest.mark.slow
def test_a_per_example_file_changed_after_its_run_is_named(tmp_path, capsys, recompute_modules):
    printed_numbers, section_check = recompute_modules
    copy, text = items_copy(tmp_path)
    (copy / "results.md").write_text(text, encoding="utf-8")
    record = next((copy / "runs" / "lr=4e-3" / "super").rglob("record.json"))
    outcomes = record.parent / json.loads(record.read_text(encoding="utf-8"))["per_example"]["file"]
    outcomes.write_bytes(outcomes.read_bytes() + b"\0")
    checker = printed_numbers.Checker()
    section_check.check_section(copy, checker)
    out = capsys.readouterr().out
    assert f"printed '{outcomes.name} changed', recomputed the file its record hashes" in out
    assert checker.total_mismatches >= 1


@pytest.mark.slow
def test_a_misquoted_cell_of_results_md_is_named(tmp_path, capsys, recompute_modules):
    printed_numbers, _ = recompute_modules
    from results_md_check import check_results_md

    text = (ROOT / "RESULTS.md").read_text(encoding="utf-8")
    # Section 5's two-way interval of super − standard and its McNemar count, each quoted one unit off.
    row = "| super − standard | +0.0242 | [+0.0161, +0.0331] | [+0.0086, +0.0406] | McNemar: 53 items for, 19 against |"
    assert text.count(row) == 1
    wrong = row.replace("[+0.0086, +0.0406]", "[+0.0086, +0.0407]").replace("53 items", "52 items")
    (tmp_path / "RESULTS.md").write_text(text.replace(row, wrong), encoding="utf-8")
    checker = printed_numbers.Checker()
    check_results_md(tmp_path / "RESULTS.md", RESULTS, checker)
    out = capsys.readouterr().out
    assert checker.total_mismatches == 2, out
    assert "over seeds and test items: printed '[+0.0086, +0.0407]'" in out
    assert "paired test over items: printed 'McNemar: 52 items for, 19 against'" in out


def test_an_interval_over_five_seeds_is_checked_against_its_exact_distribution(recompute_modules):
    """Over 5 seeds a bootstrap mean takes 126 values, sparse in the tails, so two Monte Carlo percentiles can
    differ by more than any slack on the value (results/scorecards/v1/optimized's vit_digits did): each end is
    checked in probability against the exact distribution. A draw of the report's size passes; an end moved to
    another quantile is named."""
    printed_numbers, _ = recompute_modules
    import numpy as np
    from item_check import check_seeds_only, seeds_only_distribution

    d = np.array([[-0.204, -0.2], [-0.0045, -0.004], [-0.347, -0.35], [-0.189, -0.19], [-0.047, -0.05]])
    w = np.ones(2)
    values, weights = seeds_only_distribution(d, w)
    assert values.size == 126 and abs(weights.sum() - 1) < 1e-12
    rng = np.random.default_rng(7)
    for seed in range(5):  # the report's way: 10,000 resamples of the seeds, numpy's percentiles
        means = d.mean(axis=1)[np.random.default_rng(seed).integers(0, 5, (10_000, 5))].mean(axis=1)
        low, high = (float(v) for v in np.quantile(means, [0.025, 0.975]))
        checker = printed_numbers.Checker()
        check_seeds_only(checker, "a draw", f"[{low!r}, {high!r}]", d, w, rng)
        assert checker.total_mismatches == 0
    checker = printed_numbers.Checker()
    check_seeds_only(checker, "moved", f"[{float(np.quantile(means, 0.10))!r}, {high!r}]", d, w, rng)
    assert checker.total_mismatches == 1
