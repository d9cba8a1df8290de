"""Workers are stopped, with a reason, before they take the machine down or spin forever:
over their memory, stalled on a known dead end, past their time."""

from __future__ import annotations

import os
import sys
import time

import pytest

from ptodsl import workers
from ptodsl.workers import Stall, WorkerOverMemory, WorkerStalled, WorkerTimeout, run_worker

# A worker module of our own: it does what its request file says.
FAKE_WORKER = """import sys, time
from pathlib import Path
work = Path(sys.argv[1])
request = (work / "request.txt").read_text()
if request == "hog":
    held = bytearray(400 << 20)
    for i in range(0, len(held), 4096):
        held[i] = 1
    time.sleep(60)
elif request == "stall":
    print("working", flush=True)
    print("[ERROR] Slab alloc null", flush=True)
    time.sleep(60)
elif request == "sleep":
    time.sleep(60)
print("done", flush=True)
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    package = tmp_path / "package"
    package.mkdir()
    (package / "fake_worker.py").write_text(FAKE_WORKER, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(package), *sys.path]))

    def run(request: str, **limits) -> int:
        work = tmp_path / request
        work.mkdir()
        (work / "request.txt").write_text(request, encoding="utf-8")
        started = time.monotonic()
        try:
            return run_worker("fake_worker", work, env=env, **limits)
        finally:
            assert time.monotonic() - started < 30, "the worker was not stopped in time"

    return run


def test_a_worker_that_finishes_returns_its_status(fake):
    assert fake("quick", timeout=30, memory_limit=2 << 30, stall=workers.SLAB_STALL) == 0


def test_a_worker_over_its_memory_is_killed_and_says_how_much(fake):
    with pytest.raises(WorkerOverMemory, match=r"used 0\.[3-9] GiB, more than the 0\.2 GiB"):
        fake("hog", timeout=30, memory_limit=200 << 20)


def test_a_worker_stalled_after_a_known_dead_end_is_killed(fake):
    stall = Stall("Slab alloc null", 2.0, "out of slabs")
    with pytest.raises(WorkerStalled, match="out of slabs"):
        fake("stall", timeout=30, stall=stall)


def test_a_worker_past_its_time_is_killed(fake):
    with pytest.raises(WorkerTimeout, match="within 2 s"):
        fake("sleep", timeout=2)


def test_the_memory_of_a_process_group_is_counted():
    assert workers.group_resident_bytes(os.getpgrp()) > 10 << 20  # this pytest at least
