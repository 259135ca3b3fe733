"""comparisons.csv, beside every report: each comparison of each table of results.md (over seeds, and over
seeds and test items) is a row, in the tables' order, whose unrounded numbers print as the markdown row
prints them. Checked on every committed report, so the file a program reads says what the page says."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from lit_attention.reports.comparisons import CSV_FIELDS, marked
from lit_attention.reports.tables import interval, p_value

ROOT = Path(__file__).resolve().parents[1]
REPORTS = sorted(p.parent for p in (ROOT / "results").rglob("comparisons.csv"))
SEEDS_HEADER = "| arm | seeds | difference |"
ITEMS_HEADER = "| arm | seeds × test items | difference |"


def markdown_tables(text: str) -> list[tuple[str, list[list[str]]]]:
    """[(kind, rows of cells)] of every comparison table in `text`, in order: "seeds" or "items"."""
    found, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        kind = "seeds" if line.startswith(SEEDS_HEADER) else "items" if line.startswith(ITEMS_HEADER) else None
        if kind is None:
            continue
        rows = []
        for row in lines[i + 2 :]:
            if not row.startswith("|"):
                break
            rows.append([cell.strip() for cell in row.strip("|").split("|")])
        found.append((kind, rows))
    return found


def number(text: str) -> float:
    return float(text) if text not in ("", "nan") else math.nan


def seeds_cells(row: dict) -> list[str]:
    """The cells results.md prints for a comparison over seeds, from its row of comparisons.csv (label aside)."""
    if row["verdict"] == "not compared: other data":
        return ["-", *["n/a"] * 8, row["verdict"]]
    mean = number(row["difference"])
    seeds = row["seeds"] if row["paired"] == "True" else f"{row['seeds']} + {row['seeds_reference']} (unpaired)"
    mc, mc_holm = row["p_exact_monte_carlo"] == "True", row["p_exact_holm_monte_carlo"] == "True"
    return [
        seeds,
        "n/a" if math.isnan(mean) else f"{mean:+.4f}",
        interval(number(row["low"]), number(row["high"])),
        interval(number(row["bootstrap_low"]), number(row["bootstrap_high"])),
        interval(number(row["simultaneous_low"]), number(row["simultaneous_high"])),
        p_value(number(row["p"])),
        p_value(number(row["p_holm"])),
        marked(number(row["p_exact"]), mc),
        marked(number(row["p_exact_holm"]), mc_holm),
        row["verdict"],
    ]


def items_cells(row: dict) -> list[str]:
    if not row["test_items"]:
        return ["-", *["n/a"] * 5, row["verdict"]]
    return [
        f"{row['seeds']} × {row['test_items']}",
        f"{number(row['difference']):+.4f}",
        interval(number(row["seeds_only_low"]), number(row["seeds_only_high"])),
        interval(number(row["two_way_low"]), number(row["two_way_high"])),
        row["item_test"],
        marked(number(row["p"]), row["item_p_monte_carlo"] == "True"),
        p_value(number(row["p_holm"])) if row["primary"] == "True" else "exploratory",
    ]


@pytest.mark.slow  # imports the report package (about a second of CPU)
def test_every_committed_report_has_its_comparisons():
    assert len(REPORTS) >= 15, REPORTS  # every section reproduce.sh runs, and each size of the scaled one


@pytest.mark.parametrize("report", REPORTS, ids=[str(p.relative_to(ROOT / "results")) for p in REPORTS])
@pytest.mark.slow  # reads a report and its table
def test_comparisons_csv_says_what_results_md_says(report):
    with (report / "comparisons.csv").open(newline="") as file:
        reader = csv.DictReader(file)
        assert reader.fieldnames == CSV_FIELDS
        rows = list(reader)
    tables = markdown_tables((report / "results.md").read_text(encoding="utf-8"))
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["table"], []).append(row)
    assert len(groups) == len(tables), (list(groups), [kind for kind, _ in tables])
    for (name, group), (kind, printed) in zip(groups.items(), tables):
        assert kind == ("items" if name.endswith("over seeds and test items") else "seeds"), (name, kind)
        assert len(group) == len(printed), name
        for row, cells in zip(group, printed):
            assert cells[0] in (row["arm"], f"{row['arm']} vs {row['reference']}"), (name, cells[0])
            assert cells[1:] == (items_cells(row) if kind == "items" else seeds_cells(row)), (name, row["arm"])
