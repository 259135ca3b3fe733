"""The variants' tables in README.md and docs/DESIGN.md, generated from the registry (variants.py).

    python -m lit_attention.modeling.variant_tables            # print both tables
    python -m lit_attention.modeling.variant_tables --write    # put them into the documents

Each document's table sits between the marker lines TABLE_BEGIN and TABLE_END; tests/test_variants.py
fails until it is the generated one, so a new preset cannot leave the docs behind.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from lit_attention.errors import ConfigError
from lit_attention.modeling.variants import AXES, QUERY_SCALES, REGISTRY, head_formulas, parameter_formula


def _option_label(option) -> str:
    return ("on" if option else "off") if isinstance(option, bool) else str(option)


def variants_table(style: str = "readme") -> str:
    """The presets as a Markdown table: `readme` with each head's Q, K and V, `design` by axis."""
    if style == "readme":
        header = ["preset", "Q_i", "K_i", "V_i", "s", "attention parameters", "what it is"]
        rows = [[f"`{v.name}`", *head_formulas(v.spec), QUERY_SCALES[v.spec.query_scale],
                 parameter_formula(v.spec), v.description] for v in REGISTRY.values()]
    elif style == "design":
        header = ["preset", *AXES, "scale", "attention parameters (no biases)"]
        rows = [[f"`{v.name}`", *(_option_label(getattr(v.spec, a)) for a in AXES), QUERY_SCALES[v.spec.query_scale],
                 parameter_formula(v.spec)] for v in REGISTRY.values()]
    else:
        raise ConfigError(f"Unknown table style {style!r}; valid styles are readme, design.")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(cells) + " |" for cells in rows])


TABLE_BEGIN = "<!-- variants table: generated from the registry by python -m lit_attention.modeling.variant_tables --write -->"
TABLE_END = "<!-- end of variants table -->"
DOCUMENTS = {"README.md": "readme", "docs/DESIGN.md": "design"}
ROOT = Path(__file__).resolve().parents[2]


def documented_table(text: str) -> str | None:
    """The table between TABLE_BEGIN and TABLE_END in a document's text (None without the markers)."""
    match = re.search(re.escape(TABLE_BEGIN) + r"\n(.*?)\n" + re.escape(TABLE_END), text, flags=re.DOTALL)
    return match.group(1) if match else None


def write_tables(root: Path = ROOT) -> list[str]:
    """Put each document's generated table between its markers; returns the documents that changed."""
    changed = []
    for name, style in DOCUMENTS.items():
        path = root / name
        text = path.read_text()
        old = documented_table(text)
        if old is None:
            raise ConfigError(f"{path} has no variants table markers; put the lines {TABLE_BEGIN!r} and "
                              f"{TABLE_END!r} where its table goes.")
        new = variants_table(style)
        if old != new:
            path.write_text(text.replace(f"{TABLE_BEGIN}\n{old}\n{TABLE_END}", f"{TABLE_BEGIN}\n{new}\n{TABLE_END}"))
            changed.append(name)
    return changed


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"put the tables into {' and '.join(DOCUMENTS)}")
    if parser.parse_args().write:
        print("updated: " + (", ".join(write_tables()) or "nothing, the tables were current"))
    else:
        for name, style in DOCUMENTS.items():
            print(f"{name}:\n{variants_table(style)}\n")
