"""Runs `lit-attention` commands in processes forked from one that has already imported Lightning.

Importing torch, Lightning, torchmetrics and torchvision takes about 8 s on a 2-core machine, longer
than many of a sweep's small runs train: `compare` spent a quarter of a 700-run study importing. A
warm worker is one long-lived process per launcher slot, started with that slot's environment
(its thread count; GPU sweeps start a fresh process per run). It imports everything once; then, for every run, it forks a child that starts where
the imports end. The child is still a process of its own: its own memory, seeds, output file and exit
status, and the same environment, code path and arithmetic as `python -m lit_attention ...` (tests
check that the two give identical records). The worker itself never computes with torch: a thread
pool or CUDA context made before a fork would not work in the child.

Protocol (one run at a time): the launcher writes a JSON line {"words": [...], "log": path} to the
worker's stdin; the worker runs `lit-attention <words>` in a child with stdout and stderr appended to
the log, and answers with a JSON line {"status": exit status}. End of input ends the worker.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable

from lit_attention.sweep.launchers import DIE_WITH_PARENT, die_with_parent


def serve(main: Callable[[list[str]], None]) -> None:
    """Answer requests until end of input, running each as `main(words)` (lit_attention.main's) in a child."""
    import lit_attention.training.cli  # noqa: F401  (the slow imports, done once for every run this worker forks)
    from lit_attention.training.records import provenance

    provenance()  # the commit of the code imported just now, which every run forked below runs
    # Ctrl-C is for the runs and for compare, which then ends this worker; a run gets back what was here.
    interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        worker = os.getpid()
        child = os.fork()
        if child == 0:
            signal.signal(signal.SIGINT, interrupt)
            run_child(main, request["words"], request["log"], worker)
        _, wait_status = os.waitpid(child, 0)
        print(json.dumps({"status": os.waitstatus_to_exitcode(wait_status)}), flush=True)


def run_child(main: Callable[[list[str]], None], words: list[str], log: str, worker: int) -> None:
    """In the forked child: become `lit-attention <words>` writing to `log`; never returns."""
    status, interrupted = 1, False
    try:
        if os.environ.get(DIE_WITH_PARENT):
            die_with_parent()
            if os.getppid() != worker:  # the worker died before the line above: nobody waits for this run
                os._exit(1)
        output = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        nothing = os.open(os.devnull, os.O_RDONLY)  # the worker's requests are not this run's input
        os.dup2(nothing, 0)
        os.close(nothing)
        # Lightning's DDP launcher starts the other ranks as `python -m lit_attention <sys.argv[1:]>`.
        sys.argv = [sys.argv[0], *words]
        main(words)
        status = 0
    except SystemExit as exit_:
        if isinstance(exit_.code, int) or exit_.code is None:
            status = exit_.code or 0
        else:
            print(exit_.code, file=sys.stderr)
    except KeyboardInterrupt:
        traceback.print_exc()
        interrupted = True
    except BaseException:  # noqa: BLE001  (what an uncaught error does in a fresh process: traceback, 1)
        traceback.print_exc()
    finally:
        exit_like_an_interpreter(status, interrupted)


def exit_like_an_interpreter(status: int, interrupted: bool) -> None:
    """What Python does at exit, then leave without returning into the worker's loop: wait for the
    run's non-daemon threads, run the atexit functions (multiprocessing's clean-up of DataLoader
    workers among them), flush, and end with `status` (an uncaught Ctrl-C: killed by SIGINT)."""
    try:
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        if interrupted:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        os._exit(status)
