"""Every example: golden files of the stages that matter, lint-clean deterministic output,
plans within PyPTO's limits, and a numeric check in pypto SIM against the torch reference."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from conftest import CI_DIMS, EXAMPLES, ruff_check

import ptodsl
from ptodsl.checking import run_check
from ptodsl.ir import format_kernel
from ptodsl.plan import format_plan
from ptodsl.target import PYPTO_0_2_0

IDS = [path.stem for path in EXAMPLES]


def compile_example(path):
    return ptodsl.compile(path.read_text(encoding="utf-8"), name=f"examples/{path.name}")


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_goldens(path, golden):
    compiled = compile_example(path)
    golden(f"{path.stem}/kernel.py.txt", compiled.source)
    golden(f"{path.stem}/plan.json", format_plan(compiled.kernel))
    golden(f"{path.stem}/lowered.ir.txt", format_kernel(compiled.kernel))
    golden(f"{path.stem}/reference.py.txt", compiled.reference_source)


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_output_is_deterministic(path):
    first = subprocess.run(
        [sys.executable, "-m", "ptodsl", "compile", str(path)], capture_output=True, check=True
    ).stdout
    second = subprocess.run(
        [sys.executable, "-m", "ptodsl", "compile", str(path)], capture_output=True, check=True
    ).stdout
    assert first == second and first


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_generated_modules_pass_ruff(path, tmp_path):
    compiled = compile_example(path)
    (tmp_path / f"{path.stem}.py").write_text(compiled.source)
    (tmp_path / f"{path.stem}_reference.py").write_text(compiled.reference_source)
    result = ruff_check(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def assert_cube_tile_fits(cube: dict) -> None:
    """Multiples of 16, L0 <= L1 with L1 % L0 == 0, fp32 tiles within L0A/L0B/L0C and L1."""
    (m0, m1), (k0, k1), (n0, n1) = cube["m"], cube["k"], cube["n"]
    assert all(v % 16 == 0 for v in (m0, k0, n0))
    assert m0 <= m1 and k0 <= k1 and n0 <= n1 and k1 % k0 == 0
    assert m0 * k0 * 4 <= 64 * 1024 and n0 * k0 * 4 <= 64 * 1024 and m0 * n0 * 4 <= 128 * 1024
    assert (m1 + n1) * k1 * 4 <= 512 * 1024


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_plan_within_pypto_limits(path):
    plan = compile_example(path).plan
    for kernel in plan["kernels"]:
        for phase in kernel["phases"]:
            if phase["kind"] == "cube":
                assert_cube_tile_fits(phase["cube_tile"])
                continue
            shape, tile = phase["shape"], phase["tile"]
            assert len(tile) == len(shape) <= PYPTO_0_2_0.max_rank
            assert all(1 <= t <= s for t, s in zip(tile[:-1], shape[:-1], strict=True))
            # A reduced last axis shorter than 32 bytes gets a 32-byte tile (PyPTO's rule).
            assert tile[-1] <= shape[-1] or tile[-1] * 4 == PYPTO_0_2_0.reduce_align_bytes
            assert math.prod(tile) <= PYPTO_0_2_0.max_tile_elements
            loop = phase["loop"]
            if loop is None:
                assert phase["auto_tiles"] <= PYPTO_0_2_0.max_auto_tiles
            else:
                assert phase["auto_tiles"] > PYPTO_0_2_0.max_auto_tiles
                assert loop["tiles_per_iteration"] <= PYPTO_0_2_0.max_auto_tiles
                assert loop["count"] * loop["chunk"] + loop["tail"] == shape[loop["axis"]]
                assert loop["tail"] < loop["chunk"]


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_check_passes_in_pypto_sim(path):
    dims = CI_DIMS.get(path.stem)
    report = run_check(ptodsl.compile(path.read_text(encoding="utf-8"), path.name, dims))
    assert report.ok, json.dumps(report.to_json(), indent=2)
    assert report.sim_time_us > 0
    assert report.passes, "pypto reported no pass verification"
