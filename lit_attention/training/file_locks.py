"""`FileLock`, the one exclusive lock: a run directory's (run_dirs.RunLock) and a compare output's
(sweep/output_dir.OutputLock), which say in their own words who holds it.

The lock is `flock` on a lock file: the kernel lets go of it when its holder dies, so a killed process
never leaves a lock behind. Some shared file systems refuse `flock` (Lustre mounted `noflock` answers
ENOSYS, some NFS mounts ENOLCK). There the lock is a file beside the lock file (`<lock file>.held`),
created exclusively (O_EXCL) with its holder's process and host in it: a file whose holder was a process of this host that has
ended is stale and is taken over; one from another host names that host, so a user can remove it once
that job is gone. One line says so when it happens.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows has no flock: every lock is then the `.held` file
    fcntl = None

# What flock answers on a file system that does not support it.
NO_FLOCK = {errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP}


def try_flock(file, wait: bool = False) -> bool | None:
    """Lock `file` exclusively: True when locked, False when another process holds it (never with `wait`),
    None when its file system (or its platform) does not support flock."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(file, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False
    except OSError as error:
        if error.errno in NO_FLOCK:
            return None
        raise


def holder_line(detail: str = "") -> str:
    """Who holds a lock: `process <pid> (<detail>) on <host>`."""
    return f"process {os.getpid()}{f' ({detail})' if detail else ''} on {socket.gethostname()}"


def held_path(lock_file: Path) -> Path:
    return lock_file.with_name(lock_file.name + ".held")


def create_exclusively(lock_file: Path, holder: str) -> str | None:
    """The lock without flock: create `<lock_file>.held` holding `holder`'s line. None when this process now
    holds it, else the line of the process that does. A file left by an ended process of this host is
    taken over. `release_held` lets go."""
    path = held_path(lock_file)
    for _ in range(2):
        try:
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            written = path.read_text(errors="replace").strip() if path.is_file() else ""
            if not _ended_here(written) or not _took_away(path, written):
                return written or "another process"
            continue
        with os.fdopen(descriptor, "w") as file:
            file.write(holder + "\n")
        print(
            f"note: {path.parent} is on a file system without flock, so it is locked by the file {path.name}, "
            "which a killed process leaves behind (it is taken over on this host; from another host, remove it "
            "once that process is gone).",
            file=sys.stderr,
            flush=True,
        )
        return None
    return "another process"


def _took_away(path: Path, stale: str) -> bool:
    """Remove the stale held file `path` (naming `stale`), unless another process took it over first: the
    takeover is itself guarded by a file created exclusively, and the file is read again under it, so two
    processes that found the same stale file cannot both remove it (the second would remove the first's
    new lock). False when another takeover is under way or has happened."""
    guard = path.with_name(path.name + ".takeover")
    try:
        os.close(os.open(guard, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    try:
        now = path.read_text(errors="replace").strip() if path.is_file() else None
        if now != stale:
            return False
        path.unlink(missing_ok=True)
        return True
    finally:
        guard.unlink(missing_ok=True)


def _ended_here(line: str) -> bool:
    """Whether a holder line names a process of this host that no longer runs."""
    words = line.split()
    if len(words) < 4 or words[0] != "process" or not words[1].isdigit() or words[-1] != socket.gethostname():
        return False
    try:
        os.kill(int(words[1]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def release_held(lock_file: Path) -> None:
    held_path(lock_file).unlink(missing_ok=True)


class FileLock:
    """An exclusive lock on `path` for as long as this process holds it (the module's doc says how). Its
    file names the holder: `holder_line(detail)`. `remove`: the file goes when the lock is let go (a run's
    `.lock`); otherwise it stays (a compare output's lock file marks the folder as compare's)."""

    def __init__(self, path: Path, detail: str = "", remove: bool = True) -> None:
        self.path, self.detail, self.remove = Path(path), detail, remove
        self._file = None
        self._held = False  # locked by a file created exclusively (no flock on this file system)

    def acquire(self, wait: bool = False) -> str | None:
        """Take the lock: None once this process holds it, else the line of the process that does (never
        with `wait`, which waits for it; KeyboardInterrupt stops the wait)."""
        while True:
            file = open(self.path, "a+")
            locked = try_flock(file)
            if locked is None:  # a file system without flock
                file.close()
                return self._acquire_held(wait)
            if not locked:
                file.seek(0)
                holder = file.read().strip() or "another process"
                if not wait:
                    file.close()
                    return holder
                try:
                    try_flock(file, wait=True)
                except BaseException:
                    file.close()
                    raise
            # A holder that removes the file as it ends leaves a lock on the removed file (opened before
            # that), which locks nothing another process can see: take the lock on the file there now.
            try:
                if os.fstat(file.fileno()).st_ino == os.stat(self.path).st_ino:
                    break
            except FileNotFoundError:
                pass
            file.close()
        file.seek(0)
        file.truncate()
        file.write(holder_line(self.detail) + "\n")
        file.flush()
        self._file = file
        return None

    def _acquire_held(self, wait: bool) -> str | None:
        while True:
            holder = create_exclusively(self.path, holder_line(self.detail))
            if holder is None:
                self._held = True
                self.path.write_text(holder_line(self.detail) + "\n")  # the lock file names its holder, as with flock
            if holder is None or not wait:
                return holder
            time.sleep(1.0)  # no flock to wait on: look again

    def release(self) -> None:
        """Let go. A file to remove is removed while still held, so no other process holds it meanwhile; a
        killed process leaves a stale file that locks nothing."""
        if self._held:
            release_held(self.path)
            self._held = False
            if self.remove:
                self.path.unlink(missing_ok=True)  # the empty file `open` made before flock was refused
        if self._file is not None:
            if self.remove:
                self.path.unlink(missing_ok=True)
            self._file.close()  # closing the file lets go of the flock
            self._file = None
