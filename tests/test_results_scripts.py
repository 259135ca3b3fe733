"""The scripts behind RESULTS.md's sweep and versus tables, on compare outputs written here."""

import csv
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def compare_output(folder: Path, finals: dict[str, list[float]], tests: dict[str, list[float]] | None = None) -> Path:
    """A folder shaped like `compare`'s: results.csv rows and the results.md table header."""
    folder.mkdir(parents=True)
    with open(folder / "results.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["variant", "seed", "final", "best", "best_step", "test"])
        for variant, values in finals.items():
            for seed, value in enumerate(values):
                test = tests[variant][seed] if tests else ""
                writer.writerow([variant, seed, value, value, 100, test])
    (folder / "results.md").write_text("| variant | final val/acc | best val/acc |\n")
    return folder


def script(name: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "results" / name), *map(str, args)], capture_output=True, text=True)


def test_sweep_table_orders_settings_and_reads_explicit_ones(tmp_path):
    compare_output(tmp_path / "lr_8e-3", {"standard": [0.9, 0.8], "super": [0.95, 0.97]})
    recipe = compare_output(tmp_path / "recipe", {"standard": [0.5, 0.7], "super": [0.6, 0.6]})
    result = script("sweep_table.py", tmp_path / "plot.png", "peak lr", tmp_path / "lr_8e-3", f"{recipe}=4e-3")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("|")]
    assert lines[0] == "| variant | 0.004 | 0.008 |"
    assert lines[2] == "| standard | 0.600 ± 0.141 | 0.850 ± 0.071 |"
    assert (tmp_path / "plot.png").stat().st_size > 5_000
    bad = script("sweep_table.py", tmp_path / "p.png", "lr", recipe)
    assert bad.returncode != 0 and "name the folder like kv_8 or write FOLDER=VALUE" in bad.stderr


def test_versus_baseline_flags_only_differences_beyond_twice_the_standard_error(tmp_path):
    folder = compare_output(tmp_path / "cmp", {"standard": [0.50, 0.52, 0.48], "far": [0.70, 0.71, 0.69],
                                                 "near": [0.51, 0.55, 0.47]},
                            tests={"standard": [0.4, 0.4, 0.4], "far": [0.4, 0.4, 0.4], "near": [0.4, 0.4, 0.4]})
    control = compare_output(tmp_path / "control", {"standard": [0.49, 0.50, 0.51]})
    result = script("versus_baseline.py", folder, "--extra", f"{control}:small")
    assert result.returncode == 0, result.stderr
    rows = {line.split("|")[1].strip(): line for line in result.stdout.splitlines() if line.startswith("| ")}
    assert rows["far"].endswith("| +0.2000 | 0.0258 | yes |")
    assert rows["near"].rstrip().endswith("| no |")
    assert rows["small"].rstrip().endswith("| no |")
    on_test = script("versus_baseline.py", folder, "--column", "test")
    assert "| far | 0.4000 ± 0.0000 | +0.0000 |" in on_test.stdout
    missing = script("versus_baseline.py", control, "--column", "test")
    assert missing.returncode != 0 and "was it run with --test?" in missing.stderr
