"""A command's `--help` text kept on disk, so that asking again takes a fraction of a second.

`lit-attention fit --help` lists every model's and data module's options, which LightningCLI can
only do after importing Lightning and inspecting every class: about 8 s on a small machine. The text
depends only on the code, the installed libraries and the terminal's width, so it is kept under a key
made of those (every source file's size and modification time, the libraries' versions, the width,
the program's name)
and printed from there until one of them changes. Only a bare `<command> --help` is kept: with a
recipe or other options the text shows their values and is made afresh.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from importlib import metadata
from pathlib import Path

from lit_attention.atomic_files import replace_file

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("lit_attention", "datamodules")
LIBRARIES = ("lightning", "jsonargparse", "torch", "torchvision", "datasets", "docstring-parser")


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lit-attention" / "help"


def key(command: str, roots: tuple[Path, ...] = tuple(ROOT / s for s in SOURCES)) -> str:
    """What the help text of `command` depends on, hashed."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""  # the usage line names it
    digest = hashlib.sha256(f"{command}\0{program}\0{shutil.get_terminal_size().columns}\0{sys.version}\0".encode())
    for name in LIBRARIES:
        try:
            digest.update(f"{name}={metadata.version(name)}\0".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{name} missing\0".encode())
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            stat = path.stat()
            digest.update(f"{path.relative_to(root.parent)} {stat.st_size} {stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:32]


def read(command: str) -> str | None:
    try:
        return (cache_dir() / f"{command}-{key(command)}.txt").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def write(command: str, text: str) -> None:
    """Keep `text` for `command` (quietly nothing where the cache cannot be written), replacing the
    texts of older keys."""
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob(f"{command}-*.txt"):
            old.unlink(missing_ok=True)
        replace_file(folder / f"{command}-{key(command)}.txt", lambda file: file.write(text.encode("utf-8")))
    except OSError:
        pass
