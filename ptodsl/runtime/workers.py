"""Worker processes: user code and pypto run in a child of their own, never in ptodsl's.

A worker runs as `python -m MODULE WORK_DIR` would, in its own session (so that a timeout
or an interruption kills whatever it started too), with stdin closed and everything it
prints in WORK_DIR/worker.log, away from the caller's terminal and its `--json` output.
It is forked by this process's zygote (`ptodsl.runtime._zygote`), which has imported torch and
pypto once for all of them.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs
import psutil

from ptodsl.runtime import memory, settings
from ptodsl.runtime.memory import GIB

LOG_FILE = "worker.log"


class WorkerStopped(RuntimeError):
    """The worker was killed, with its children, before it finished: the message says why."""


class WorkerTimeout(WorkerStopped, TimeoutError):
    """The worker did not finish in time."""


class WorkerOverMemory(WorkerStopped):
    """The worker's processes together used more memory than they were given."""


class WorkerStalled(WorkerStopped):
    """The worker's log ended in a known dead end and stopped growing."""


@attrs.frozen
class Stall:
    """A line ending the log (`marker` in it) after which a worker makes no progress: pypto's
    simulated machine out of workspace slabs prints "Slab alloc null" and then spins."""

    marker: str
    seconds: float
    meaning: str


SLAB_STALL = Stall(
    "Slab alloc null",
    90.0,
    'pypto\'s simulated machine ran out of workspace slabs ("Slab alloc null") and made no '
    "progress",
)
POLL_S = 1.0
EXIT_ORPHANED = 70  # a worker whose parent died (EX_SOFTWARE): nobody reads its status


def run_worker(
    module: str,
    work_dir: Path,
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    memory_limit: float | None = None,
    stall: Stall | None = None,
    on_poll: Callable[[], None] | None = None,
    exit_fast: bool = False,
) -> int:
    """Runs the worker to completion and returns its exit status (negative: a signal).
    Kills it and raises `WorkerStopped` when it runs past `timeout` seconds, when its
    processes together hold more than `memory_limit` bytes (before the machine runs out
    for everyone), or when its log stalls on `stall`. `on_poll` is called every POLL_S
    seconds while it runs (progress reports). `exit_fast`: the worker ends without the
    interpreter's teardown (`ptodsl.runtime._zygote`), for a worker whose files are written when its
    module ends and its C streams are flushed (not one whose libraries write as they
    unload)."""
    started = time.monotonic()
    log = work_dir / LOG_FILE
    log.write_bytes(b"")
    environment = settings.worker_environment(os.environ) if env is None else env
    worker = _zygote().fork(module, [str(work_dir)], work_dir, environment, log, exit_fast)
    with _RUNNING_LOCK:
        _RUNNING.add(worker)
    try:
        while True:
            with contextlib.suppress(subprocess.TimeoutExpired):
                return worker.wait(timeout=POLL_S)
            if on_poll is not None:
                on_poll()
            stopped = _reason_to_stop(worker, work_dir, started, timeout, memory_limit, stall)
            if stopped is not None:
                _kill_group(worker)
                raise stopped
    except BaseException:
        _kill_group(worker)
        raise
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(worker)


class ZygoteLost(WorkerStopped):
    """The zygote that forked the worker died, taking the worker's exit status with it."""


@attrs.define(eq=False)
class Forked:
    """A worker the zygote forked: waited for like a `subprocess.Popen`, by any number of
    threads at once (a launch's own thread, and `stop_all_workers` ending it)."""

    zygote: Zygote
    pid: int
    returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; raises subprocess.TimeoutExpired after `timeout` seconds."""
        return self.zygote.exit_status(self, timeout)


class Zygote:
    """A `ptodsl.runtime._zygote` process, as the channel this process asks it on and the thread
    that reads its replies: the zygote this process started, or, in a worker, the one that
    forked it (the channel it was given: its workers are then the zygote's children too)."""

    def __init__(self, channel: int | None = None) -> None:
        self._errors = tempfile.TemporaryFile()  # what it prints if it cannot start
        if channel is None:
            self._process: subprocess.Popen | None = subprocess.Popen(
                [sys.executable, "-m", "ptodsl.runtime._zygote"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._errors,
                start_new_session=True,  # a terminal's Ctrl-C is for this process to handle
            )
            self._requests_to, self._replies_from = self._process.stdin, self._process.stdout
        else:
            self._process = None
            shared = socket.socket(fileno=channel)
            self._requests_to, self._replies_from = shared.makefile("wb"), shared.makefile("rb")
            shared.close()  # the files keep the socket open
        self._changed = threading.Condition()
        self._started: dict[int, Forked] = {}  # request id -> its worker, until fork takes it
        # A worker until its exit is heard (its status is then set on it, where every thread
        # that waits for it sees it: a status taken from a shared table would reach one).
        self._running: dict[int, Forked] = {}
        self._requests = 0
        self._alive = True
        threading.Thread(target=self._read_replies, name="ptodsl-zygote", daemon=True).start()

    @property
    def alive(self) -> bool:
        return self._alive

    def close(self) -> None:
        """Ends the zygote as this process's end would, its stdin closed, and waits for it:
        it kills its workers and removes its folder before it exits, so that nothing of it
        outlives this process (a check stopped by SIGTERM left its folder, the zygote still
        removing it). A worker's inherited zygote stays: the worker's end closes its
        channel, and the zygote kills the workers asked for on it."""
        if self._process is None:
            return
        with contextlib.suppress(OSError):
            self._requests_to.close()
        try:
            self._process.wait(ZYGOTE_EXIT_S)
        except subprocess.TimeoutExpired:
            kill_tree(self._process.pid)  # its workers and their orphans too

    def fork(
        self,
        module: str,
        argv: list[str],
        cwd: Path,
        env: Mapping[str, str],
        log: Path,
        exit_fast: bool = False,
    ) -> Forked:
        with self._changed:
            request_id = self._requests
            self._requests += 1
            request = {
                "id": request_id,
                "module": module,
                "argv": argv,
                "cwd": str(cwd),
                "env": dict(env),
                "log": str(log),
                "exit_fast": exit_fast,
            }
            try:
                self._requests_to.write(json.dumps(request).encode() + b"\n")
                self._requests_to.flush()
            except OSError:
                pass  # it died: the wait below says so
            while request_id not in self._started:
                self._raise_if_dead("before it could start a worker")
                self._changed.wait()
            return self._started.pop(request_id)

    def exit_status(self, worker: Forked, timeout: float | None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while worker.returncode is None:
                self._raise_if_dead("while its worker ran")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise subprocess.TimeoutExpired("ptodsl worker", timeout)
                self._changed.wait(remaining)
            return worker.returncode

    def _raise_if_dead(self, when: str) -> None:
        if self._alive:
            return
        if self._process is None:
            raise ZygoteLost(f"lost: the process that forks workers went away {when}")
        self._errors.seek(0)
        lines = self._errors.read().decode(errors="replace").strip().splitlines()
        tail = "".join(f"\n  {line}" for line in lines[-_ERROR_TAIL_LINES:])
        status = describe_exit(self._process.wait())
        raise ZygoteLost(f"lost: the process that forks workers {status} {when}{tail}")

    def _read_replies(self) -> None:
        """Hears "started ID PID" before "exited PID STATUS" of the same worker (the zygote
        answers a request before it reaps the worker). A reply it cannot read, like the end
        of the replies, is the zygote lost: every waiter hears it."""
        try:
            for line in self._replies_from:
                kind, key, value = line.decode().split()
                with self._changed:
                    if kind == "started":
                        worker = Forked(self, int(value))
                        self._started[int(key)] = self._running[worker.pid] = worker
                    else:
                        self._running.pop(int(key)).returncode = int(value)
                    self._changed.notify_all()
        finally:
            with self._changed:
                self._alive = False
                self._changed.notify_all()


_ERROR_TAIL_LINES = 20
_ZYGOTE: Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()


_INHERITED: tuple[int, int] | None = None  # (channel, pid): the zygote that forked us


def inherit_zygote(channel: int) -> None:
    """In a worker the zygote forked: the workers it runs are asked of that zygote, on
    `channel`, rather than of a zygote of its own (one level of processes fewer)."""
    global _INHERITED
    _INHERITED = (channel, os.getpid())


def _zygote() -> Zygote:
    """This process's zygote: the one that forked it, if a zygote did, else its own,
    started on first use and again if it died."""
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        if _ZYGOTE is None or not _ZYGOTE.alive:
            inherited = _INHERITED is not None and _INHERITED[1] == os.getpid()
            if inherited and _ZYGOTE is not None:
                raise ZygoteLost("lost: the process that forks workers went away")
            _ZYGOTE = Zygote(_INHERITED[0] if inherited else None)
        return _ZYGOTE


def _forget_zygote() -> None:
    """In a forked copy of this process: neither this process's zygote nor the channel it
    inherited are its own (two processes asking on one channel would mix their replies)."""
    global _ZYGOTE, _INHERITED
    _ZYGOTE = None
    _INHERITED = None


def _close_zygote() -> None:
    if _ZYGOTE is not None:
        _ZYGOTE.close()


# A forked copy of this process (a fanout or test runner's child) starts its own.
os.register_at_fork(after_in_child=_forget_zygote)
atexit.register(_close_zygote)
# How long this process's exit waits for its zygote to end its workers and remove its folder.
ZYGOTE_EXIT_S = 10.0


def exit_with_parent() -> None:
    """In a worker: end this process when the one that started it dies (a Dask worker killed
    mid-job, the command killed with SIGKILL), instead of simulating on for nobody. Polled:
    PR_SET_PDEATHSIG would follow the starting thread, not the process. The parent is the
    zygote that forked it (PARENT_VARIABLE), which ends when the process it serves ends:
    one that died before this started is seen too."""
    parent = settings.current().worker_parent or os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(POLL_S)
        os._exit(EXIT_ORPHANED)

    threading.Thread(target=watch, name="ptodsl-exit-with-parent", daemon=True).start()


# The workers running now, in every thread: `stop_all_workers` ends them when a command that
# runs jobs side by side is interrupted (each worker leads a process group of its own, which a
# terminal's Ctrl-C does not reach).
_RUNNING: set[Forked] = set()
_RUNNING_LOCK = threading.Lock()


def stop_all_workers() -> None:
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for worker in running:
        _kill_group(worker)


def _reason_to_stop(
    worker: Forked,
    work_dir: Path,
    started: float,
    timeout: float,
    memory_limit: float | None,
    stall: Stall | None,
) -> WorkerStopped | None:
    if time.monotonic() - started > timeout:
        return WorkerTimeout(f"did not finish within {timeout:g} s")
    if memory_limit is not None:
        used = memory.tree_resident_bytes(worker.pid)
        if used > memory_limit:
            return WorkerOverMemory(
                f"used {used / GIB:.1f} GiB, more than the {memory_limit / GIB:.1f} GiB it was "
                "given (what this machine had available when it started)"
            )
    if stall is not None:
        log = work_dir / LOG_FILE
        idle = time.time() - log.stat().st_mtime
        if idle > stall.seconds and stall.marker in _last_line(log):
            return WorkerStalled(f"stopped: {stall.meaning} for {idle:.0f} s")
    return None


def _last_line(log: Path) -> str:
    """The last line of the log (its last 4 KB read)."""
    with open(log, "rb") as file:
        file.seek(0, os.SEEK_END)
        file.seek(max(0, file.tell() - 4096))
        lines = file.read().decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else ""


def _kill_group(worker: Forked) -> None:
    if worker.returncode is None:
        kill_tree(worker.pid)
    with contextlib.suppress(ZygoteLost):
        worker.wait()


PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def become_subreaper() -> None:
    """The orphans of this process's descendants become its children rather than init's,
    so that a grandchild that double-forked and left the session (`setsid`) is still in
    this process's tree, where `kill_tree` and `end_descendants` find it. Linux; the
    setting is not inherited across fork, so the zygote and each worker set it."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def kill_tree(pid: int) -> None:
    """Kills process `pid`, its session, and every descendant, including those that left
    the session: nothing a job started outlives it."""
    try:
        _kill(psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        pass  # it is gone, and its orphans went to the subreaper above it
    kill_session(pid)


def end_descendants() -> None:
    """In a worker as it exits: the processes its code started and left running end with it
    (a Model whose forward forks)."""
    _kill(psutil.Process().children(recursive=True))


def _kill(processes: list[psutil.Process]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.kill()


def kill_session(pid: int) -> None:
    """Kills worker `pid` and its session's processes: the worker itself too, since one just
    forked may not have made its session yet."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError):
            kill(pid, signal.SIGKILL)


def log_lines(work_dir: Path, noise: tuple[str, ...] = ()) -> list[str]:
    """The worker's log, blank lines and lines containing any of `noise` left out."""
    log = work_dir / LOG_FILE
    text = log.read_text(errors="replace") if log.exists() else ""
    return [
        line.rstrip()
        for line in text.splitlines()
        if line.strip() and not any(marker in line for marker in noise)
    ]


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        return f"crashed with {signal.Signals(-returncode).name}"
    return f"exited with status {returncode}"
