"""RESULTS.md's hand-written tables against the section reports they quote.

Each table is mapped by its section's number (SECTIONS) and its first column: a tuned table (`arm`,
`chosen on validation`), a comparison table (`comparison`, rows "arm − reference"; "the same,
cross-fitted over the grid" quotes the strict cross-fitted table, "... over every rate run" the one over
every point each arm ran, each with the rates it says each half chose), a table over seeds and test items
(a column `comparison over seeds and test items`, and `size` first in a scaled sweep, quoting the report's table
of that name), the sizes' table (`size`)
and the trend's (an empty first header: the slope, the largest minus the smallest size, and what the
sizes could have detected, with the df its label names). Each quoted cell must agree with the report's cell to the coarser of the two roundings;
a table no rule maps is named, not checked."""

from __future__ import annotations

import math
import re
from pathlib import Path

import markdown_tables as markdown
import scorecard_section_check as scorecards
from item_check import item_table
from printed_numbers import Checker, half_unit, numbers_in

# A size's report: section 3's sizes are sections of their own, section 4's the sizes of one scaled sweep,
# each named by its width (the folder "dim=64,val_check_interval=120" is the row "dim=64").
SECTIONS = {
    "1": "vit_digits_500_confirm",
    "2": "vit_digits_500_long",
    "3": "gpt_ratio_{size}",
    "4": "gpt_scaling/sizes/{size},*",
    "5": "super_mechanism",
    "6": "text_stdlib",
    "7": "gpt_super/sizes/dim=64,*",
}
TREND = {"3": "ratio_trend"}
ITEMS = "comparison over seeds and test items"  # the first header of a table quoting a report's item table
CROSS_FIT = "Cross-fitted tuning: chosen on half of the seeds, scored on the other half"
CROSS_FIT_EXTENDED = "Cross-fitted tuning over every point each arm ran, extensions included"
HALVES = (
    re.compile(r"`(?P<arm>[^`]+)` at (?P<first>\S+) on both halves"),
    re.compile(r"`(?P<arm>[^`]+)` at (?P<first>\S+) on the first half, (?P<second>\S+) on the second"),
)


def report(results: Path, name: str) -> dict[str, str]:
    """A report's sections by heading; `name` may end in a pattern, which must match one folder."""
    folders = sorted(results.glob(name)) if "*" in name else [results / name]
    if len(folders) != 1:
        return {}
    return markdown.sections((folders[0] / "results.md").read_text(encoding="utf-8"))


def significant(column: str) -> int | None:
    """p values are printed with 3 significant digits, everything else with fixed decimals."""
    return 3 if re.search(r"(^|\s)p(\s|$)", column) else None


def same(where: str, quoted: str, reported: str, column: str, checker: Checker) -> None:
    """A quoted cell against the report's: numbers whose rounding intervals overlap (so one printed value
    cannot pass for its neighbour at the same precision), words as words."""
    quoted_numbers, reported_numbers = numbers_in(quoted), numbers_in(reported)
    if not quoted_numbers or "chosen" in column or "rate" in column:  # a grid point is a name
        checker.text(where, quoted.replace("−", "-"), reported.replace("−", "-"))
        return
    checker.checked += len(quoted_numbers)
    digits = significant(column)
    if len(quoted_numbers) != len(reported_numbers) or any(
        abs(float(q) - float(r)) >= (half_unit(q, digits) + half_unit(r, digits)) * (1 - 1e-9)
        for q, r in zip(quoted_numbers, reported_numbers)
    ):
        checker.mismatch(where, quoted, f"the report's {reported!r}")


def comparison_name(text: str, baseline: str = "standard") -> str:
    arm, _, reference = text.replace("`", "").partition(" − ")
    return arm if reference == baseline else f"{arm} vs {reference}"


def check_results_md(path: Path, results: Path, checker: Checker) -> None:
    for heading, text in markdown.sections(path.read_text(encoding="utf-8")).items():
        number = heading.split(".")[0]
        for table in markdown.tables(text):
            first = next(iter(table[0])) if table else ""
            where = f"RESULTS.md '{heading[:40]}', table '{first or '(trend)'}'"
            if number in SECTIONS and first == "arm":
                tuned_table(table, report(results, SECTIONS[number]), where, checker)
            elif number in SECTIONS and ITEMS in table[0]:
                items_table(table, results, SECTIONS[number], where, checker)
            elif number in SECTIONS and first.startswith("comparison"):
                comparison_table(table, report(results, SECTIONS[number]), first, where, checker)
            elif number in SECTIONS and first == "size":
                sizes_table(table, results, SECTIONS[number], where, checker)
            elif number == scorecards.SECTION and first == "task (literature)":  # reads the claim table beside it
                claims = next(t for t in markdown.tables(text) if t and "claim at scale" in t[0])
                scorecards.check_literature_by_task(table, claims, results, where, checker)
            elif number == scorecards.SECTION and first in scorecards.RULES:
                scorecards.RULES[first](table, results, where, checker)
            elif number in TREND and first == "":
                trend_table(table, report(results, TREND[number]), results, where, checker)
            else:
                checker.note(f"not mapped to a report, not checked: {where} ({len(table)} rows)")


def row_of(table: list[dict], column: str, value: str) -> dict | None:
    return next((row for row in table if row.get(column) == value), None)


def quote(row: dict, found: dict | None, columns: dict[str, str], where: str, checker: Checker) -> None:
    """Each quoted column (RESULTS.md's name: the report's) of `row` against the report's row `found`."""
    if found is None:
        checker.mismatch(where, "a quoted row", "no such row in the report")
        return
    for mine, theirs in columns.items():
        same(f"{where}, {mine}", row[mine], found.get(theirs, "missing"), theirs, checker)


def tuned_table(table: list[dict], sections: dict, where: str, checker: Checker) -> None:
    reported = (markdown.tables(sections.get("Tuned per arm", "")) or [[]])[0]
    for row in table:
        quote(row, row_of(reported, "arm", row["arm"]), {c: c for c in row if c != "arm"}, f"{where}, {row['arm']}", checker)


def cross_fit_heading(label: str, sections: dict) -> tuple[str | None, str]:
    """The report's cross-fitted section a row "the same, cross-fitted ..." quotes: "over the grid" the
    strict one, "over every rate run" the one over every point each arm ran; a row that names neither
    quotes the strict one only while the report has no other."""
    if "over every" in label:
        return CROSS_FIT_EXTENDED, ", every point run"
    if "over the grid" in label or CROSS_FIT_EXTENDED not in sections:
        return CROSS_FIT, ", the grid"
    return None, ""


def quoted_choices(label: str, found: dict | None, where: str, checker: Checker) -> None:
    """The rates a cross-fitted row names, "(`arm` at R on both halves)" or "(`arm` at R1 on the first half,
    R2 on the second)", against the report's choice of each half."""
    match = next((m for pattern in HALVES if (m := pattern.search(label))), None)
    if match is None:
        return  # the row names no rates
    if found is None:
        checker.mismatch(where, "a quoted choice", "no such arm in the report's cross-fitted choices")
        return
    quoted = (match["first"], match.groupdict().get("second") or match["first"])
    for half, rate in zip(("first", "second"), quoted):
        reported = found.get(f"chosen on the {half} half", "missing")
        checker.checked += 1
        value = reported.partition("=")[2]
        if not numbers_in(value) or not math.isclose(float(rate), float(value), rel_tol=1e-9):
            checker.mismatch(f"{where}, chosen on the {half} half", rate, f"the report's {reported!r}")


def comparison_table(table: list[dict], sections: dict, first: str, where: str, checker: Checker) -> None:
    at = re.match(r"comparison at (\S+)", first)
    heading = next((h for h in sections if h.startswith(f"Every arm at {at.group(1)}:" if at else "Against ")), "")
    reported = (markdown.tables(sections.get(heading, "")) or [[]])[0]
    previous = None
    for row in table:
        label = row[first]
        if label.startswith("the same, cross-fitted"):
            heading, kind = cross_fit_heading(label, sections)
            name = f"{previous} (cross-fitted{kind})"
            if heading is None:
                checker.mismatch(
                    f"{where}, {name}",
                    label,
                    "a row that says which cross-fitted table it quotes "
                    "('over the grid' or 'over every rate run': the report has both)",
                )
                continue
            choices, comparisons = (markdown.tables(sections.get(heading, "")) + [[], []])[:2]
            found = row_of(comparisons, "arm", previous)
            quoted_choices(label, row_of(choices, "arm", previous), f"{where}, {name}", checker)
        else:
            name = previous = comparison_name(label)
            found = row_of(reported, "arm", name)
        columns = {}
        for column in row:
            if column == first:
                continue
            corrected = "(uncorrected)" in row[column]  # an exploratory row quotes the uncorrected p
            theirs = "difference" if column.startswith("difference") else column.replace(" (Holm)", "") if corrected else column
            columns[column] = theirs
        if found is not None and row.get("verdict") == "exploratory" == found["verdict"].split(" (")[0]:
            found = dict(found, verdict="exploratory")  # short for "exploratory (not corrected)"
        quote({c: v.replace(" (uncorrected)", "") for c, v in row.items()}, found, columns, f"{where}, {name}", checker)


def items_table(table: list[dict], results: Path, pattern: str, where: str, checker: Checker) -> None:
    """A table of comparisons over seeds and test items: each row quotes the report's table under "### Over
    seeds and test items" (of the size its `size` column names, in a scaled sweep); a column may leave out
    the report's " (bootstrap 95%)"."""
    for row in table:
        name = comparison_name(row[ITEMS])
        sections = report(results, pattern.format(size=row.get("size", "")))
        heading = next((h for h in sections if h.startswith("Against ")), "")
        found = item_table(sections.get(heading, "")) or []
        columns = {c: c if c in (found or [{}])[0] else f"{c} (bootstrap 95%)" for c in row if c not in (ITEMS, "size")}
        at = f"{where}, {row['size']} {name}" if "size" in row else f"{where}, {name}"
        quote(row, row_of(found, "arm", name), columns, at, checker)


def sizes_table(table: list[dict], results: Path, pattern: str, where: str, checker: Checker) -> None:
    for row in table:
        sections = report(results, pattern.format(size=row["size"]))
        if not sections:
            checker.mismatch(f"{where}, {row['size']}", row["size"], f"one report at results/{pattern.format(size=row['size'])}")
            continue
        tuned = (markdown.tables(sections.get("Tuned per arm", "")) or [[]])[0]
        at = f"{where}, {row['size']} {row['arm']}"
        found = row_of(tuned, "arm", row["arm"])
        if found is not None:
            found = dict(found, rate=found["chosen on validation"].partition("=")[2])
        if found is not None or row["rate chosen on validation"] or row["test/loss (nats/byte)"]:
            quote(
                row, found, {"rate chosen on validation": "rate", "test/loss (nats/byte)": "test/loss"}, at, checker
            )  # a comparison of two arms ("a vs b") has a row of differences only
        differences = {c: row[c] for c in row if c not in ("size", "arm", "rate chosen on validation", "test/loss (nats/byte)")}
        if not any(differences.values()):
            continue  # the baseline's row
        heading = next(h for h in sections if h.startswith("Against "))
        found = row_of((markdown.tables(sections[heading]) or [[]])[0], "arm", row["arm"])
        quote(row, found, {c: "difference" if " − " in c else c for c in differences}, at, checker)


def trend_table(table: list[dict], sections: dict, results: Path, where: str, checker: Checker) -> None:
    heading = next((h for h in sections if h.startswith("Does the difference change")), "")
    reported, power = (markdown.tables(sections.get(heading, "")) + [[], []])[:2]
    if len(reported) != 1 or len(power) != 1:
        checker.mismatch(
            where,
            f"{len(reported)} and {len(power)} arms in the trend report's slope and detectable tables",
            "one arm in each (the table quotes one)",
        )
        return
    theirs, detectable = reported[0], power[0]
    for row in table:
        name = row[""]
        if name.startswith("slope"):
            quote(
                row,
                theirs | {"estimate": theirs["slope per doubling of parameters"]},
                {"estimate": "estimate", "95% interval": "95% interval", "p": "p"},
                f"{where}, slope",
                checker,
            )
        elif name.startswith("cost at"):
            both = f"{theirs['p (Welch)']} {theirs['exact p (permutation)']}"
            quote(
                row,
                {"estimate": theirs["largest minus smallest"], "95% interval": theirs["95% interval (Welch)"], "p": both},
                {"estimate": "estimate", "95% interval": "95% interval", "p": "p"},
                f"{where}, largest minus smallest",
                checker,
            )
        elif name.startswith("smallest slope detectable"):
            column = next((c for c in detectable if c.startswith("smallest slope detectable")), "missing")
            quote(
                row,
                {"estimate": detectable.get(column, "missing")},
                {"estimate": "estimate"},
                f"{where}, detectable slope",
                checker,
            )
            trend_df(name, theirs["arm"], sections, results, f"{where}, detectable slope", checker)
        elif name.startswith("weighted slope"):
            quote(
                row,
                {"estimate": detectable["weighted slope per doubling"], "95% interval": detectable["95% interval (weighted)"]},
                {"estimate": "estimate", "95% interval": "95% interval"},
                f"{where}, weighted slope",
                checker,
            )
        else:
            checker.note(f"not mapped, not checked: {where}, row {name!r}")


def trend_df(label: str, arm: str, sections: dict, results: Path, where: str, checker: Checker) -> None:
    """The df a "(t_0.975,df + t_0.80,df)" label names: the differences minus 2, the differences being the
    paired seeds of `arm`'s row in each size's comparison table (the sizes the trend report lists)."""
    found = re.search(r"t_0\.975,(\d+) \+ t_0\.80,(\d+)", label)
    if found is None:
        return  # the label names no df
    sizes = dict.fromkeys(row["size"] for row in (markdown.tables(sections.get("", "")) or [[]])[0])
    seeds = 0
    for size in sizes:
        size_sections = report(results, size)
        heading = next((h for h in size_sections if h.startswith("Against ")), "")
        row = row_of((markdown.tables(size_sections.get(heading, "")) or [[]])[0], "arm", arm)
        seeds += int(row["seeds"]) if row and row["seeds"].isdigit() else 0
    for quoted in found.groups():
        checker.text(f"{where}, df", quoted, str(seeds - 2))
