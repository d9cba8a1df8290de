"""Scratch folders: every temporary folder ptodsl makes is `ptodsl-KIND-PID-RANDOM` in the
system's temporary folder, PID the process that made it. A process that ends normally
removes its own; one that was SIGKILLed cannot, so the first scratch folder a process makes
sweeps away the folders of processes that no longer exist (only this user's, only ours by
name, never through a link)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil

_NAME = re.compile(r"ptodsl-[a-z]+-(?P<pid>\d+)-[^/]+")
_swept = False
_sweep_lock = threading.Lock()


def scratch_prefix(kind: str) -> str:
    """The prefix of this process's scratch folders of `kind`, for `tempfile`'s makers."""
    sweep_stale()
    return f"ptodsl-{kind}-{os.getpid()}-"


def make_scratch(kind: str) -> Path:
    """A new folder `ptodsl-KIND-PID-RANDOM`; the caller removes it."""
    return Path(tempfile.mkdtemp(prefix=scratch_prefix(kind)))


@contextlib.contextmanager
def scratch(kind: str) -> Iterator[Path]:
    """A scratch folder removed when the block ends."""
    folder = make_scratch(kind)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def sweep_stale() -> list[Path]:
    """Removes the scratch folders whose process is gone, once per process; returns them."""
    global _swept
    with _sweep_lock:
        if _swept:
            return []
        _swept = True
    removed = []
    root = Path(tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            match = _NAME.fullmatch(entry.name)
            if match is None or _alive(int(match["pid"])):
                continue
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
                    shutil.rmtree(entry.path)
                    removed.append(Path(entry.path))
    return removed


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie counts as gone: it will never clean up)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True  # another user's process, say: not ours to judge
