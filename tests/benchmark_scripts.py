"""Running a script of benchmarks/ as a user does (`python benchmarks/NAME ARGS`, as __main__), and reading
the tables it prints (the test_benchmark*.py files; one file per long script, so that xdist's --dist
loadfile can run them on different workers).

`run_script` runs the script in the test process rather than a fresh interpreter: torch, Lightning and
transformers are imported once per worker instead of once per script (some 8 s of CPU each on 2 cores);
conftest.py puts back what a script changes (threads, environment, random states)."""

import contextlib
import io
import os
import runpy
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_script(name: str, *args: str) -> str:
    """What `python benchmarks/<name> <args>` prints, run in this process from the repository's root."""
    script = ROOT / "benchmarks" / name
    path, cwd, environ = list(sys.path), os.getcwd(), dict(os.environ)
    sys.argv[:] = [str(script), *args]
    # The processes a script starts (compare_parallel's sweeps) import this checkout's package, not an
    # editable install elsewhere (another worktree).
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    sys.path.insert(0, str(script.parent))  # as python does for a script: its folder first (timing.py)
    out = io.StringIO()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exit_:
        assert exit_.code in (0, None), f"{name} exited with status {exit_.code}: {out.getvalue()[-3000:]}"
    finally:
        os.chdir(cwd)
        sys.path[:] = path
        os.environ.clear()
        os.environ.update(environ)
    return out.getvalue()


def run_script_in_a_process(name: str, *args: str) -> str:
    """What `python benchmarks/<name> <args>` prints, run in a process of its own: for gpu_check.py, which
    measured no cheaper in this process, and compare_parallel.py, whose sweeps are processes anyway."""
    # This checkout's package first: an editable install elsewhere (another worktree) would shadow it.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), *args], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def table(stdout: str) -> list[list[str]]:
    rows = [line.strip("|").split("|") for line in stdout.splitlines() if line.startswith("| ") and "---" not in line]
    return [[cell.strip() for cell in row] for row in rows[1:]]  # without the header
