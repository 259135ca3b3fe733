"""The one Markdown table writer, below every layer (as errors.py and limits.py are): the README's and
DESIGN.md's generated tables (modeling/variant_tables.py, block_options.py), compare's reports
(reports/tables.py), inspect's reports (analysis/report.py, analysis/inspect.py) and the text baselines'
table (datamodules/stdlib_text_baselines.py) all write their tables with it."""

from __future__ import annotations


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table of `header` and `rows` (each a list of cells already written as text), no final newline."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
