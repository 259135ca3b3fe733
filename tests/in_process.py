"""Running `lit-attention` inside the test process: `main(argv)`'s exit status, and a guard that puts
back the process-wide state such a run changes (conftest.py applies it around every test)."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

# What a `lit-attention` run (Lightning's seed_everything, --trainer.deterministic, the CLI) sets in
# the process: left over, it would change the next test's run.
RUN_VARIABLES = (
    "PL_GLOBAL_SEED",
    "PL_SEED_WORKERS",
    "LIT_ATTENTION_TRACEBACK",
    "CUBLAS_WORKSPACE_CONFIG",
    "LIT_ATTENTION_DRAWN_SEED",
)
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
PYTEST_VARIABLE = "PYTEST_CURRENT_TEST"  # pytest's own, updated between setup, call and teardown


@contextlib.contextmanager
def process_state_kept() -> Iterator[None]:
    """Put back, on the way out, what an in-process run may change for the rest of the process: the
    environment, the working directory, sys.argv, the SIGINT handler, torch's thread count, deterministic-algorithm and
    matmul-precision settings, grad mode, the random states and the logging levels."""
    environ, cwd, argv = dict(os.environ), os.getcwd(), list(sys.argv)
    threads, grad = torch.get_num_threads(), torch.is_grad_enabled()
    deterministic = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    cudnn = (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic)
    precision, dtype = torch.get_float32_matmul_precision(), torch.get_default_dtype()
    randoms = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    levels = {
        name: logger.level for name, logger in logging.Logger.manager.loggerDict.items() if isinstance(logger, logging.Logger)
    }
    root_level = logging.getLogger().level
    interrupt = signal.getsignal(signal.SIGINT)  # Lightning's teardown sets it (SIG_IGN, then SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, interrupt)  # a process a later test starts inherits an ignored SIGINT
        os.chdir(cwd)
        for name in set(os.environ) - set(environ) - {PYTEST_VARIABLE}:
            del os.environ[name]
        for name, value in environ.items():
            if name != PYTEST_VARIABLE and os.environ.get(name) != value:
                os.environ[name] = value
        sys.argv[:] = argv
        torch.set_num_threads(threads)
        torch.set_grad_enabled(grad)
        torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = cudnn
        torch.set_float32_matmul_precision(precision)
        torch.set_default_dtype(dtype)
        random.setstate(randoms[0])
        np.random.set_state(randoms[1])
        torch.set_rng_state(randoms[2])
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        logging.getLogger().setLevel(root_level)


def run_main(args: list[str]) -> int:
    """`lit-attention <args>` in this process: its exit status (main raises SystemExit with it)."""
    from lit_attention.main import main

    try:
        main(args)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 1
    return 0


def copy_runs(source: Path, destination: Path) -> Path:
    """Copy `source/runs` to `destination/runs` (a finished run a test may change) and return it."""
    return Path(shutil.copytree(source / "runs", destination / "runs"))


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes: what a command that must change nothing is checked against."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}
