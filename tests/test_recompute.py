"""results/recompute.py, the recomputation of the committed reports that imports nothing of the project:
it agrees with every committed section and with RESULTS.md, and it names a number a report misprints."""

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
    assert (f"MISMATCH {SECTION} extended cross-fit, super, test/acc (other half's choice): "
            "printed '0.9577 ± 0.0092'") in out
    assert f"MISMATCH {SECTION} extended cross-fit comparison, super, difference: printed '+0.0199'" in out
