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
TREND_TITLE = "# Size trend"  # compare --trend's reports: their tables are their own (checked apart below)
TRENDS = [p for p in REPORTS if (p / "results.md").read_text(encoding="utf-8").startswith(TREND_TITLE)]
SWEEPS = [p for p in REPORTS if p not in TRENDS]
SEEDS_HEADER = "| arm | seeds | difference |"
ITEMS_HEADER = "| arm | seeds × test items | difference |"


def markdown_tables(text: str) -> list[tuple[str, list[list[str]]]]:
    """[(kind, rows of cells)] of every comparison table in `text`, in order: "seeds" or "items"."""
    found, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        kind = "seeds" if line.startswith(SEEDS_HEADER) else "items" if line.startswith(ITEMS_HEADER) else None
        if kind is not None:
            found.append((kind, rows_after(lines, i)))
    return found


def rows_after(lines: list[str], header: int) -> list[list[str]]:
    """The cells of each row of the table whose header is `lines[header]`."""
    rows = []
    for row in lines[header + 2 :]:
        if not row.startswith("|"):
            break
        rows.append([cell.strip() for cell in row.strip("|").split("|")])
    return rows


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


@pytest.mark.parametrize("report", SWEEPS, ids=[str(p.relative_to(ROOT / "results")) for p in SWEEPS])
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


def printed_rows(text: str, header: str) -> dict[tuple[str, ...], list[str]]:
    """The rows of the table whose header starts with `header`, by their first cells (size and arm, or arm)."""
    lines = text.splitlines()
    [start] = [i for i, line in enumerate(lines) if line.startswith(header)]
    keys = 2 if header.startswith("| size |") else 1
    return {tuple(row[:keys]): row[keys:] for row in rows_after(lines, start)}


@pytest.mark.parametrize("report", TRENDS, ids=[p.name for p in TRENDS])
@pytest.mark.slow  # reads a report and its tables
def test_a_trends_comparisons_csv_says_what_its_results_md_says(report):
    """Each size's difference from the baseline, and each arm's slope and change with size: every row of
    comparisons.csv prints as its cells of results.md, and every printed row has its row in the file."""
    text = (report / "results.md").read_text(encoding="utf-8")
    sizes, slopes = printed_rows(text, "| size | arm |"), printed_rows(text, "| arm | slope per doubling")
    with (report / "comparisons.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    seen_sizes, seen_slopes = set(), set()
    for row in rows:
        low, high = interval(number(row["low"]), number(row["high"])), f"{number(row['difference']):+.4f}"
        if row["table"].startswith("size "):
            key = (row["table"][len("size ") :], row["arm"])
            seen_sizes.add(key)
            cells = sizes[key]
            assert cells[4:] == [
                high,
                low,
                interval(number(row["simultaneous_low"]), number(row["simultaneous_high"])),
                p_value(number(row["p_holm"])),
                row["verdict"],
            ], key
        elif row["table"] == "slope per doubling":
            seen_slopes.add((row["arm"],))
            assert slopes[(row["arm"],)][:3] == [high, low, p_value(number(row["p"]))], row["arm"]
        else:
            assert row["table"] == "largest minus smallest", row["table"]
            cells = slopes[(row["arm"],)]
            assert cells[4:8] == [
                high,
                low,
                interval(number(row["bootstrap_low"]), number(row["bootstrap_high"])),
                p_value(number(row["p"])),
            ], row["arm"]
            assert cells[8] == marked(number(row["p_exact"]), row["p_exact_monte_carlo"] == "True"), row["arm"]
    assert seen_sizes == set(sizes) and seen_slopes == set(slopes)
