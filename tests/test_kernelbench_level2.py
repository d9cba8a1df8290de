"""KernelBench level 2: our own problem files of the 100 public problems (commit 21fbe5a, v0
shapes), each written to compute what the original computes. `tests/problems/
compare_kernelbench.py` checked each against its original (the same parameters under one
seed, `torch.equal` outputs in eval and train mode); these tests keep the files sound
without the originals at hand."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, seeded_drop_in

from ptodsl.checking.coverage import SCALED_FILE, by_number, read_scaled, run_coverage
from ptodsl.runtime.files import import_file

PROBLEMS = ROOT / "tests" / "problems" / "kernelbench-level2"
PROBLEM_BY_NUMBER = {n: paths for n, paths in by_number(PROBLEMS.glob("*.py")).items()}
SPECS = ROOT / "examples" / "kernelbench-level2"
SPEC_BY_NUMBER = {n: paths for n, paths in by_number(SPECS.glob("*.pto")).items()}
SCALED = read_scaled(SPECS / SCALED_FILE, SPECS)
# The problems whose output is the same whatever their inputs and weights (their own files
# compute it: #13 2 tanh(1), a softmax over one channel; #66 ones, a softmax over one
# column; #80 and #83 zeros): `check` calls them DEGENERATE.
DEGENERATE = {13, 66, 80, 83}


def test_every_level_2_problem_has_one_file():
    assert sorted(PROBLEM_BY_NUMBER) == list(range(1, 101))
    assert all(len(paths) == 1 for paths in PROBLEM_BY_NUMBER.values())


def small(module) -> None:
    """The problem at batch 2 (its constant changed before its get_inputs reads it; other
    extents stay: #3's LayerNorm needs its output's width)."""
    if hasattr(module, "batch_size"):
        module.batch_size = min(module.batch_size, 2)


@pytest.mark.parametrize("number", sorted(PROBLEM_BY_NUMBER))
def test_a_level_2_problem_runs_and_is_deterministic(number):
    """Built twice under one seed, the model draws the same parameters and computes the
    same finite output on the same inputs: what `check --against` and coverage rely on."""
    (path,) = PROBLEM_BY_NUMBER[number]
    module = import_file(path, f"level2_{number}")
    small(module)
    outputs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs()).eval()
        torch.manual_seed(1)
        inputs = module.get_inputs()
        with torch.no_grad():
            outputs.append(model(*inputs))
    first, second = outputs
    assert isinstance(first, torch.Tensor) and first.numel() > 0
    assert torch.equal(first, second)
    assert math.isfinite(first.double().abs().sum().item())


def test_every_level_2_problem_has_its_spec():
    """Each of the 100 problems has one spec, named as its problem file, and an entry in
    the table of the sizes CI checks it at."""
    assert sorted(SPEC_BY_NUMBER) == list(range(1, 101))
    for number, (spec,) in SPEC_BY_NUMBER.items():
        (problem,) = PROBLEM_BY_NUMBER[number]
        assert spec.stem == problem.stem
    assert set(SCALED) == {spec.stem for (spec,) in SPEC_BY_NUMBER.values()}


@pytest.mark.parametrize("number", sorted(PROBLEM_BY_NUMBER))
def test_a_level_2_problem_passes_coverage_scaled(number):
    """`ptodsl coverage tests/problems/kernelbench-level2 --specs examples/kernelbench-level2
    --scaled`, one problem at a time: each spec passes `check --against` its problem with
    the problem's constants set as `scaled.toml` says, in pypto's SIM; a problem whose
    output is constant whatever its inputs and weights is DEGENERATE, and only those listed
    here are."""
    (row,) = run_coverage(PROBLEMS, SPECS, only=[number], scaled=SCALED)
    assert row.verdict == ("DEGENERATE" if number in DEGENERATE else "PASS"), row


def test_coverage_of_level_2_reports_a_degenerate_problem_and_passes(tmp_path):
    """The command as a user runs it, over a GEMM problem and #66 (a softmax over one
    column: ones whatever the inputs), whose row says why; each row says what ran scaled."""
    command = [
        sys.executable, "-m", "ptodsl", "coverage", str(PROBLEMS), "--specs", str(SPECS),
        "--scaled", "--only", "63", "66",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "| PASS" in result.stdout and "| DEGENERATE" in result.stdout
    assert "it reduces axes of size 1" in result.stdout
    # what ran scaled: the problem's constants as set, and the dims they bound
    assert "at set batch_size=32, in_features=256, out_features=128 (dims " in result.stdout
    assert "1 of 2 problems pass; 1 degenerate" in result.stdout


# Issue 40's problems that one kernel could not hold (a 3-D convolution then channel-wise
# work, GroupNorm of a convolution's output): now several kernels each.
CUT_PROBLEMS = [3, 6, 7, 8, 11, 13, 19, 20, 21, 23, 24, 26, 27, 34, 38, 43, 47, 48, 49, 50]
CUT_PROBLEMS += [58, 60, 61, 74, 78, 79, 83, 85, 89, 90, 92, 100]


@pytest.mark.slow
@pytest.mark.parametrize("number", CUT_PROBLEMS)
def test_a_level_2_spec_is_a_drop_in_under_a_seeded_harness(number, monkeypatch):
    """KernelBench's protocol at the CI dims: `torch.manual_seed(s); Model(*init)`, then
    `torch.manual_seed(s); ModelNew(*init)`, no weights copied, the same inputs, outputs
    `allclose` at 1e-2 (ModelNew in pypto's SIM, its outputs from ptodsl's interpreter)."""
    (spec,) = SPEC_BY_NUMBER[number]
    (problem,) = PROBLEM_BY_NUMBER[number]
    monkeypatch.setenv("AIKG_PYPTO_RUN_MODE", "1")
    for seed in (0, 1):
        _, _, expected, got = seeded_drop_in(spec, problem, seed)
        assert torch.allclose(got, expected, rtol=1e-2, atol=1e-2), (seed, spec.stem)
