"""The tables of a markdown report, by the heading they sit under."""

from __future__ import annotations


def sections(text: str, level: str = "## ") -> dict[str, str]:
    """{heading: its text up to the next heading of that level}; the text before the first under ""."""
    found, heading, lines = {}, "", []
    for line in text.splitlines():
        if line.startswith(level):
            found[heading] = "\n".join(lines)
            heading, lines = line[len(level) :].strip(), []
        else:
            lines.append(line)
    found[heading] = "\n".join(lines)
    return found


def tables(text: str) -> list[list[dict[str, str]]]:
    """Every table of `text`, each a list of rows {column header: cell}."""
    found, block = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            block.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif block:
            header, rows = block[0], [row for row in block[1:] if not set("".join(row)) <= set("-: ")]
            found.append([dict(zip(header, row)) for row in rows])
            block = []
    return found
