"""docs/adding-a-variant.md's example, done: its change to the registry is applied to a copy of the tree,
and the page's commands run there (the tables regenerated, the preset's tests run), so the page cannot
drift from the code. The copy holds what those commands need: the packages, the tests, the documents
whose tables are regenerated, and pyproject.toml for pytest's settings."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lit_attention import list_presets

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "adding-a-variant.md").read_text(encoding="utf-8")
REGISTRY_FILE = "lit_attention/modeling/variants.py"
COPIED = ("lit_attention", "datamodules", "tests", "docs", "README.md", "pyproject.toml")


def example_change() -> tuple[str, str]:
    """The page's diff block as (old, new) text: context and removed lines, context and added lines."""
    [diff] = re.findall(r"^```diff\n(.*?)^```", PAGE, flags=re.S | re.M)
    lines = diff.splitlines()
    old = "\n".join(line[1:] for line in lines if not line.startswith("+"))
    new = "\n".join(line[1:] for line in lines if not line.startswith("-"))
    return old, new


def page_commands() -> list[list[str]]:
    [block] = [b for b in re.findall(r"^```bash\n(.*?)^```", PAGE, flags=re.S | re.M) if ".venv/bin/python" in b]
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def new_preset() -> str:
    [name] = re.findall(r'^\+\s+Variant\("(\w+)"', PAGE, flags=re.M)
    return name


def test_the_example_applies_to_the_registry_as_it_is():
    """The diff's context is in variants.py once (the example still fits the code), and the preset it
    adds is new."""
    old, _ = example_change()
    assert (ROOT / REGISTRY_FILE).read_text(encoding="utf-8").count(old) == 1, old
    assert new_preset() not in list_presets()
    assert all(f"{new_preset()} and" in " ".join(words) or words[2].endswith("variant_tables")
               for words in page_commands())


@pytest.mark.slow
def test_the_example_preset_is_enrolled_by_the_tests(tmp_path):
    """On a copy with the example applied: the tables gain its row, and the page's pytest command, which
    narrows the preset-parametrised tests to it, selects tests and passes."""
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, tmp_path / name)
    registry = tmp_path / REGISTRY_FILE
    old, new = example_change()
    registry.write_text(registry.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    preset = new_preset()
    for words in page_commands():
        assert words[0] == ".venv/bin/python", words
        argv = [sys.executable, *words[1:]]
        if words[1:3] == ["-m", "pytest"]:
            argv += ["-q", "-p", "no:cacheprovider"]
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (words, done.stdout[-3000:], done.stderr[-3000:])
        if words[1:3] == ["-m", "pytest"]:
            assert re.search(r"(\d+) passed", done.stdout), done.stdout[-2000:]
            assert int(re.search(r"(\d+) passed", done.stdout).group(1)) >= 20, done.stdout[-2000:]
    for document in ("README.md", "docs/DESIGN.md"):
        assert f"| `{preset}` |" in (tmp_path / document).read_text(encoding="utf-8"), document
