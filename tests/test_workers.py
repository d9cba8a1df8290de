"""Workers are stopped, with a reason, before they take the machine down or spin forever:
over their memory, stalled on a known dead end, past their time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from conftest import ROOT
from processes import wait_until_gone

from ptodsl.runtime import memory, workers
from ptodsl.runtime.files import cache_dir
from ptodsl.runtime.workers import Stall, WorkerOverMemory, WorkerStalled, WorkerTimeout, run_worker

# A worker module of our own: it does what its request file says.
FAKE_WORKER = """import json, os, signal, sys, time
from pathlib import Path
from ptodsl.runtime import memory, workers
work = Path(sys.argv[1])
request = (work / "request.txt").read_text()
if request == "describe":
    seen = {
        "name": __name__,
        "argv": sys.argv[1:],
        "cwd": os.getcwd(),
        "path0": sys.path[0],
        "own_session": os.getsid(0) == os.getpid(),
        "marker": os.environ.get("PTODSL_TEST_MARKER"),
        "stdin": sys.stdin.read(),
    }
    (work / "seen.json").write_text(json.dumps(seen))
    print("out to the log", flush=True)
    print("errors to the log", file=sys.stderr, flush=True)
    sys.exit(7)
elif request == "crash":
    os.kill(os.getpid(), signal.SIGSEGV)
elif request == "orphan":
    workers.exit_with_parent()
    time.sleep(60)
elif request == "hog":
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
elif request == "ask and die":  # asks its zygote for a worker, then is killed
    import threading
    inner = work / "inner"
    inner.mkdir()
    (inner / "request.txt").write_text("sleep")
    run = dict(timeout=60, env=dict(os.environ))
    args = ("fake_worker", inner)
    threading.Thread(target=workers.run_worker, args=args, kwargs=run, daemon=True).start()
    while not workers._RUNNING:
        time.sleep(0.05)
    (asked,) = workers._RUNNING
    import psutil
    parent = psutil.Process(asked.pid).ppid()
    (work / "pids.txt").write_text(f"{os.getppid()} {asked.pid} {parent}")
    os.kill(os.getpid(), signal.SIGKILL)
elif request.startswith("fork"):  # leaves a child, and a grandchild in a session of its own
    pids = work / "pids.txt"
    if os.fork() == 0:
        with open(pids, "a") as f:
            f.write(f"{os.getpid()}\\n")
        time.sleep(120)
        os._exit(0)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(pids, "a") as f:
                f.write(f"{os.getpid()}\\n")
            time.sleep(120)
            os._exit(0)
        os._exit(0)
    while len(pids.read_text().split()) < 2 if pids.exists() else True:
        time.sleep(0.05)
    if request == "fork and sleep":
        time.sleep(60)
    elif request == "fork and _exit":
        os._exit(0)
elif request.startswith("finish"):  # what a normal exit completes, for exit_fast
    import atexit, ctypes, threading
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    stream = libc.fopen(str(work / "c_stream.txt").encode(), b"w")
    libc.fputs(b"written through C's buffer", ctypes.c_void_p(stream))  # never closed
    atexit.register(lambda: (work / "atexit.txt").write_text("ran"))
    late = lambda: (time.sleep(0.5), (work / "thread.txt").write_text("done"))
    threading.Thread(target=late).start()
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(2)  # its idle threads wait for a shutdown no one calls
    pool.submit(print, "pooled")
    print("unflushed", end="")
    if request == "finish with a message":
        sys.exit("the message")
    sys.exit(5)
print("done", flush=True)
"""


@pytest.fixture
def fake_env(tmp_path):
    """An environment in which `fake_worker` is a module."""
    package = tmp_path / "package"
    package.mkdir()
    (package / "fake_worker.py").write_text(FAKE_WORKER, encoding="utf-8")
    return dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(package), *sys.path]),
        PTODSL_TEST_MARKER="given",
    )


@pytest.fixture
def fake(tmp_path, fake_env):
    def run(request: str, **limits) -> int:
        work = tmp_path / request
        work.mkdir()
        (work / "request.txt").write_text(request, encoding="utf-8")
        started = time.monotonic()
        try:
            return run_worker("fake_worker", work, env=fake_env, **limits)
        finally:
            assert time.monotonic() - started < 30, "the worker was not stopped in time"

    return run


def test_a_forked_worker_starts_as_python_m_would(fake, tmp_path):
    """The zygote's fork has the module as __main__, its arguments, directory, environment,
    session, closed stdin and log that `python -m MODULE WORK_DIR` in a new session would."""
    assert fake("describe", timeout=30) == 7
    work = tmp_path / "describe"
    seen = json.loads((work / "seen.json").read_text())
    assert seen == {
        "name": "__main__",
        "argv": [str(work)],
        "cwd": str(work),
        "path0": str(work),
        "own_session": True,
        "marker": "given",
        "stdin": "",
    }
    assert workers.log_lines(work) == ["out to the log", "errors to the log"]


def test_a_crashed_worker_reports_its_signal(fake):
    assert fake("crash", timeout=30) == -signal.SIGSEGV


def test_a_lost_zygote_is_reported_and_the_next_worker_gets_a_new_one(fake, tmp_path):
    result: list = []

    def run_orphan() -> None:
        try:
            result.append(fake("orphan", timeout=30))
        except workers.ZygoteLost as lost:
            result.append(lost)

    runner = threading.Thread(target=run_orphan)
    runner.start()
    while not (tmp_path / "orphan" / workers.LOG_FILE).exists() or not workers._RUNNING:
        time.sleep(0.05)
    (orphan,) = workers._RUNNING
    zygote = workers._zygote()
    os.kill(zygote._process.pid, signal.SIGKILL)
    runner.join(timeout=20)
    assert len(result) == 1 and isinstance(result[0], workers.ZygoteLost)
    assert "the process that forks workers crashed with SIGKILL" in str(result[0])
    wait_until_gone(orphan.pid)  # its parent gone, it ends itself
    assert fake("quick", timeout=30) == 0
    assert workers._zygote() is not zygote


def test_the_zygote_and_its_workers_end_with_the_process_they_serve(tmp_path, fake_env):
    """Killed with SIGKILL, the process leaves no zygote and no worker behind."""
    package = tmp_path / "package"  # fake_env's
    work = tmp_path / "orphan"
    work.mkdir()
    (work / "request.txt").write_text("sleep", encoding="utf-8")
    pids = tmp_path / "pids.txt"
    served = textwrap.dedent(
        f"""
        import os, sys, threading, time
        from pathlib import Path
        from ptodsl.runtime import workers
        path = os.pathsep.join([{str(package)!r}, *sys.path])
        env = dict(os.environ, PYTHONPATH=path)
        run = dict(timeout=60, env=env)
        args = ("fake_worker", Path({str(work)!r}))
        threading.Thread(target=workers.run_worker, args=args, kwargs=run, daemon=True).start()
        while not workers._RUNNING:
            time.sleep(0.05)
        (worker,) = workers._RUNNING
        Path({str(pids)!r}).write_text(f"{{workers._zygote()._process.pid}} {{worker.pid}}")
        os.kill(os.getpid(), 9)
        """
    )
    subprocess.run([sys.executable, "-c", served], timeout=60)
    for pid in map(int, pids.read_text().split()):
        wait_until_gone(pid)


@pytest.mark.parametrize(("request_", "status"), [("finish", 5), ("finish with a message", 1)])
def test_a_worker_ending_fast_completes_what_a_normal_exit_would(fake, tmp_path, request_, status):
    """`exit_fast` (problem and simulation workers) skips only the interpreter's teardown:
    the exit status, a `sys.exit` message, a running thread, an idle thread pool (once a
    hang), `atexit` handlers, Python's and C's buffered streams all end as with a normal
    exit."""
    assert fake(request_, timeout=30, exit_fast=True) == status
    work = tmp_path / request_
    assert (work / "thread.txt").read_text() == "done"
    assert (work / "atexit.txt").read_text() == "ran"
    assert (work / "c_stream.txt").read_text() == "written through C's buffer"
    log = (work / workers.LOG_FILE).read_text()
    assert "unflushed" in log
    assert ("the message" in log) == (status == 1)


@pytest.mark.parametrize("request_", ["fork and exit", "fork and _exit", "fork and sleep"])
def test_nothing_a_worker_started_outlives_it(fake, tmp_path, request_):
    """A child, and a grandchild that left the worker's session with setsid, end with the
    worker: when it exits (its exit ends them), when it skips its exit handlers with
    os._exit (the zygote, their subreaper, ends them), and when it is killed on its
    timeout (the kill follows the process tree)."""
    limits = {"timeout": 3} if request_ == "fork and sleep" else {"timeout": 60}
    try:
        fake(request_, **limits)
    except WorkerTimeout:
        assert request_ == "fork and sleep"
    pids = [int(pid) for pid in (tmp_path / request_ / "pids.txt").read_text().split()]
    assert len(pids) == 2
    for pid in pids:
        wait_until_gone(pid)


def test_a_workers_own_workers_are_forked_by_its_zygote_and_end_with_it(fake, tmp_path):
    """A worker that runs workers (a check's launches) asks the zygote that forked it: they
    are siblings, not a zygote and workers of its own (two levels deeper). Killed, the
    worker closes its channel, and the zygote ends what it asked for."""
    assert fake("ask and die", timeout=60) == -signal.SIGKILL
    pids = (tmp_path / "ask and die" / "pids.txt").read_text().split()
    zygote, asked, asked_parent = map(int, pids)
    assert asked_parent == zygote
    wait_until_gone(asked)


def test_every_thread_waiting_for_a_worker_hears_its_end(fake_env, tmp_path):
    """A launch's thread waits for its worker while `stop_all_workers` (a failed launch
    beside it) kills it and waits too: each hears the status. Taken from a shared table,
    the status reached one of them and the others waited forever (a hung check)."""
    work = tmp_path / "waited"
    work.mkdir()
    (work / "request.txt").write_text("sleep", encoding="utf-8")
    worker = workers._zygote().fork("fake_worker", [str(work)], work, fake_env, work / "log")
    statuses = []
    waiters = [threading.Thread(target=lambda: statuses.append(worker.wait())) for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    workers.kill_tree(worker.pid)
    for waiter in waiters:
        waiter.join(timeout=20)
    assert statuses == [-signal.SIGKILL] * 3


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


def test_the_memory_of_a_process_tree_counts_a_child_in_a_session_of_its_own():
    """A worker's memory cap counted its process group, which a `setsid` child leaves."""
    alone = memory.tree_resident_bytes(os.getpid())
    assert alone > 10 << 20  # this pytest at least
    hog = "b = bytearray(300 << 20); print(flush=True); import time; time.sleep(60)"
    child = subprocess.Popen(
        [sys.executable, "-c", hog], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        child.stdout.readline()  # its 300 MiB are written
        assert memory.tree_resident_bytes(os.getpid()) > alone + (250 << 20)
    finally:
        child.kill()
        child.wait()


def test_a_check_leaves_nothing_in_the_users_home(tmp_path):
    """pypto writes a run record under PYPTO_HOME (default ~/.pypto) when its library loads:
    the zygote that loads it for the workers points it at a folder of its own."""
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), PTODSL_CACHE_DIR=str(cache_dir()))
    env.pop("PYPTO_HOME", None)
    spec = ROOT / "examples" / "kernelbench" / "31_elu.pto"
    done = subprocess.run(
        [sys.executable, "-m", "ptodsl", "check", str(spec)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == []
