"""docs/reference/<command>.md are generated from the parsers (tools/docs_reference.py): regenerated here,
each must equal its committed file, so an option added, renamed or reworded fails until the pages are
written again (`.venv/bin/python tools/docs_reference.py --write`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def generator():
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "tools" / "docs_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_fit_page_keeps_the_run_options_and_only_the_first_section():
    text = (ROOT / "docs/reference/fit.md").read_text(encoding="utf-8")
    assert "--run.checkpoint_every_n_steps" in text and "--seed_everything" in text
    assert "--trainer.max_steps" not in text  # Lightning's own options: `fit --help` lists them


def test_fit_options_is_the_options_section():
    help_text = (
        "usage: x\n\noptions:\n  -h, --help  help\n  --run.root ROOT\n                the root\n\nOther group:\n  --trainer.x\n"
    )
    assert generator().fit_options(help_text) == "options:\n  -h, --help  help\n  --run.root ROOT\n                the root"


@pytest.mark.slow  # imports Lightning and builds every parser: seconds
def test_reference_pages_are_the_generated_ones():
    """`lit-attention <command> --help` for fit, compare and inspect, run in this process at the
    generator's fixed terminal width (fit's from the --help cache once it has been built)."""
    pages = generator().pages(in_process=True)
    assert sorted(path.name for path in pages) == ["compare.md", "fit.md", "inspect.md"]
    stale = [str(path.relative_to(ROOT)) for path, text in pages.items() if path.read_text(encoding="utf-8") != text]
    assert not stale, f"{stale} differ from the parsers' help; run .venv/bin/python tools/docs_reference.py --write"
