"""What the test files share: every test leaves the process as it found it, a working directory for
in-process `main(argv)` calls, and finished runs trained once per session.

Most command-line tests call `lit_attention.main.main(argv)` in the test process (in_process.py)
instead of starting `python -m lit_attention` (about 8 s of imports each on a 2-core machine). A real
subprocess is kept where a process is what is tested: a signal or a kill, DDP's second rank, two runs
at once, the console script itself, or a fresh interpreter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# cpu_budget: the summary's names of fast tests over their CPU budget; pytester: its test runs a session.
pytest_plugins = ("cpu_budget", "pytester")

# torch, Lightning and the project are imported where a test first needs them, not here: under xdist
# this file is imported by the controller too, which runs no test (torch alone is some 3 s of CPU).

# No test reaches the network: `datasets` reports each load, local files too, to the hub (a request
# with a 3 s timeout) unless told not to. Set before any test module imports it; processes inherit it.
os.environ.setdefault("HF_UPDATE_DOWNLOAD_COUNTS", "0")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

# Under xdist, each worker (and each process its tests start) gets its share of the cores. torch's
# default, a thread per core in every worker, makes tiny ops wait on preempted threads when the cores
# are busy: on 2 shared cores a 0.2 s model test took 40 s.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if WORKERS > 1 and "PYTEST_XDIST_WORKER" in os.environ:
    import torch

    THREADS = max(1, len(os.sched_getaffinity(0)) // WORKERS)
    torch.set_num_threads(THREADS)
    os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))


@pytest.fixture(autouse=True)
def _process_state_kept() -> Iterator[None]:
    """Every test leaves the process as it found it, whichever test an xdist worker runs next."""
    from in_process import process_state_kept  # tests/ is on sys.path under pytest

    with process_state_kept():
        yield


def starts_python(program: str) -> bool:
    """Whether running `program` starts a Python interpreter: python itself or a script it runs
    (lit-attention, tensorboard, torchrun)."""
    found = shutil.which(program)
    if found is None:
        return False
    if Path(found).name.startswith("python") or os.path.realpath(found) == os.path.realpath(sys.executable):
        return True
    with open(found, "rb") as file:
        first = file.readline(200)
    return first.startswith(b"#!") and b"python" in first


PROJECT = Path(__file__).resolve().parents[1]


def started_by_the_project() -> bool:
    """Whether the code starting a process (the first frame outside subprocess.py) is this project's:
    a test, lit_attention or datamodules, not a library (jsonargparse asks a quick `python -c` once)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == subprocess.__file__:
        frame = frame.f_back
    if frame is None:
        return False
    path = Path(frame.f_code.co_filename).resolve()
    return path.is_relative_to(PROJECT) and "site-packages" not in path.parts


@pytest.fixture(autouse=True)
def _new_interpreters_are_slow(request, monkeypatch) -> None:
    """A test that starts a Python process of the project's (about 8 s of imports on 2 cores) must be
    marked slow, so that `make test-fast` stays fast and the mark keeps its meaning."""
    if request.node.get_closest_marker("slow"):
        return
    start = subprocess.Popen.__init__

    def refuse_python(self, args, *more, **options):
        program = str(args) if isinstance(args, (str, os.PathLike)) else str(args[0])
        if started_by_the_project() and starts_python(program.split()[0] if options.get("shell") else program):
            pytest.fail(
                f"{request.node.nodeid} starts {program} (a new Python process); mark it @pytest.mark.slow", pytrace=False
            )
        start(self, args, *more, **options)

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse_python)

    from lit_attention.sweep import launchers

    def refuse_forkserver(*args, **kwargs):  # compare's local runs: the forkserver is a new interpreter too
        pytest.fail(
            f"{request.node.nodeid} starts compare's forkserver (a new Python process); mark it @pytest.mark.slow", pytrace=False
        )

    monkeypatch.setattr(launchers, "start_forkserver", refuse_forkserver)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch) -> Path:
    """Run `main` in-process inside tmp_path, offline, without a seed or traceback setting left by another test."""
    from in_process import OFFLINE, RUN_VARIABLES

    monkeypatch.chdir(tmp_path)
    for name, value in OFFLINE.items():
        monkeypatch.setenv(name, value)
    for name in RUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory) -> Callable[[list[str]], Path]:
    """finished_run(args) -> a directory whose `runs/` holds what `lit-attention fit <args>` wrote.

    Trained in-process once per session (per xdist worker) for each distinct `args`, so that the
    tests that only read a finished run share one. A test that writes into a run (resumes, evaluates,
    checksums it around a failing command) works on a copy: `copy_runs(finished_run(args), tmp_path)`.
    """
    from in_process import OFFLINE, RUN_VARIABLES, process_state_kept, run_main

    made: dict[tuple[str, ...], Path] = {}

    def get(args: list[str]) -> Path:
        key = tuple(args)
        if key not in made:
            where = tmp_path_factory.mktemp("finished_run")
            with process_state_kept():
                os.chdir(where)
                os.environ.update(OFFLINE)
                for name in RUN_VARIABLES:
                    os.environ.pop(name, None)
                status = run_main(["fit", *args])
            assert status == 0, f"the shared run `fit {' '.join(args)}` failed with exit status {status}"
            made[key] = where
        return made[key]

    return get
