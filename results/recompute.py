"""An independent recomputation of the committed `compare` reports, from their records alone.

    python results/recompute.py [SECTION ...]     (default: every results/<section> with results.md and runs/)

A SECTION is a name under results/ or the path of any compare output (results.md beside runs/).

It does not import the project (only the standard library, numpy and scipy): it reads every run's
record.json under results/<section>/runs/, replays the tuning (the grid point with the best mean validation
value, ties within 1e-6 relative to the lower setting, --extend-edges rounds as far as their runs are on
disk), recomputes the tuned table and every comparison table (the main one, --at's and the cross-fitted
one), parses the same tables out of results.md and prints each number that differs beyond its printed
rounding; where the report wrote comparisons.csv, each of those comparisons is checked there too, unrounded
(to float rounding, section_check.check_comparison_values). A scaled sweep (`compare --scale`) is checked size by size the same way (sizes/<size>/results.md
against runs/<size>/), then its table of sizes and budgets, its laws refitted, its multipliers and its
tuned-rate trend (scaled_check.py). Where the runs kept per-example outcomes, the table over seeds and test
items is rebuilt from those files, each checked against the sha256 its record keeps (item_check.py): the
difference, McNemar's counts and exact p exactly, its bootstraps and Monte Carlo p drawn again and checked
within a Monte Carlo tolerance. The other randomised columns (the bootstrap over seeds, p values marked
"(MC)") are skipped and counted. It then checks the hand-written tables of RESULTS.md against the section reports they quote
(results_md_check.py). A scorecard (results/scorecards/<protocol>/<variant>/, or a card's folder given by its
path) has each of its folders checked as a section, then the card's own numbers (card_check.py).
Exit status 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "recompute"))

from printed_numbers import Checker  # noqa: E402  (results/recompute/, beside this script)
from results_md_check import check_results_md  # noqa: E402
from scaled_check import check_scaled  # noqa: E402
from section_check import check_section, sections_with_records  # noqa: E402
from sweep_records import scaled  # noqa: E402
from trend_check import check_trend, trend_sections  # noqa: E402
from card_check import CARD, card_folders, check_card  # noqa: E402


def reported(directory: Path) -> bool:
    return (directory / "results.md").is_file() and (directory / "runs").is_dir()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "sections",
        nargs="*",
        metavar="SECTION",
        help="results/<SECTION>, or a compare output's path, to check (default: every section and size trend, then RESULTS.md)",
    )
    argv = parser.parse_args(argv).sections
    root = HERE.parent
    names = argv or sections_with_records(HERE) + trend_sections(HERE) + [str(path) for path in card_folders(HERE)]
    checker = Checker()
    for name in names:
        if (Path(name) / CARD).is_file():  # a scorecard: its folders as sections, then the card's own numbers
            check_card(Path(name), checker)
            checker.summary(Path(name).name)
            continue
        # A compare output by its path (results/<section> or one outside results/), else a name under results/.
        directory = Path(name) if reported(Path(name)) else HERE / Path(name).name
        name = directory.name
        if reported(directory) and scaled(directory):
            check_scaled(directory, checker)
        elif reported(directory):
            check_section(directory, checker)
        elif name in trend_sections(HERE):
            check_trend(directory, HERE, checker)
        else:
            print(
                f"recompute: {name} is neither a section with results.md and runs/ nor a size trend under {HERE}", file=sys.stderr
            )
            return 2
        checker.summary(name)
    if not argv:  # RESULTS.md quotes every section: check it only against the whole set
        check_results_md(root / "RESULTS.md", HERE, checker)
        checker.summary("RESULTS.md")
    return 1 if checker.total_mismatches else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
