"""The generated tables of README.md and docs/DESIGN.md: the variants' (from the registry, variants.py)
and, in docs/DESIGN.md, the block options' (from the model configs, block_options.py).

    python -m lit_attention.modeling.variant_tables            # print the tables
    python -m lit_attention.modeling.variant_tables --write    # put them into the documents

Each document's variants table sits between the marker lines TABLE_BEGIN and TABLE_END, the block options
table between BLOCK_TABLE_BEGIN and BLOCK_TABLE_END; tests/test_variants.py fails until they are the
generated ones, so a new preset or a new option value cannot leave the docs behind.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from lit_attention.errors import ConfigError
from lit_attention.markdown import markdown_table
from lit_attention.modeling.block_options import block_options_table
from lit_attention.modeling.variants import AXES, QUERY_SCALES, REGISTRY, head_formulas, parameter_formula


def _option_label(option) -> str:
    return ("on" if option else "off") if isinstance(option, bool) else str(option)


def variants_table(style: str = "readme") -> str:
    """The presets as a Markdown table: `readme` with each head's Q, K and V, `design` by axis."""
    if style == "readme":
        header = ["preset", "Q_i", "K_i", "V_i", "s", "attention parameters", "what it is"]
        rows = [
            [f"`{v.name}`", *head_formulas(v.spec), QUERY_SCALES[v.spec.query_scale], parameter_formula(v.spec), v.description]
            for v in REGISTRY.values()
        ]
    elif style == "design":
        header = ["preset", *AXES, "scale", "attention parameters (no biases)"]
        rows = [
            [
                f"`{v.name}`",
                *(_option_label(getattr(v.spec, a)) for a in AXES),
                QUERY_SCALES[v.spec.query_scale],
                parameter_formula(v.spec),
            ]
            for v in REGISTRY.values()
        ]
    else:
        raise ConfigError(f"Unknown table style {style!r}; valid styles are readme, design.")
    return markdown_table(header, rows)


TABLE_BEGIN = "<!-- variants table: generated from the registry by python -m lit_attention.modeling.variant_tables --write -->"
TABLE_END = "<!-- end of variants table -->"
DOCUMENTS = {"README.md": "readme", "docs/DESIGN.md": "design"}
BLOCK_TABLE_BEGIN = (
    "<!-- block options table: generated from the model configs by python -m lit_attention.modeling.variant_tables --write -->"
)
BLOCK_TABLE_END = "<!-- end of block options table -->"
BLOCK_DOCUMENT = "docs/DESIGN.md"
ROOT = Path(__file__).resolve().parents[2]


def documented_table(text: str, begin: str = TABLE_BEGIN, end: str = TABLE_END) -> str | None:
    """The table between the markers `begin` and `end` in a document's text (None without them)."""
    match = re.search(re.escape(begin) + r"\n(.*?)\n" + re.escape(end), text, flags=re.DOTALL)
    return match.group(1) if match else None


def _write_between(path: Path, begin: str, end: str, new: str, what: str) -> bool:
    """Put `new` between the markers of `path`; whether the file changed."""
    text = path.read_text()
    old = documented_table(text, begin, end)
    if old is None:
        raise ConfigError(f"{path} has no {what} markers; put the lines {begin!r} and {end!r} where its table goes.")
    if old == new:
        return False
    path.write_text(text.replace(f"{begin}\n{old}\n{end}", f"{begin}\n{new}\n{end}"))
    return True


def write_tables(root: Path = ROOT) -> list[str]:
    """Put each document's generated variants table between its markers; returns the documents that changed."""
    return [
        name
        for name, style in DOCUMENTS.items()
        if _write_between(root / name, TABLE_BEGIN, TABLE_END, variants_table(style), "variants table")
    ]


def write_block_table(root: Path = ROOT) -> bool:
    """Put the generated block options table into BLOCK_DOCUMENT; whether it changed."""
    return _write_between(root / BLOCK_DOCUMENT, BLOCK_TABLE_BEGIN, BLOCK_TABLE_END, block_options_table(), "block options table")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"put the tables into {' and '.join(DOCUMENTS)}")
    if parser.parse_args().write:
        changed = write_tables() + ([f"{BLOCK_DOCUMENT} (block options)"] if write_block_table() else [])
        print("updated: " + (", ".join(changed) or "nothing, the tables were current"))
    else:
        for name, style in DOCUMENTS.items():
            print(f"{name}:\n{variants_table(style)}\n")
        print(f"{BLOCK_DOCUMENT}, block options:\n{block_options_table()}\n")
