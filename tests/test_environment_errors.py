"""The user's environment is a user error, never a bug: folders ptodsl must write that are
read-only, full or not folders, FIFOs where its cache keeps files, and what a generated
`ModelNew` cannot take (inputs that are not tensors, a run mode it does not know, a scalar
pypto's simulator would clamp, a trace folder that is a FIFO). Each is refused with a message
naming the path or the argument, before anything is measured."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

import ptodsl
from ptodsl.emission.codegen import emit_kernelbench
from ptodsl.runtime.simulator import _intact

SCALE = """\
kernel scale
dims   M = 8, N = 16
input  A: f32[M, N]
input  s: f32 = 3.14
output C: f32[M, N]
C = A * s
"""


@pytest.fixture
def spec(tmp_path) -> Path:
    path = tmp_path / "scale.pto"
    path.write_text(SCALE, encoding="utf-8")
    return path


def ptodsl_in_a_tmpfs(mount: Path, options: str, fill: bool, *args: str, **env: str):
    """`ptodsl ARGS` with a tmpfs of `options` mounted at `mount` in a mount namespace of its
    own (as root, a read-only folder is writable: a read-only file system is not), filled
    to its last block first with `fill`."""
    mount.mkdir()
    command = " ".join(map(shlex.quote, [sys.executable, "-m", "ptodsl", *args]))
    filler = f"dd if=/dev/zero of={mount}/fill bs=4k 2>/dev/null; " if fill else ""
    script = f"mount -t tmpfs -o {options} tmpfs {mount} && {filler}exec {command}"
    return subprocess.run(
        ["unshare", "--mount", "sh", "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )


def refused_before_measuring(result: subprocess.CompletedProcess, message: str) -> None:
    assert result.returncode == 1, result.stderr
    assert f"ptodsl: error: {message}" in result.stderr
    assert "simulated" not in result.stderr and "Traceback" not in result.stderr


def test_a_read_only_cache_folder_is_refused_before_measuring(tmp_path, spec):
    cache = tmp_path / "mount" / "cache"
    result = ptodsl_in_a_tmpfs(
        tmp_path / "mount", "ro,size=64k", False, "check", str(spec), PTODSL_CACHE_DIR=str(cache)
    )
    refused_before_measuring(
        result, f"cannot write in {cache}: Read-only file system (PTODSL_CACHE_DIR sets it)"
    )


def test_a_full_cache_folder_is_refused_before_measuring(tmp_path, spec):
    cache = tmp_path / "mount"
    result = ptodsl_in_a_tmpfs(
        cache, "size=16k", True, "check", str(spec), PTODSL_CACHE_DIR=str(cache)
    )
    refused_before_measuring(result, f"cannot write in {cache}: No space left on device")


def test_a_read_only_tuning_folder_is_refused_before_tune_measures(tmp_path, spec):
    tuning = tmp_path / "mount" / "tuning"
    result = ptodsl_in_a_tmpfs(
        tmp_path / "mount", "ro,size=64k", False, "tune", str(spec), PTODSL_TUNING_DIR=str(tuning)
    )
    refused_before_measuring(result, f"cannot write in {tuning}: Read-only file system")
    assert "measuring plans" not in result.stderr


def test_a_cache_folder_that_is_a_file_is_refused(tmp_path, spec):
    cache = tmp_path / "cache"
    cache.write_text("", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "ptodsl", "check", str(spec)],
        capture_output=True,
        text=True,
        env={**os.environ, "PTODSL_CACHE_DIR": str(cache)},
    )
    refused_before_measuring(result, f"cannot write in {cache}: it is a regular file, not a folder")


def test_a_fifo_in_the_cache_is_refused_before_measuring(tmp_path, spec):
    """A calculator digest that is a FIFO used to block `check` until its timeout, which then
    blamed the simulation."""
    digest = tmp_path / "cache" / "calculator" / "0123" / "lib" / "libcalculator.so.sha256"
    digest.parent.mkdir(parents=True)
    os.mkfifo(digest)
    result = subprocess.run(
        [sys.executable, "-m", "ptodsl", "check", str(spec)],
        capture_output=True,
        text=True,
        env={**os.environ, "PTODSL_CACHE_DIR": str(tmp_path / "cache")},
        timeout=120,
    )
    refused_before_measuring(result, f"{digest} is a FIFO, where ptodsl keeps only files")


def test_a_calculator_whose_digest_is_a_fifo_is_rebuilt_not_waited_for(tmp_path):
    library = tmp_path / "libcalculator.so"
    library.write_bytes(b"\x7fELF")
    os.mkfifo(library.with_name(library.name + ".sha256"))
    answer = []
    reader = threading.Thread(target=lambda: answer.append(_intact(library)), daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert answer == [False]


def test_a_tuning_entry_that_is_a_fifo_is_ignored_with_a_warning(tmp_path, monkeypatch, capsys):
    from ptodsl.tools.tuning_cache import _cache_path

    monkeypatch.setenv("PTODSL_TUNING_DIR", str(tmp_path))
    entry = _cache_path(SCALE, None, ptodsl.ir.target.PYPTO_0_2_0)
    os.mkfifo(entry)
    compiled = []
    worker = threading.Thread(target=lambda: compiled.append(ptodsl.compile(SCALE)), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert len(compiled) == 1
    assert f"ignoring tuning cache entry {entry}: not a regular file" in capsys.readouterr().err


# What a generated ModelNew refuses, in pypto's simulator (no NPU here).


@pytest.fixture
def model_new(monkeypatch, tmp_path):
    monkeypatch.setenv("AIKG_PYPTO_RUN_MODE", "1")
    for variable in ("PTODSL_SIM", "PTODSL_TRACE", "PTODSL_INTERPRET"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    context: dict = {}
    text = emit_kernelbench(ptodsl.compile(SCALE, name="scale.pto").program, "scale.pto")
    exec(compile(text, "<string>", "exec"), context)
    return context["ModelNew"]()


A = torch.full((8, 16), 0.5)


@pytest.mark.parametrize(
    ("given", "error", "message"),
    [
        (A.numpy(), TypeError, "A: expected a torch.Tensor, got ndarray"),
        (A.tolist(), TypeError, "A: expected a torch.Tensor, got list"),
        (A.to("meta"), ValueError, "A: a meta tensor holds no values to compute on"),
    ],
    ids=["numpy", "list", "meta"],
)
def test_an_input_forward_cannot_take_is_refused_by_name(model_new, given, error, message):
    with pytest.raises(error, match=message):
        model_new(given, 2.0)


@pytest.mark.parametrize("scalar", [1e39, -1e39, float("inf")])
def test_a_scalar_the_simulator_would_clamp_is_refused_by_name(model_new, scalar):
    """pypto's calculator clamps an f32 scalar operand to ±3.4028235e+38, where torch computes
    with inf (it gave 1.70e38 for 0.5 * 1e39)."""
    with pytest.raises(ValueError, match=r"s=.*is beyond f32's range"):
        model_new(A, scalar)


def test_the_largest_f32_scalar_computes_what_torch_computes(model_new):
    x = torch.tensor([[0.5, -1.0, 0.0, 2.0]]).repeat(8, 4)
    with torch.no_grad():
        assert torch.equal(model_new(x, 3.4e38), x * 3.4e38)


@pytest.mark.parametrize(
    ("mode", "error", "message"),
    [
        ("abc", ValueError, "AIKG_PYPTO_RUN_MODE='abc': 0 runs on an NPU, 1 in pypto's simulator"),
        ("0", RuntimeError, "AIKG_PYPTO_RUN_MODE=0 runs on an NPU, and torch_npu is not installed"),
    ],
)
def test_a_run_mode_this_machine_cannot_run_is_refused(
    model_new, monkeypatch, mode, error, message
):
    monkeypatch.setenv("AIKG_PYPTO_RUN_MODE", mode)
    with pytest.raises(error, match=message):
        model_new(A, 2.0)


def test_a_trace_folder_that_is_a_fifo_is_refused(model_new, monkeypatch, tmp_path):
    fifo = tmp_path / "trace"
    os.mkfifo(fifo)
    monkeypatch.setenv("PTODSL_TRACE", str(fifo))
    with pytest.raises(ValueError, match="it is a FIFO, not a folder"):
        model_new(A, 2.0)
