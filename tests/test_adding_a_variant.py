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
    [name] = re.findall(r'^\+\s+Variant\(\n\+\s+"(\w+)",', PAGE, flags=re.M)
    return name


def copy_tree(tmp_path: Path) -> None:
    """What the page's commands need, copied into `tmp_path`."""
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, tmp_path / name)


def run_page_command(words: list[str], tmp_path: Path, env: dict) -> subprocess.CompletedProcess:
    """One of the page's `.venv/bin/python ...` commands, run in the copy with this interpreter; it must pass."""
    assert words[0] == ".venv/bin/python", words
    argv = [sys.executable, *words[1:]]
    if words[1:3] == ["-m", "pytest"]:
        argv += ["-q", "-p", "no:cacheprovider"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (words, done.stdout[-3000:], done.stderr[-3000:])
    return done


def test_the_example_applies_to_the_registry_as_it_is():
    """The diff's context is in variants.py once (the example still fits the code), and the preset it
    adds is new."""
    old, _ = example_change()
    assert (ROOT / REGISTRY_FILE).read_text(encoding="utf-8").count(old) == 1, old
    assert new_preset() not in list_presets()
    assert all(f"{new_preset()} and" in " ".join(words) or words[2].endswith("variant_tables") for words in page_commands())


@pytest.mark.slow
def test_the_example_preset_is_enrolled_by_the_tests(tmp_path):
    """On a copy with the example applied: the tables gain its row, and the page's pytest command, which
    narrows the preset-parametrised tests to it, selects tests and passes."""
    copy_tree(tmp_path)
    registry = tmp_path / REGISTRY_FILE
    old, new = example_change()
    registry.write_text(registry.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    preset = new_preset()
    for words in page_commands():
        done = run_page_command(words, tmp_path, env)
        if words[1:3] == ["-m", "pytest"]:
            assert re.search(r"(\d+) passed", done.stdout), done.stdout[-2000:]
            assert int(re.search(r"(\d+) passed", done.stdout).group(1)) >= 20, done.stdout[-2000:]
    for document in ("README.md", "docs/DESIGN.md"):
        assert f"| `{preset}` |" in (tmp_path / document).read_text(encoding="utf-8"), document


# ------------------------------------------------------------------------------ §4, a new block option
SOURCE_PACKAGES = ("lit_attention/", "datamodules/")


def block_option_patches() -> list[tuple[str, str, str]]:
    """§4's ```patch blocks as (file, old text, new text), in the page's order."""
    section = PAGE[PAGE.index("## 4. A new block option") :]
    patches = []
    for block in re.findall(r"^```patch\n(.*?)^```", section, flags=re.S | re.M):
        header, *lines = block.splitlines()
        assert header.startswith("--- "), header
        old = "\n".join(line[1:] for line in lines if not line.startswith("+"))
        new = "\n".join(line[1:] for line in lines if not line.startswith("-"))
        patches.append((header[4:], old, new))
    return patches


def block_option_commands() -> list[list[str]]:
    section = PAGE[PAGE.index("## 4. A new block option") :]
    [block] = re.findall(r"^```sh\n(.*?)^```", section, flags=re.S | re.M)
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_the_block_option_example_fits_the_code_and_touches_three_source_files():
    """Each change's old text is in its file once, in the page's order (the example still fits the code), and
    the new position scheme touches no more than three source files."""
    patches = block_option_patches()
    texts = {}
    for path, old, new in patches:
        text = texts.setdefault(path, (ROOT / path).read_text(encoding="utf-8"))
        assert text.count(old) == 1, (path, old)
        texts[path] = text.replace(old, new)
    sources = [path for path in texts if path.startswith(SOURCE_PACKAGES)]
    assert len(sources) <= 3 and set(texts) - set(sources) <= {"tests/test_modern_attention.py"}, sorted(texts)
    assert "log_distance" not in (ROOT / "lit_attention/modeling/positions.py").read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_block_option_example_is_enrolled_by_the_tests(tmp_path):
    """On a copy with §4 applied: the options table gains the value in every family whose stack offers it,
    and the page's tests, which run over every value of every option, pass with it."""
    copy_tree(tmp_path)
    for path, old, new in block_option_patches():
        target = tmp_path / path
        target.write_text(target.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for words in block_option_commands():
        done = run_page_command(words, tmp_path, env)
        if words[1:3] == ["-m", "pytest"]:
            assert int(re.search(r"(\d+) passed", done.stdout).group(1)) >= 20, done.stdout[-2000:]
    design = (tmp_path / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    table = design[design.index("<!-- block options table") : design.index("<!-- end of block options table")]
    [row] = [line for line in table.splitlines() if line.startswith("| `position`")]
    assert row.count("log_distance") == 3, row  # GPT, the text encoder and seq2seq; the ViT's grid has no distance
    probe = (
        "from lit_attention.modeling import GPT, GPTConfig; import torch; "
        "m = GPT(GPTConfig(vocab_size=5, max_len=4, dim=8, depth=1, num_heads=2, position='log_distance')); "
        "mask = m.inputs.self_mask(torch.zeros(1, 4, 8), None); "
        # head 0's slope with 2 heads is 2^-4; the query at 3 against the key at 0, 3 apart
        "assert abs(mask[0, 0, 3, 0].item() + 2 ** -4 * torch.log1p(torch.tensor(3.0)).item()) < 1e-6, mask"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
