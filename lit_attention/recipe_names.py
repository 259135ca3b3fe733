"""Recipes by name. The package ships the repository's recipes/ folder beside lit_attention/ (in a clone, and
in site-packages after `pip install`), so `--config` takes a recipe by its name as well as by a path:

    lit-attention fit --config quickstart/vit_digits            # recipes/quickstart/vit_digits.yaml
    lit-attention fit --config recipes/quickstart/vit_digits.yaml   # the same, from any folder

A value that is an existing file is always that file; only a value naming no file is looked up among
the shipped recipes (with or without `recipes/` in front and `.yaml` behind). Below every layer: main.py
rewrites the command line with it before anything is parsed.
"""

from __future__ import annotations

import difflib
from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[1] / "recipes"


def shipped_recipes() -> list[str]:
    """The names of the shipped recipes, `quickstart/vit_digits` for recipes/quickstart/vit_digits.yaml."""
    if not SHIPPED.is_dir():
        return []
    return sorted(path.relative_to(SHIPPED).with_suffix("").as_posix() for path in SHIPPED.rglob("*.yaml"))


def shipped_name(value: str) -> str:
    """A recipe's name as the shipped ones are named: without `recipes/` in front or `.yaml` behind."""
    return value.removeprefix("recipes/").removesuffix(".yaml")


def recipe_path(value: str) -> str:
    """`value` itself when it names a file (or nothing shipped), else the path of the shipped recipe it names."""
    if Path(value).exists():
        return value
    name = shipped_name(value)
    shipped = SHIPPED / f"{name}.yaml"
    return str(shipped) if name and shipped.is_file() else value


def closest_recipes(value: str) -> list[str]:
    """The shipped recipe name closest to `value`, if one is close (for the sentence that refuses it)."""
    return difflib.get_close_matches(shipped_name(value), shipped_recipes(), n=1)


def with_recipe_paths(words: list[str]) -> list[str]:
    """The command line with every --config / -c value that names a shipped recipe replaced by its path."""
    found = list(words)
    for i, word in enumerate(found):
        if word in ("--config", "-c") and i + 1 < len(found):
            found[i + 1] = recipe_path(found[i + 1])
        elif word.startswith("--config="):
            found[i] = "--config=" + recipe_path(word.split("=", 1)[1])
    return found
