"""Worker processes: user code and pypto run in a child of their own, never in ptodsl's.

A worker runs `python -m MODULE WORK_DIR` in its own session (so that a timeout or an
interruption kills whatever it started too), with stdin closed and everything it prints
in WORK_DIR/worker.log, away from the caller's terminal and its `--json` output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

LOG_FILE = "worker.log"
DEFAULT_TIMEOUT_S = 600.0


class WorkerTimeout(TimeoutError):
    """The worker did not finish in time; it and its children were killed."""


def run_worker(
    module: str, work_dir: Path, *, timeout: float, env: Mapping[str, str] | None = None
) -> int:
    """Runs the worker to completion and returns its exit status (negative: a signal)."""
    command = [sys.executable, "-m", module, str(work_dir)]
    with open(work_dir / LOG_FILE, "wb") as log:
        worker = subprocess.Popen(
            command,
            cwd=work_dir,
            env=dict(os.environ if env is None else env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            return worker.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(worker)
            raise WorkerTimeout(f"did not finish within {timeout:g} s") from None
        except BaseException:
            _kill_group(worker)
            raise


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


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
