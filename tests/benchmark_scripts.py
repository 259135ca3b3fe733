"""Running a script of benchmarks/ as a user does, in a process of its own, and reading the tables it
prints (the test_benchmark*.py files; one file per long script, so that xdist's --dist loadfile can run
them on different workers)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_script(name: str, *args: str) -> str:
    # This checkout's package first: an editable install elsewhere (another worktree) would shadow it.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args], capture_output=True,
                            text=True, timeout=300, cwd=ROOT, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def table(stdout: str) -> list[list[str]]:
    rows = [line.strip("|").split("|") for line in stdout.splitlines() if line.startswith("| ") and "---" not in line]
    return [[cell.strip() for cell in row] for row in rows[1:]]  # without the header
