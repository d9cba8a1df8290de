"""Files ptodsl reads on a user's behalf are read as regular files with a bound: a FIFO, a
device or a file of gigabytes among the problems or specs is that row's error (or the
command's one-line error), never a hang, a MemoryError or an internal error."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys

import pytest
from conftest import ROOT

from ptodsl.checking.coverage import run_coverage
from ptodsl.checking.problems import ProblemError, run_problem

RELU_SPEC = ROOT / "examples" / "kernelbench" / "19_relu.pto"
ELU_SPEC = ROOT / "examples" / "kernelbench" / "31_elu.pto"


def sparse(path, size=64 << 20):
    """A file of `size` zero bytes that takes no room on disk."""
    with path.open("wb") as stream:
        stream.truncate(size)
    return path


def test_coverage_says_which_problem_or_spec_it_cannot_read(tmp_path):
    """A FIFO problem file hung coverage past its --timeout; a problem of gigabytes (a
    device with /dev/zero's reads) died with MemoryError, exit 3."""
    problems, specs = tmp_path / "problems", tmp_path / "specs"
    problems.mkdir()
    specs.mkdir()
    os.mkfifo(problems / "19_relu.py")
    shutil.copy(RELU_SPEC, specs)
    sparse(problems / "31_elu.py")
    shutil.copy(ELU_SPEC, specs)
    (problems / "20_leaky_relu.py").write_text("x = 1\n")
    (specs / "20_leaky_relu.pto").write_bytes(b"kernel k\n\xff\n")
    # a device node of our own with /dev/zero's numbers (never a real device path): its
    # reads never end
    os.mknod(problems / "22_tanh.py", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    shutil.copy(ROOT / "examples" / "kernelbench" / "22_tanh.pto", specs)
    rows = run_coverage(problems, specs, timeout=30)
    verdicts = {row.number: row.verdict for row in rows}
    assert verdicts[19] == f"UNREADABLE: {problems / '19_relu.py'} is a FIFO, not a regular file"
    assert verdicts[31] == f"UNREADABLE: {problems / '31_elu.py'} is larger than 1024 KiB"
    assert verdicts[20] == f"UNREADABLE: {specs / '20_leaky_relu.pto'} is not UTF-8 text"
    assert verdicts[22] == (
        f"UNREADABLE: {problems / '22_tanh.py'} is a character device, not a regular file"
    )


def test_check_against_a_fifo_is_a_one_line_error(tmp_path):
    fifo = tmp_path / "19_relu.py"
    os.mkfifo(fifo)
    result = subprocess.run(
        [sys.executable, "-m", "ptodsl", "check", str(RELU_SPEC), "--against", str(fifo)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr == f"ptodsl: error: cannot read {fifo}: a FIFO, not a regular file\n"
    assert "Traceback" not in result.stderr


def test_a_problem_run_reads_its_file_as_a_bounded_regular_file(tmp_path):
    """`ptodsl.check(..., against=...)` reaches run_problem without the command's check:
    the file is read here first, so its worker never blocks on it or reads gigabytes."""
    fifo = tmp_path / "19_relu.py"
    os.mkfifo(fifo)
    with pytest.raises(ProblemError, match="is a FIFO, not a regular file"):
        run_problem(fifo, 0, [])
    with pytest.raises(ProblemError, match="is larger than 1024 KiB"):
        run_problem(sparse(tmp_path / "20_big.py"), 0, [])
