"""Scratch folders are named after the process that made them, and the next run removes
those of processes SIGKILLed before they could (only this user's folders, only ours by
name, never through a link); a Model whose forward forks leaves nothing running after
`check`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from processes import wait_until_gone

import ptodsl
from ptodsl.checking.check import format_report, run_check
from ptodsl.runtime import scratch


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.fixture
def sweep_again(monkeypatch):
    monkeypatch.setattr(scratch, "_swept", False)


def test_the_folders_of_dead_processes_are_swept_and_no_others(sweep_again, tmp_path):
    root = Path(tempfile.gettempdir())
    dead = _dead_pid()
    stale = root / f"ptodsl-check-{dead}-abc123"
    (stale / "inside").mkdir(parents=True)
    (stale / "inside" / "expected.pt").write_bytes(b"x" * 1000)
    live = root / f"ptodsl-sim-{os.getpid()}-def456"
    live.mkdir()
    # a link named like a stale folder: the link goes, never what it points to
    target = tmp_path / "precious"
    target.mkdir()
    (target / "keep.txt").write_text("keep")
    link = root / f"ptodsl-check-{dead}-link"
    link.symlink_to(target)
    other = root / f"not-ptodsl-{dead}-x"
    other.mkdir()
    try:
        made = scratch.make_scratch("check")
        assert made.name.startswith(f"ptodsl-check-{os.getpid()}-")
        assert not stale.exists()
        assert live.is_dir() and other.is_dir() and (target / "keep.txt").is_file()
        made.rmdir()
    finally:
        for path in (live, other):
            path.rmdir()
        link.unlink(missing_ok=True)


def test_a_sigkilled_check_leaves_its_folders_to_the_next_run(tmp_path):
    """A check killed mid-run leaves `ptodsl-*-PID-*` folders; the next command that makes
    a scratch folder removes them."""
    spec = tmp_path / "scale.pto"
    spec.write_text(
        "kernel scale\ndims N = 64\ninput x: f32[N]\noutput y: f32[N]\ny = x * 2.0\n",
        encoding="utf-8",
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "ptodsl", "check", str(spec)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = 60
    while deadline > 0 and not list(tmp_path.glob(f"ptodsl-check-{process.pid}-*")):
        try:
            process.wait(0.1)
            break
        except subprocess.TimeoutExpired:
            deadline -= 0.1
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    left = list(tmp_path.glob(f"ptodsl-*-{process.pid}-*"))
    assert left, "the check was killed before it made a folder"
    subprocess.run(
        [sys.executable, "-m", "ptodsl", "check", str(spec)], env=env, check=True,
        capture_output=True,
    )  # fmt: skip
    assert not any(path.exists() for path in left)


FORKING_PROBLEM = """
import os, time
import torch

PIDS = {pids!r}


def _linger():
    with open(PIDS, "a") as f:
        f.write(f"{{os.getpid()}}\\n")
    time.sleep(120)
    os._exit(0)


class Model(torch.nn.Module):
    def forward(self, x):
        if os.fork() == 0:
            _linger()
        if os.fork() == 0:  # a grandchild in a session of its own
            os.setsid()
            if os.fork() == 0:
                _linger()
            os._exit(0)
        return x * 2.0


def get_inputs():
    return [torch.randn(64)]


def get_init_inputs():
    return []
"""


def test_a_model_that_forks_leaves_nothing_running_after_check(tmp_path):
    pids = tmp_path / "pids.txt"
    problem = tmp_path / "forking.py"
    problem.write_text(textwrap.dedent(FORKING_PROBLEM.format(pids=str(pids))), encoding="utf-8")
    compiled = ptodsl.compile(
        "kernel scale\ndims N = 64\ninput x: f32[N]\noutput y: f32[N]\ny = x * 2.0\n"
    )
    report = run_check(compiled, against=problem)
    assert report.verdict == "PASS", format_report(report)
    started = [int(pid) for pid in pids.read_text().split()]
    assert len(started) >= 2
    for pid in started:
        wait_until_gone(pid)
