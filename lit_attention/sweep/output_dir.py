"""Whose `--output` it is, and who is using it now.

compare writes only into a directory that is its own: a new or empty one, one holding its lock file
(`.compare.lock`, which every compare command takes there), or one from before the lock file that
holds a sweep's `runs/` and nothing but what compare writes. Any other directory is refused before
anything is written into it, so that a user's own files are never replaced by a report.

While a command works in its output it holds an exclusive `flock` on the lock file, released by the
kernel when the process ends however it ends, so that a killed sweep leaves no stale lock. A second
command into the same output is refused, naming the holder, or waits for it with --wait-for-lock:
two sweeps never train one run twice or write one report over the other's. The file stays when the
lock is let go: it is what marks the directory as compare's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from lit_attention.errors import ConfigError
from lit_attention.training.file_locks import FileLock
from lit_attention.sweep.report_files import REPORT_FILES, is_temporary
from lit_attention.sweep.verify import VERIFY

LOCK = ".compare.lock"
INSPECT = "inspect"  # `--inspect`'s folder (lit_attention/reports/inspection.py)
RUNS = "runs"
# Everything compare itself puts at the top of its output (the SLURM launcher's job files go to slurm/).
OWN_NAMES = {LOCK, LOCK + ".held", RUNS, INSPECT, VERIFY, "slurm", "sizes", "scaling.png", *REPORT_FILES}  # sizes/: --scale


def check_output(output: Path, report_only: bool) -> None:
    """Refuse, before anything is written, an output that is not compare's; with --report, also one
    that holds no runs to report on (and then create nothing)."""
    output = Path(output)
    if output.exists() and not output.is_dir():
        return  # check_writable says that a file is in the way
    entries = sorted(os.listdir(output)) if output.is_dir() else []
    foreign = [
        name for name in entries if name not in OWN_NAMES and not is_temporary(name) and not name.startswith(".write-test-")
    ]
    if entries and LOCK not in entries and (foreign or RUNS not in entries):
        shown = foreign or entries
        raise ConfigError(
            f"--output {str(output)!r} holds files that are not a compare sweep's "
            f"({', '.join(shown[:3])}{', ...' if len(shown) > 3 else ''}); compare writes only into a new "
            "or empty directory or one of its own sweeps, so choose another --output."
        )
    if report_only and RUNS not in entries:
        what = "does not exist" if not output.exists() else "holds no runs"
        raise ConfigError(
            f"--output {str(output)!r} {what}, so --report has nothing to report; run the same command "
            "without --report to train the sweep."
        )


# What each kind of compare command leaves at the top of its output, and how a message names the kind.
SIZES, TREND_FIGURE = "sizes", "size_trend.png"
KINDS = {"scale": "a --scale sweep", "sweep": "a sweep", "trend": "a --trend report"}


def last_command(output: Path) -> str:
    """The command that last held `output`'s lock, as its lock file names it ("" when none does)."""
    lock = Path(output) / LOCK
    held = lock.read_text(errors="replace").strip() if lock.is_file() else ""
    return held[held.find("(") + 1 : held.rfind(")")] if "(" in held else ""


def output_kind(output: Path) -> str | None:
    """Which kind of compare command made `output`: "scale" (its lock names a --scale command, or it has
    sizes/: a --scale sweep stopped before its first report has no sizes/ yet), "sweep" (runs/ alone),
    "trend" (size_trend.png without runs), None for a folder none of them made (new, empty or the user's)."""
    output = Path(output)
    if (output / SIZES).is_dir() or "--scale" in last_command(output).split():
        return "scale"
    if (output / RUNS).is_dir():
        return "sweep"
    if (output / TREND_FIGURE).is_file():
        return "trend"
    return None


def check_owner(output: Path, kind: str) -> None:
    """An output belongs to the kind of command that made it: another kind (a plain sweep or its --report
    over a --scale sweep, a trend over a sweep) would replace its report with its own. Refused in one
    sentence naming the folder's owner, the last command that held its lock."""
    found = output_kind(output)
    if found is None or found == kind:
        return
    command = last_command(output)
    owner = f" (`{command[:200]}`)" if command else ""
    again = {
        "scale": "give its --scale to resume or report it",
        "sweep": "leave out --scale to resume or report it",
        "trend": "a trend writes a folder of its own",
    }[found]
    raise ConfigError(
        f"--output {str(output)!r} holds {KINDS[found]}{owner}, and this command is {KINDS[kind]}, which "
        f"would replace its report; {again}, or choose another --output."
    )


def remove_if_only_locked(output: Path) -> None:
    """After a command made `output` and was refused before writing anything there (a --primary that
    names no arm is found only once the sweep is planned): take away the folder it made, which holds
    nothing but the lock file. Anything else in it, from whoever wrote it, stays."""
    try:
        if set(os.listdir(output)) <= {LOCK, LOCK + ".held"}:  # .held: its lock where flock is refused
            for name in (LOCK, LOCK + ".held"):
                (Path(output) / name).unlink(missing_ok=True)
            Path(output).rmdir()
    except OSError:
        pass  # another command's files appeared meanwhile: they stay, and so does the folder


class OutputLock:
    """The exclusive lock of one compare command on its output, for as long as it works there
    (file_locks.FileLock); its file stays, naming the last command that held it."""

    def __init__(self, output: Path, command: str) -> None:
        self.path = Path(output) / LOCK
        self._lock = FileLock(self.path, detail=command[:300], remove=False)

    def acquire(self, wait: bool = False) -> OutputLock:
        holder = self._lock.acquire()
        if holder is None:
            return self
        if not wait:
            raise ConfigError(
                f"--output {str(self.path.parent)!r} is in use by {holder}; wait for it to end, "
                "or pass --wait-for-lock to start when it does."
            )
        print(
            f"compare: {self.path.parent} is in use by {holder}; waiting for it to end (--wait-for-lock).",
            file=sys.stderr,
            flush=True,
        )
        try:
            self._lock.acquire(wait=True)
        except KeyboardInterrupt:
            print(f"\ncompare: interrupted while waiting for {holder}; nothing was run or written.", file=sys.stderr, flush=True)
            sys.exit(130)
        return self

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> OutputLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()
