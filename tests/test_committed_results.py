"""The committed study records still make the committed tables: `compare --report` with the command
results/reproduce.sh gives a section, over a copy of that section's records, writes the committed
results.csv byte for byte (and results.md, but for its command line), for every section, and
`compare --trend` rebuilds both trends. A change of the plan (an argument renamed, a spec's name,
the report's columns) or of a statistic's number shows up here first; gpt_small (60 runs) is the quick
one."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lit_attention.main import main

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "results" / "reproduce.sh"


def section_arguments(name: str) -> list[str]:
    """The words reproduce.sh passes to `lit-attention compare` in section `name` (its compare() options
    first), read by bash itself from the script's definitions."""
    text = SCRIPT.read_text()
    header = text[: text.index("\nvit() {")]
    body = re.search(rf"\n{name}\(\) {{.*?\n}}\n", text, re.S).group(0)
    options = re.search(r'compare\(\) \{ \S+ compare (.*?) "\$@"; \}', header).group(1).split()
    probe = header + body + '\ncompare() { printf "%s\\n" "$@"; }\n' + name + "\n"
    words = subprocess.run(["bash", "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return options + words.splitlines()


@pytest.mark.slow
def test_the_committed_gpt_small_records_rebuild_the_committed_results_csv(tmp_path, capsys):
    words = section_arguments("gpt_small")
    committed = ROOT / words[words.index("--output") + 1]
    output = tmp_path / "gpt_stdlib_small"
    shutil.copytree(committed / "runs", output / "runs")
    words[words.index("--output") + 1] = str(output)
    try:
        main(["compare", *words, "--report"])
    except SystemExit as exit_:
        assert exit_.code == 0, capsys.readouterr().err[-2000:]
    assert (output / "results.csv").read_bytes() == (committed / "results.csv").read_bytes()
    assert (output / "comparisons.csv").read_bytes() == (committed / "comparisons.csv").read_bytes()
    # results.md too, but for its command line (the --output differs): the committed tables, with their
    # pairing status, grid-edge flags and provenance, are what this version's report says.
    rebuilt, kept = ((path / "results.md").read_text().split("\n", 3)[3] for path in (output, committed))
    assert rebuilt == kept
    assert "**Paired:**" in kept and "## Provenance" in kept and "lr=1e-2 is the highest tried" in kept


def rebuild_trend(sections: tuple[str, ...], output: Path) -> str:
    """`compare --trend` (reproduce.sh's trend sections) over the committed sections: its results.md."""
    main(["compare", "--trend", *(str(ROOT / "results" / name) for name in sections), "--output", str(output)])
    return (output / "results.md").read_text()


@pytest.mark.slow
def test_the_size_trend_rebuilds_from_the_committed_sections(tmp_path):
    """`compare --trend` reads only the sections' results.csv and one record each: run over the committed
    GPT sections, it writes the committed results.md."""
    rebuilt = rebuild_trend(("gpt_stdlib_small", "gpt_stdlib_mid", "gpt_stdlib_large"), tmp_path)
    assert rebuilt == (ROOT / "results" / "size_trend" / "results.md").read_text()
    assert "## Does the difference change with size?" in rebuilt and (tmp_path / "size_trend.png").is_file()


@pytest.mark.slow
def test_the_trend_table_is_least_squares_and_welch_on_hand_made_differences():
    """Differences -0.1, 0, +0.1 (+/- noise) at 1k, 2k and 4k parameters, given largest first: a slope of
    about +0.1 per doubling, as numpy's fit finds it, and the largest minus the smallest as Welch's."""
    import math

    import numpy as np
    from scipy import stats

    from lit_attention.stats.statistics import unpaired_difference

    from lit_attention.scaling.trend import trend_section

    noise = [0.01, -0.02, 0.015, -0.005]
    sizes = {
        params: {seed: mean + noise[(seed + k) % 4] for seed in range(4)}
        for k, (params, mean) in enumerate([(1000, -0.1), (2000, 0.0), (4000, 0.1)])
    }
    records: list[dict] = []
    text = trend_section({"optimized": [(p, sizes[p]) for p in (4000, 2000, 1000)]}, "standard", "test/loss", records)
    row = text.split("| optimized |")[1].split("\n")[0].split("|")
    x = [math.log2(p) for p in sizes for _ in range(4)]
    y = [v for p in sizes for v in sizes[p].values()]
    slope, intercept = np.polyfit(x, y, 1)
    residual = np.array(y) - (slope * np.array(x) + intercept)
    error = math.sqrt(residual @ residual / (len(x) - 2) / np.sum((np.array(x) - np.mean(x)) ** 2))
    half = stats.t.ppf(0.975, len(x) - 2) * error
    assert row[0].strip() == f"{slope:+.4f}" and abs(slope - 0.1) < 0.01
    assert row[1].strip() == f"[{slope - half:+.4f}, {slope + half:+.4f}]"
    change = unpaired_difference(sizes[4000], sizes[1000])
    assert row[3].strip() == "4.0x" and row[4].strip() == f"{change.mean:+.4f}" == "+0.2000"
    assert row[5].strip() == f"[{change.low:+.4f}, {change.high:+.4f}]"
    slope_row, change_row = records  # comparisons.csv's rows: the same numbers, unrounded
    assert slope_row["table"] == "slope per doubling" and slope_row["seeds"] == 12
    assert math.isclose(slope_row["difference"], slope, abs_tol=1e-12)
    assert math.isclose(slope_row["low"], slope - half, abs_tol=1e-9) and math.isclose(
        slope_row["high"], slope + half, abs_tol=1e-9
    )
    assert change_row["table"] == "largest minus smallest" and change_row["paired"] is False
    assert (change_row["difference"], change_row["low"], change_row["high"]) == (change.mean, change.low, change.high)


# The other sections reproduce.sh gives `compare`, and the other trend (`compare --trend` over three sections);
# gpt_small and trend have their tests above.
SECTIONS = [
    "digits_confirm",
    "digits_long",
    "gpt_ratio_49k",
    "gpt_ratio_111k",
    "gpt_ratio_197k",
    "vit",
    "vit_hard",
    "gpt",
    "gpt_large",
    "mqar",
]
TRENDS = {"ratio_trend": ("gpt_ratio_49k", "gpt_ratio_111k", "gpt_ratio_197k")}


def rebuild_section(name: str, tmp_path: Path) -> tuple[Path, Path]:
    """(committed folder, its rebuild): `compare --report` with the section's words over a copy of its
    records, re-runs (verify/) and inspections (inspect/, which --report would otherwise redo from
    checkpoints that git does not keep: its section is read from what is on disk)."""
    words = section_arguments(name)
    committed = ROOT / words[words.index("--output") + 1]
    output = tmp_path / committed.name
    for kept in ("runs", "verify", "inspect"):
        if (committed / kept).is_dir():
            shutil.copytree(committed / kept, output / kept)
    words[words.index("--output") + 1] = str(output)
    words = [word for word in words if word != "--inspect"]
    try:
        main(["compare", *words, "--report"])
    except SystemExit as exit_:
        assert exit_.code == 0, f"compare --report of {name} exited {exit_.code}"
    return committed, output


@pytest.mark.slow
@pytest.mark.parametrize("name", SECTIONS)
def test_every_committed_section_rebuilds_its_committed_report(name, tmp_path):
    """`compare --report` over each committed section's records writes its committed results.csv byte for
    byte and its results.md but for the command line."""
    committed, output = rebuild_section(name, tmp_path)
    assert (output / "results.csv").read_bytes() == (committed / "results.csv").read_bytes()
    rebuilt, kept = ((path / "results.md").read_text().split("\n", 3)[3] for path in (output, committed))
    assert rebuilt == kept


@pytest.mark.slow
@pytest.mark.parametrize("name", TRENDS)
def test_every_committed_trend_rebuilds_from_its_committed_sections(name, tmp_path):
    assert rebuild_trend(TRENDS[name], tmp_path) == (ROOT / "results" / name / "results.md").read_text()
