"""The package as a user installs it: its version, its license, the recipes it ships and takes by name,
the packages it imports all declared, its locks on a platform without flock, and the built wheel running
a README command from an empty folder."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import lit_attention
from lit_attention.main import main
from lit_attention.recipe_names import SHIPPED, shipped_recipes, with_recipe_paths

ROOT = Path(__file__).resolve().parents[1]
# What the installed package declares (make reinstalls it whenever pyproject.toml changes).
METADATA = importlib.metadata.metadata("lit-attention")


def test_the_version_is_written_once_and_printed(capsys):
    assert re.fullmatch(r"\d+\.\d+\.\d+", lit_attention.__version__)
    assert METADATA["Version"] == lit_attention.__version__  # pyproject.toml reads it from the package
    main(["--version"])
    assert capsys.readouterr().out == f"lit-attention {lit_attention.__version__}\n"
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"\n## {lit_attention.__version__} " in changelog  # a section per release


def test_the_license_is_a_file_and_an_spdx_expression():
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")
    assert METADATA["License-Expression"] == "MIT" and METADATA.get_all("License-File") == ["LICENSE"]
    assert (ROOT / "lit_attention" / "py.typed").is_file() and (ROOT / "CITATION.cff").is_file()


def test_a_shipped_recipe_is_taken_by_its_name_and_a_file_stays_a_file(tmp_path, monkeypatch):
    assert SHIPPED == ROOT / "recipes" and "quickstart/vit_digits" in shipped_recipes()
    vit = str(SHIPPED / "quickstart" / "vit_digits.yaml")
    for given in ("quickstart/vit_digits", "quickstart/vit_digits.yaml", "recipes/quickstart/vit_digits.yaml"):
        monkeypatch.chdir(tmp_path)  # outside the clone: recipes/... names no file here
        assert with_recipe_paths(["fit", "--config", given, "-c", given]) == ["fit", "--config", vit, "-c", vit]
        assert with_recipe_paths([f"--config={given}"]) == [f"--config={vit}"]
    own = tmp_path / "quickstart" / "vit_digits.yaml"  # a user's own file of the same name wins
    own.parent.mkdir()
    own.write_text("model: {}\n")
    assert with_recipe_paths(["--config", "quickstart/vit_digits.yaml"]) == ["--config", "quickstart/vit_digits.yaml"]
    assert with_recipe_paths(["--config", "nowhere/at_all"]) == ["--config", "nowhere/at_all"]


def test_a_shipped_recipe_named_by_its_path_names_its_runs_as_in_the_clone():
    """The run's name starts after the last `recipes` of the path: a package installed under a folder that is
    itself called recipes still names its runs quickstart/vit_digits."""
    from lit_attention.training.run_dirs import recipe_name

    assert recipe_name(["/home/u/recipes/env/lib/site-packages/recipes/quickstart/vit_digits.yaml"]) == "quickstart/vit_digits"
    assert recipe_name(["recipes/quickstart/vit_digits.yaml", "recipes/trainer/ddp.yaml"]) == "quickstart/vit_digits"


def test_an_unknown_recipe_name_gets_one_sentence_with_the_closest_names(in_tmp, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["fit", "--config", "quickstart/vit_digit"])
    assert exit_.value.code == 2
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert line == (
        "error: Recipe 'quickstart/vit_digit' does not exist; pass a YAML file, or the name of a recipe the "
        "package ships, such as quickstart/vit_digits (did you mean quickstart/vit_digits?)."
    )


def test_without_fcntl_a_lock_is_its_held_file(tmp_path, monkeypatch):
    """On a platform without fcntl (Windows) the package imports, and a lock is the file created exclusively."""
    from lit_attention.training import file_locks

    monkeypatch.setattr(file_locks, "fcntl", None)
    first = file_locks.FileLock(tmp_path / ".lock")
    assert first.acquire() is None and (tmp_path / ".lock.held").is_file()
    assert f"process {os.getpid()}" in file_locks.FileLock(tmp_path / ".lock").acquire()  # refused: names the holder
    first.release()
    assert not (tmp_path / ".lock.held").exists()
    assert file_locks.FileLock(tmp_path / ".lock").acquire() is None


def imported_packages() -> set[str]:
    """The top-level packages that lit_attention/ and datamodules/ import, other than their own and the standard library's."""
    found = set()
    for package in ("lit_attention", "datamodules"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    found |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"lit_attention", "datamodules", "__future__"}


def requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


@pytest.mark.slow  # reads every source file
def test_every_imported_package_is_declared():
    # Requirements with an `extra == ...` marker belong to an extra (ports, dev, bench); either counts as declared.
    declared = {requirement_name(r) for r in importlib.metadata.requires("lit-attention")}
    distributions = importlib.metadata.packages_distributions()
    missing = {}
    for module in sorted(imported_packages()):
        names = {name.lower().replace("_", "-") for name in distributions.get(module, [module])}
        if not names & declared:
            missing[module] = sorted(names)
    assert not missing, f"imported but declared neither as a dependency nor in an extra: {missing}"


@pytest.mark.slow  # builds the wheel and trains in a process of its own
def test_the_built_wheel_runs_a_readme_command_from_an_empty_folder(tmp_path):
    """The wheel carries the package, its data modules and its recipes: installed into a new virtual
    environment, its console script trains the ViT quickstart, named as a shipped recipe, from an empty
    folder. The dependencies are the development environment's, on the new environment's path (installing
    torch again takes minutes); its own `lit_attention` is the wheel's, not the clone's editable one."""
    wheels, venv, empty = tmp_path / "wheels", tmp_path / "venv", tmp_path / "empty"
    empty.mkdir()
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = wheels.glob("lit_attention-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # A plain path line: the development site-packages joins sys.path, but its .pth files (the editable
    # install's finder) are not run, so nothing points back at the clone.
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    from in_process import OFFLINE

    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "LIT_ATTENTION"))}, **OFFLINE}
    located = subprocess.run(
        [str(python), "-c", "import lit_attention, datamodules; print(lit_attention.__file__, datamodules.__file__)"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(ROOT) not in located.stdout and str(site) in located.stdout, located.stdout
    script = venv / "bin" / "lit-attention"
    version = subprocess.run([str(script), "--version"], cwd=empty, env=env, capture_output=True, text=True, timeout=60)
    assert version.stdout == f"lit-attention {lit_attention.__version__}\n", version.stderr[-2000:]
    fit = subprocess.run(
        [str(script), "fit", "--config", "quickstart/vit_digits", "--trainer.max_steps", "2"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert fit.returncode == 0, (fit.stdout[-2000:], fit.stderr[-3000:])
    [record] = (empty / "runs" / "quickstart" / "vit_digits" / "standard" / "seed_0").glob("version_*/record.json")
    saved = json.loads(record.read_text())
    assert saved["optimizer_steps"] == 2 and saved["provenance"]["lit_attention"] == lit_attention.__version__
    # The scorecard's protocol ships too: its dry run plans v1 from the empty folder.
    planned = subprocess.run(
        [str(script), "scorecard", "--variant", "super", "--dry-run"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert planned.returncode == 0 and "Protocol v1 (sha256 " in planned.stdout, planned.stderr[-2000:]
