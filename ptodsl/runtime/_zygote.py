"""The zygote: python -m ptodsl.runtime._zygote, started by `ptodsl.runtime.workers` and fed
on its stdin.

A worker's first two seconds go to importing torch and pypto. This process imports them
once and forks a worker per request, which then starts with them loaded: a check's
workers (golden, kernel, each launch) start in milliseconds instead. It never runs a
kernel itself, so every fork starts from the same clean state.

Requests are JSON lines: {"id", "module", "argv", "cwd", "env", "log"}. Replies are lines
"started ID PID" and, when a worker ends, "exited PID STATUS" (negative: a signal). At
the end of its stdin (the parent gone) it kills its workers and exits. Each worker gets a
channel of its own (a socket) on which it asks for workers in turn (a kernel's launches):
they are forked here too, so the tree is never deeper than command, zygote, worker; when
a worker's channel ends (the worker did), the workers it asked for are killed.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import json
import os
import runpy
import selectors
import shutil
import signal
import socket
import sys
import threading
from typing import NoReturn

import attrs
import psutil

from ptodsl.runtime.scratch import make_scratch
from ptodsl.runtime.settings import PARENT_VARIABLE
from ptodsl.runtime.workers import (
    become_subreaper,
    end_descendants,
    inherit_zygote,
    kill_tree,
)

# What every worker imports before it does anything (the workers' own modules are run
# fresh, as `python -m` would, so they are not among them). torch._dynamo is what torch
# imports the first time a problem's Model runs on the meta device (1.6 s of every
# problem worker, measured).
PRELOAD = (
    "torch",
    "torch._dynamo",
    "pypto",
    "ptodsl.runtime.simulator",
    "ptodsl.runtime.interpret",
    "ptodsl.checking.problems",
)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    replies = os.dup(1)
    # What the imports print must not reach the reply pipe.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    os.close(devnull)
    from ptodsl.runtime.simulator import PYPTO_LOG_ENVIRONMENT

    os.environ.update(PYPTO_LOG_ENVIRONMENT)
    # pypto's library also reads where to write its run records when it loads: here, not
    # the user's ~/.pypto
    home = str(make_scratch("zygote"))
    os.environ["PYPTO_HOME"] = home
    for name in PRELOAD:
        importlib.import_module(name)
    zygote = os.getpid()
    become_subreaper()  # a worker's orphans come here when the worker dies, to be ended
    request, channel = _serve(replies, home)
    inherit_zygote(channel)  # the workers this worker runs are forked here too
    _become_worker(request, zygote)  # only a forked worker gets here


@attrs.define(eq=False)
class _Channel:
    """Where requests come from and replies go: the parent's pipes, or a socket a worker
    was given at its fork, so that the workers it asks for are forked here too."""

    read_fd: int
    write_fd: int
    pending: bytes = b""
    closed: bool = False  # its fd may since number another channel: nothing goes there


def _serve(replies: int, home: str) -> tuple[dict, int]:
    """Forks a worker per request until stdin ends (then ends every worker and removes
    `home`); returns, in the worker, its request and its own channel's socket."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wakeup fd hears it
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ, _Channel(0, replies))
    selector.register(wake_read, selectors.EVENT_READ)
    owners: dict[int, _Channel] = {}  # a running worker's pid -> the channel that asked
    while True:
        for key, _ in selector.select():
            channel = key.data
            if channel is None:
                os.read(wake_read, 4096)
                _reap(owners)
                continue
            try:
                chunk = os.read(channel.read_fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk and channel.read_fd == 0:  # the parent is gone: so is everything
                for pid in owners:
                    kill_tree(pid)
                shutil.rmtree(home, ignore_errors=True)
                sys.exit(0)
            if not chunk:  # a worker is gone: so are the workers it asked for
                selector.unregister(channel.read_fd)
                os.close(channel.read_fd)
                channel.closed = True
                for pid, owner in owners.items():
                    if owner is channel:
                        kill_tree(pid)
                continue
            channel.pending += chunk
            *lines, channel.pending = channel.pending.split(b"\n")
            for line in lines:
                request = json.loads(line)
                ours, theirs = socket.socketpair()
                pid = os.fork()
                if pid == 0:
                    for registered in list(selector.get_map().values()):
                        if registered.data is not None and registered.fd != 0:
                            os.close(registered.fd)
                    selector.close()
                    signal.set_wakeup_fd(-1)
                    ours.close()
                    for fd in (0, replies, wake_read, wake_write):
                        os.close(fd)
                    return request, theirs.detach()
                theirs.close()
                fd = ours.detach()
                selector.register(fd, selectors.EVENT_READ, _Channel(fd, fd))
                owners[pid] = channel
                _reply(channel, f"started {request['id']} {pid}")
        _reap(owners)


def _reply(channel: _Channel, line: str) -> None:
    if channel.closed:
        return
    with contextlib.suppress(OSError):  # its worker may be ending: nobody reads
        os.write(channel.write_fd, line.encode() + b"\n")


def _reap(owners: dict[int, _Channel]) -> None:
    """Reports the workers that ended to the channels that asked for them; ends the
    orphans their code left, which came to this process (a subreaper) when their worker
    died without ending them."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        channel = owners.pop(pid, None)
        if channel is not None:
            _reply(channel, f"exited {pid} {os.waitstatus_to_exitcode(status)}")
    for child in psutil.Process().children():
        if child.pid not in owners:
            kill_tree(child.pid)


def _become_worker(request: dict, zygote: int) -> None:
    """In the forked worker: the session, files, directory, environment and arguments that
    `python -m MODULE ARGV...` started by `ptodsl.runtime.workers.run_worker` would have, then run
    MODULE as __main__ (its exit is this process's exit)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in any Python process
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    become_subreaper()
    atexit.register(end_descendants)
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    for fd in {stdin, log} - {0, 1, 2}:  # stdin may have opened as 0 itself
        os.close(fd)
    os.chdir(request["cwd"])
    # the zygote, this worker's parent, is the one whose end should end it
    env = {**request["env"], PARENT_VARIABLE: str(zygote)}
    os.environ.clear()
    os.environ.update(env)
    extra_paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.getcwd(), *extra_paths, *(p for p in sys.path[1:] if p not in extra_paths)]
    if "OMP_NUM_THREADS" in env:
        # torch sized its thread pool from the zygote's environment, not this one
        import torch

        torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
    sys.argv = [request["module"], *request["argv"]]
    if not request["exit_fast"]:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        return
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        _exit(stop.code)
    _exit(None)


def _exit(code: object) -> NoReturn:
    """Ends the worker as `sys.exit(code)` would, without the interpreter's teardown of
    torch's and pypto's modules: 0.65 s of a worker's 0.7 s of overhead, measured. What a
    normal exit waits for still runs first: the threads it started, its `atexit` handlers,
    Python's buffered streams, then C's exit (C's streams, through which pypto's library
    writes its verification tables: without their flush they were read back cut short).
    Measured: 0.19 s where a normal exit takes 0.68 s."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # `sys.exit("message")`: the message on stderr, status 1
        print(code, file=sys.stderr)
        status = 1
    # What Py_Finalize runs first, without the teardown after it: threading's shutdown (it
    # stops idle thread pools, then joins every non-daemon thread), then atexit's handlers
    threading._shutdown()  # noqa: SLF001
    atexit._run_exitfuncs()  # noqa: SLF001
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    # C's exit, not fflush(NULL) and os._exit: it flushes C's streams without taking their
    # locks, as every exit does, and runs the libraries' destructors (with fflush(NULL), one
    # simulation of CI's thousands ran past its 600 s limit; the cause is not pinned down).
    # PyDLL keeps the GIL, so no Python thread runs meanwhile.
    ctypes.PyDLL(None).exit(status)
    os._exit(status)  # not reached


if __name__ == "__main__":
    main()
