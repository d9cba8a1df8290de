"""The zygote: python -m ptodsl._zygote, started by `ptodsl.workers` and fed on its stdin.

A worker's first two seconds go to importing torch and pypto. This process imports them
once and forks a worker per request, which then starts with them loaded: a check's
workers (golden, kernel, each launch) start in milliseconds instead. It never runs a
kernel itself, so every fork starts from the same clean state.

Requests are JSON lines: {"id", "module", "argv", "cwd", "env", "log"}. Replies are lines
"started ID PID" and, when a worker ends, "exited PID STATUS" (negative: a signal). At
the end of its stdin (the parent gone) it kills its workers and exits.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib
import json
import os
import runpy
import selectors
import shutil
import signal
import sys
import threading
from typing import NoReturn

import psutil

from ptodsl.scratch import make_scratch
from ptodsl.workers import (
    PARENT_VARIABLE,
    become_subreaper,
    end_descendants,
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
    "ptodsl.simulator",
    "ptodsl.interpret",
    "ptodsl.problems",
)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    replies = os.dup(1)
    # What the imports print must not reach the reply pipe.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    os.close(devnull)
    from ptodsl.simulator import PYPTO_LOG_ENVIRONMENT

    os.environ.update(PYPTO_LOG_ENVIRONMENT)
    # pypto's library also reads where to write its run records when it loads: here, not
    # the user's ~/.pypto
    home = str(make_scratch("zygote"))
    os.environ["PYPTO_HOME"] = home
    for name in PRELOAD:
        importlib.import_module(name)
    zygote = os.getpid()
    become_subreaper()  # a worker's orphans come here when the worker dies, to be ended
    request = _serve(replies, home)
    _become_worker(request, zygote)  # only a forked worker gets here


def _serve(replies: int, home: str) -> dict:
    """Forks a worker per request until stdin ends (then removes `home`); returns, in the
    worker, its request."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wakeup fd hears it
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    pending = b""
    workers: set[int] = set()
    while True:
        for key, _ in selector.select():
            if key.fd == wake_read:
                os.read(wake_read, 4096)
                _reap(workers, replies)
                continue
            chunk = os.read(0, 1 << 16)
            if not chunk:
                for pid in workers:
                    kill_tree(pid)
                shutil.rmtree(home, ignore_errors=True)
                sys.exit(0)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    signal.set_wakeup_fd(-1)
                    for fd in (0, replies, wake_read, wake_write):
                        os.close(fd)
                    return request
                workers.add(pid)
                os.write(replies, f"started {request['id']} {pid}\n".encode())
        _reap(workers, replies)


def _reap(workers: set[int], replies: int) -> None:
    """Reports the workers that ended; ends the orphans their code left, which came to this
    process (a subreaper) when their worker died without ending them."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        if pid in workers:
            workers.discard(pid)
            os.write(replies, f"exited {pid} {os.waitstatus_to_exitcode(status)}\n".encode())
    for child in psutil.Process().children():
        if child.pid not in workers:
            kill_tree(child.pid)


def _become_worker(request: dict, zygote: int) -> None:
    """In the forked worker: the session, files, directory, environment and arguments that
    `python -m MODULE ARGV...` started by `ptodsl.workers.run_worker` would have, then run
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
