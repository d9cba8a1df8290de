"""Property tests on random well-formed specs (tests/specgen.py): every one compiles to valid
Python within PyPTO's plan limits, a few pass ruff, and a seeded sample passes the numeric
check in pypto SIM against the torch reference."""

from __future__ import annotations

import json

import attrs
import pytest
import torch
from conftest import ruff_check
from hypothesis import given
from plan_limits import WITHOUT_UB_RULE, assert_plan_within_limits
from specgen import generate, generate_loop, loop_specs, specs

import ptodsl
from ptodsl.checking.check import run_check, spec_case
from ptodsl.checking.draws import seeded_draw
from ptodsl.emission.reference import emit_reference
from ptodsl.frontend.diagnostics import SpecError
from ptodsl.ir.plan import plan_of
from ptodsl.ir.target import PYPTO_0_2_0
from ptodsl.runtime.files import load_module


def compile_generated(spec):
    try:
        return ptodsl.compile(spec.text, name=f"generated_{spec.seed}.pto")
    except SpecError as error:
        raise AssertionError(f"seed {spec.seed}:\n{spec.text}\n{error}") from None


def assert_compiles_within_limits(spec):
    compiled = compile_generated(spec)
    compile(compiled.source, "kernel.py", "exec")
    compile(compiled.reference_source, "reference.py", "exec")
    assert_plan_within_limits(compiled.plan)


@given(specs())
def test_generated_specs_compile_within_limits(spec):
    assert_compiles_within_limits(spec)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@given(seed=specs().map(lambda spec: spec.seed))
def test_generated_half_precision_specs_compile(dtype, seed):
    spec = generate(seed, dtype=dtype)
    assert_plan_within_limits(compile_generated(spec).plan)


@pytest.mark.parametrize("seed", range(3))
def test_generated_modules_pass_ruff(seed, tmp_path):
    compiled = compile_generated(generate(seed))
    (tmp_path / "kernel.py").write_text(compiled.source, encoding="utf-8")
    (tmp_path / "kernel_reference.py").write_text(compiled.reference_source, encoding="utf-8")
    result = ruff_check(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rank_above_eight_is_a_located_error():
    prefix = "f32[" + "2, " * 8
    text = generate(7, max_rank=1).text.replace("f32[", prefix, 1)
    with pytest.raises(SpecError) as raised:
        ptodsl.compile(text, name="rank9.pto")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if prefix in t)
    assert raised.value.span.line == line
    assert "rank 9 is above ptodsl's limit of 8" in raised.value.render()


def test_a_rank_5_elementwise_spec_merges_to_pypto_rank():
    """A rank-5 tensor is fine when its axes merge: PyPTO sees at most 4."""
    text = (
        "kernel k\ndims A = 2, B = 3, C = 4, D = 5, E = 6\ninput x: f32[A, B, C, D, E]\n"
        "output y: f32[A, B, C, D, E]\ny = exp(x) + 1.0\n"
    )
    plan = ptodsl.compile(text, name="rank5.pto").plan
    assert all(len(t["kernel_shape"]) <= 4 for t in plan["kernels"][0]["inputs"].values())


# Small (< 100K elements) so that each check takes seconds; one SIM run at a time.
SIM_SEEDS = [seed for seed in range(40) if generate(seed, max_elements=50_000).elements > 64][:6]


@pytest.mark.parametrize("seed", SIM_SEEDS)
def test_generated_specs_pass_check_in_pypto_sim(seed):
    spec = generate(seed, max_elements=50_000)
    report = run_check(compile_generated(spec))
    assert report.ok, spec.text + json.dumps(report.to_json(), indent=2)


TINY_BUDGET = attrs.evolve(PYPTO_0_2_0, verify_memory_budget=1.0)


def test_launches_of_generated_specs_compute_the_whole_specs_values():
    """The launches analysis is sound: wherever it splits a random spec (a budget of one
    byte splits into single indices), the torch reference of one launch's kernel, run on
    each launch's slices and joined, gives the whole spec's reference values."""
    split = 0
    for seed in range(150):
        spec = generate(seed, max_elements=20_000)
        compiled = ptodsl.compile(spec.text, name="case.pto", target=TINY_BUDGET, tuning=None)
        block = compiled.lowered.after("launches")
        if block.launches is None:
            continue
        split += 1
        case = spec_case(compiled, seeded_draw(seed))
        # (the kernel's inputs: the spec's that a statement reads)
        names = (t.name for t in compiled.lowered.checked.inputs)
        by_name = dict(zip(names, case.inputs, strict=True))
        kwargs = {p.name: case.init_kwargs[p.name] for p in block.init_params if not p.fixed}
        reference = load_module(emit_reference(block, "case.pto"), f"launch_{seed}").reference
        chunk = block.launches.chunk
        parts = []
        for start in range(0, block.launches.extent, chunk):
            arguments = [
                value[start : start + chunk] if block.launch_cuts(tensor) else value
                for tensor, value in ((t, by_name[t.twin_of or t.name]) for t in block.inputs)
            ]
            result = reference(
                *(a.to(torch.float64) for a in arguments), *case.forward_scalars, **kwargs
            )
            parts.append(result if isinstance(result, tuple) else (result,))
        for whole, pieces in zip(case.expected, zip(*parts, strict=True), strict=True):
            joined = torch.cat(pieces)
            assert torch.allclose(joined, whole, rtol=1e-12, atol=1e-12, equal_nan=True), (
                f"seed {seed}:\n{spec.text}"
            )
    assert split >= 25, f"only {split} of 150 random specs split into launches"


def test_a_generated_spec_the_old_tiling_broke_fits_ub_and_runs():
    """Seed 156 (a where of tensors and two row sums over rows of 5): the tiling before UB
    was counted op by op gave [2048, 8] tiles, which pypto's UB check rejects (WHERE_TT), and
    the plan-limit property says so; the plan now fits and passes check in SIM."""
    spec = generate(156)
    old = ptodsl.compile(spec.text, name="old.pto", target=WITHOUT_UB_RULE, tuning=None)
    with pytest.raises(AssertionError):
        assert_plan_within_limits(plan_of(old.kernel))
    compiled = compile_generated(spec)
    assert_plan_within_limits(compiled.plan)
    assert run_check(compiled).ok


@given(loop_specs())
def test_generated_time_loops_compile_within_limits(spec):
    assert_compiles_within_limits(spec)


@pytest.mark.parametrize(
    "seed", [*range(2), *(pytest.param(seed, marks=pytest.mark.slow) for seed in range(2, 30))]
)
def test_generated_time_loops_pass_check_in_pypto_sim(seed):
    spec = generate_loop(seed)
    report = run_check(compile_generated(spec))
    assert report.ok, spec.text + json.dumps(report.to_json(), indent=2)
