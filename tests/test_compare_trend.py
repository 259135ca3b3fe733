"""`compare --trend DIR ... --output OUT` trains nothing: every sweep option, a single folder, a missing
--output and a folder compare did not write are refused in one sentence, exit status 2, before any
file is written (tests/test_committed_results.py rebuilds the committed trends through it)."""

import csv
from pathlib import Path

import pytest

from lit_attention.main import main

ROOT = Path(__file__).resolve().parents[1]
SMALL, MID = (str(ROOT / "results" / name) for name in ("gpt_stdlib_small", "gpt_stdlib_mid"))


def test_what_a_trend_cannot_take_is_one_sentence(tmp_path, capsys):
    out = str(tmp_path / "out")
    cases = [
        (
            ["--trend", SMALL, MID, "--output", out, "--config", "recipes/quickstart/gpt_stdlib.yaml"],
            "--trend reads finished sweeps and trains nothing, so --config cannot be given with it",
        ),
        (["--trend", SMALL, MID, "--output", out, "--grid", "model.init_args.lr=1e-3,3e-3"], "so --grid cannot be given"),
        (["--trend", SMALL, MID, "--output", out, "--trainer.max_steps=5"], "so --trainer.max_steps=5 cannot be given"),
        (["--trend", SMALL, MID], "--trend needs --output"),
        (["--trend", SMALL, "--output", out], "is one sweep; a trend over sizes needs at least two folders"),
        (["--trend", SMALL, str(tmp_path), "--output", out], f"--trend {tmp_path} has no results.csv"),
        (
            ["--trend", SMALL, MID, "--output", out, "--baseline", "super"],
            "--baseline super is not an arm of every --trend folder; the arms they all have: nonlinear_query, optimized",
        ),
    ]
    for words, message in cases:
        with pytest.raises(SystemExit) as exit_:
            main(["compare", *words])
        error = capsys.readouterr().err
        assert exit_.value.code == 2 and message in error.splitlines()[0], (words, error)
        assert not (tmp_path / "out" / "results.md").exists()


def a_sweep(source: str, folder: Path, change) -> str:
    """The committed sweep `source`'s results.csv and one of its records (what a trend reads), with
    `change(row)` applied to every row of results.csv."""
    import csv
    import shutil

    folder.mkdir()
    record = next(Path(source).glob("runs/**/record.json"))
    (folder / "runs").mkdir()
    shutil.copy(record, folder / "runs" / "record.json")
    with open(Path(source) / "results.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    with open(folder / "results.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(change(dict(row)) or row for row in rows)
    return str(folder)


@pytest.mark.slow  # draws the trend's figure
def test_a_trend_over_sweeps_without_a_grid_is_written(tmp_path, capsys):
    """A sweep without --grid labels its point `default`; a trend over such sweeps takes it as their one point."""

    def one_point(row):
        return {**row, "point": "default"} if row["point"] == "lr=1e-2" else {**row, "status": "not run"}

    small, mid = (a_sweep(source, tmp_path / name, one_point) for source, name in ((SMALL, "small"), (MID, "mid")))
    main(["compare", "--trend", small, mid, "--output", str(tmp_path / "out")])
    text = (tmp_path / "out" / "results.md").read_text()
    assert "| default |" in text
    with open(tmp_path / "out" / "comparisons.csv", newline="") as file:  # what a program reads: each size's
        rows = list(csv.DictReader(file))  # differences, and each arm's slope and change with size
    assert [r["table"] for r in rows if r["arm"] == "optimized"] == [
        "size small",
        "size mid",
        "slope per doubling",
        "largest minus smallest",
    ]
    for row in rows:
        if row["table"].startswith("size "):  # the table's row for that size and arm shows the same difference
            assert f"| {row['table'][5:]} | {row['arm']} | default |" in text
            assert (
                f"| {float(row['difference']):+.4f} |"
                in text.split(f"| {row['table'][5:]} | {row['arm']} | default |")[1].split("\n")[0]
            )


def test_a_trend_over_sweeps_without_test_scores_is_one_sentence(tmp_path, capsys):
    small = a_sweep(SMALL, tmp_path / "small", lambda row: {**row, "test": ""})
    mid = a_sweep(MID, tmp_path / "mid", lambda row: row)
    with pytest.raises(SystemExit) as exit_:
        main(["compare", "--trend", small, mid, "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"--trend {small} holds runs without test scores" in err and "--test" in err
    assert not (tmp_path / "out").exists()
