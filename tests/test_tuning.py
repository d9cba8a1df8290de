"""Tuning: every candidate plan obeys PyPTO's limits, the cost probe measures without leaving
files behind, and `ptodsl tune` stores a checked plan that `ptodsl compile` then uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import EXAMPLES, ROOT, example_dims
from plan_limits import assert_plan_within_limits

import ptodsl
from ptodsl.checking.check import run_check
from ptodsl.frontend.diagnostics import Source
from ptodsl.ir import nodes as ir
from ptodsl.ir.plan import plan_of
from ptodsl.ir.target import PYPTO_0_2_0
from ptodsl.passes.loops import plan_loop
from ptodsl.passes.tiling import choose_tile
from ptodsl.pipeline import lower
from ptodsl.tools.tuning import candidates, probe_cost
from ptodsl.tools.tuning_cache import DEFAULT_BUDGET

SUM_DIM = ROOT / "examples" / "kernelbench" / "47_sum_dim.pto"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_candidate_plan_verifies_and_obeys_pypto_limits(path):
    """Every plan of a one-kernel example; of a program of several, the plans tune measures
    at its default budget (each kernel's choices lower the whole spec again)."""
    # `candidates` lowers every plan, and lowering runs the IR verifier after every pass.
    source = Source(path.read_text(encoding="utf-8"), path.name)
    plans = candidates(source, example_dims(path), PYPTO_0_2_0, limit=DEFAULT_BUDGET)
    if len(plans[0].parts) == 1:
        plans = candidates(source, example_dims(path), PYPTO_0_2_0)
    assert plans[0].tuning == ir.Tuning()  # the default plan is always measured first
    for lowered in plans:
        for kernel in lowered.kernels:  # every kernel of a program of several
            assert_plan_within_limits(plan_of(kernel))


def test_candidates_differ_from_each_other():
    plans = candidates(Source(SUM_DIM.read_text(encoding="utf-8"), "s.pto"), None, PYPTO_0_2_0)
    tiles = [tuple(tuple(p.tile) for p in lowered.kernel.schedule.phases) for lowered in plans]
    assert len(plans) > 3 and len(set(tiles)) == len(tiles)


@pytest.mark.parametrize("cap", [32, 64, 256])
def test_last_axis_cap_moves_the_tile_budget_to_outer_axes(cap):
    tile = choose_tile((16, 256, 256), 4, PYPTO_0_2_0, last_axis_max=cap)
    assert tile[-1] == cap and tile[-2] == min(256, 16384 // cap)
    assert tile[0] * tile[1] * tile[2] <= 16384


@pytest.mark.parametrize("min_count", [8, 16, 32, 64])
def test_loop_count_asks_for_at_least_that_many_iterations(min_count):
    loop = plan_loop((67108864,), (16384,), PYPTO_0_2_0, min_count=min_count)
    assert loop is not None and loop.count >= min_count
    assert loop.count * loop.chunk + loop.tail == 67108864 and loop.chunk % 16384 == 0


def test_cost_probe_returns_numbers_and_leaves_no_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cost = probe_cost(lower(Source(SUM_DIM.read_text(encoding="utf-8"), SUM_DIM.name)))
    assert cost.sim_time_us > 0 and cost.total_cycles > 0
    assert list(tmp_path.iterdir()) == []


def ptodsl_cli(*args, env):
    return subprocess.run(
        [sys.executable, "-m", "ptodsl", *map(str, args)], capture_output=True, text=True, env=env
    )


# GELU's candidates: the default, last_axis_tile=64 (5x slower) and tile_elements=8192,
# which beats the default by 18% at 16 x 16384 (README: Performance).
GELU = ROOT / "examples" / "kernelbench" / "26_gelu.pto"


def test_tune_stores_a_checked_plan_that_compile_uses(tmp_path):
    env = {**os.environ, "PTODSL_TUNING_DIR": str(tmp_path / "tuning")}
    tuned = ptodsl_cli("tune", GELU, "--budget", "3", env=env)
    assert tuned.returncode == 0, tuned.stderr
    rows = [line for line in tuned.stdout.splitlines() if line[:1].isdigit()]
    assert len(rows) == 3 and "<- chosen" in rows[2] and "passes ptodsl check" in tuned.stdout
    assert "[3/3] " in tuned.stderr and "\r" not in tuned.stderr  # plain lines in a pipe
    (stored,) = (tmp_path / "tuning").iterdir()
    record = json.loads(stored.read_text())
    assert record["sim_time_us"] < record["default_sim_time_us"] * 0.98
    plan = json.loads(ptodsl_cli("compile", GELU, "--emit", "plan", env=env).stdout)
    untuned = json.loads(ptodsl_cli("compile", GELU, "--emit", "plan", "--untuned", env=env).stdout)
    chosen = ir.Tuning(**record["tuning"])
    assert chosen != ir.Tuning() and plan != untuned
    assert plan["kernels"][0]["decisions"] == [f"plan choices: {chosen.describe()}"]
    assert untuned["kernels"][0]["decisions"] == []
    checked = json.loads(ptodsl_cli("check", GELU, "--json", env=env).stdout)
    assert checked["ok"] and checked["plan"] == (
        f"tuned plan from the tuning cache ({chosen.describe()})"
    )
    untuned_check = ptodsl_cli("check", GELU, "--json", "--untuned", env=env)
    assert json.loads(untuned_check.stdout)["plan"] == "default plan"


# The one-pass variance E[x^2] - E[x]^2 loses digits when the mean dwarfs the spread.
OFFSET_VARIANCE = """kernel offset_variance
dims N = 16, C = 4096
input x: f32[N, C]
output y: f32[N]
y = var(x + 1000.0, axis=1)
"""


def test_a_plan_that_loses_digits_fails_check_and_no_check_tune_never_reaches_compile(
    tmp_path,
):
    assert run_check(ptodsl.compile(OFFSET_VARIANCE, tuning=None)).ok
    one_pass = ptodsl.compile(OFFSET_VARIANCE, tuning=ir.Tuning(variance="one_pass"))
    report = run_check(one_pass)
    assert not report.ok and report.outputs[0].mismatched > 0
    assert report.plan == "given plan choices (variance=one_pass)"
    assert all("passed ptodsl check" not in d for d in one_pass.kernel.decisions)

    spec = tmp_path / "offset_variance.pto"
    spec.write_text(OFFSET_VARIANCE, encoding="utf-8")
    env = {**os.environ, "PTODSL_TUNING_DIR": str(tmp_path / "tuning")}
    before = ptodsl_cli("compile", spec, env=env).stdout
    tuned = ptodsl_cli("tune", spec, "--budget", "2", "--no-check", env=env)
    assert tuned.returncode == 0, tuned.stderr
    assert "compile keeps the plan it had" in tuned.stdout
    assert [p.name.endswith(".unchecked.json") for p in (tmp_path / "tuning").iterdir()] == [True]
    assert ptodsl_cli("compile", spec, env=env).stdout == before
    checked = json.loads(ptodsl_cli("check", spec, "--json", env=env).stdout)
    assert checked["ok"] and checked["plan"] == "default plan"


@pytest.mark.parametrize(("candidate_us", "stored"), [(99.5, False), (97.0, True)])
def test_a_plan_replaces_the_default_only_by_the_margin(
    candidate_us, stored, tmp_path, monkeypatch
):
    """The cost model is deterministic; a 0.5% gain is still not worth a tuned plan."""
    from ptodsl.tools import tuning

    monkeypatch.setenv("PTODSL_TUNING_DIR", str(tmp_path))
    costs = iter([100.0, candidate_us])
    monkeypatch.setattr(tuning, "probe_cost", lambda lowered: tuning.Cost(next(costs), 1))
    source = Source(SUM_DIM.read_text(encoding="utf-8"), SUM_DIM.name)
    result = tuning.tune(source, budget=2, check=False)
    assert (result.best is not result.default) == stored
    assert "default plan kept: no plan is 2% faster" in tuning.format_table(result) or stored
    assert len(list(tmp_path.iterdir())) == (1 if stored else 0)
