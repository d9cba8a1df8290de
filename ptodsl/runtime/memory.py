"""ptodsl's memory policy, in one place: what the machine can give (`budget`), whether a job
of an estimated size may start (`fits`, and `MemoryGate` for jobs side by side: a command's
checks, a kernel's launches in flight), and what a running worker uses (`tree_resident_bytes`,
against which `ptodsl.runtime.workers` kills it). The estimates themselves are
`ptodsl.ir.sim_memory`'s."""

from __future__ import annotations

import contextlib
import threading

import psutil

GIB = 1 << 30
# What ptodsl leaves the rest of the machine of the memory available.
MARGIN = GIB // 2


def available_bytes() -> float:
    """What this machine has available now (MemAvailable)."""
    return float(psutil.virtual_memory().available)


def budget() -> float:
    """What a job starting now may use: the memory available less a margin for the rest of
    the machine. A worker is killed above it; a check estimated above it is refused (or, in
    coverage, scaled down)."""
    return available_bytes() - MARGIN


def fits(need: float) -> bool:
    """Whether a job estimated at `need` bytes fits in the budget now."""
    return need <= budget()


def tree_resident_bytes(pid: int) -> int:
    """The memory of process `pid` and all its descendants (a `setsid` grandchild included:
    a worker is their subreaper): the sum of their proportional set sizes, so pages shared
    between them, as after a fork, count once (0 for a process that cannot be read)."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for process in tree:
        with contextlib.suppress(psutil.Error):
            total += process.memory_full_info().pss
    return total


class MemoryGate:
    """Admits jobs while their estimates fit in `total` bytes together (the budget when the
    gate was made); a job that does not fit even alone is admitted when nothing else runs."""

    def __init__(self, total: float):
        self.free = total
        self.running = 0
        self.closed = False
        self.condition = threading.Condition()

    def enter(self, need: float) -> None:
        with self.condition:
            self.condition.wait_for(lambda: self.closed or self.running == 0 or need <= self.free)
            if self.closed:
                raise RuntimeError("the run was stopped")
            self.free -= need
            self.running += 1

    def leave(self, need: float) -> None:
        with self.condition:
            self.free += need
            self.running -= 1
            self.condition.notify_all()

    def close(self) -> None:
        """Jobs waiting to enter never do (the run was interrupted)."""
        with self.condition:
            self.closed = True
            self.condition.notify_all()
