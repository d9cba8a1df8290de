"""`check` is not fooled by its own inputs (issue 41): several draws, tight half-precision
bounds, degenerate problems recognised, the drop-in contract checked.

Every wrong kernel here passed the check of one seeded draw; each is a real generated
module, hand-edited, run in pypto SIM.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from conftest import CI_DIMS, ROOT, ci_resize

import ptodsl
from ptodsl.checking.check import run_check
from ptodsl.checking.draws import Observation, draws, transformed, with_thresholds
from ptodsl.checking.error_bounds import evaluate_bounds
from ptodsl.ir import nodes as ir

LEVEL2 = ROOT / "tests" / "problems" / "kernelbench-level2"
LEVEL2_SPECS = ROOT / "examples" / "kernelbench-level2"


def compiled(text: str, dims=None):
    return ptodsl.compile(text, name="case.pto", dims=dims, tuning=None)


def edited(tmp_path, spec, old: str, new: str, name: str = "wrong.py"):
    """The generated module of `spec` with `old` (which must occur once) made `new`."""
    assert spec.source.count(old) == 1, old
    path = tmp_path / name
    path.write_text(spec.source.replace(old, new), encoding="utf-8")
    return path


ROW_MAX = """kernel row_max
dims M = 16, N = 256
input x: f32[M, N]
output y: f32[M]
y = max(x, axis=1)
"""


@pytest.mark.parametrize("low", ["1.0", "0.0"])
def test_a_branch_the_seeded_draw_never_reaches_fails(tmp_path, low):
    """The row maximum of 256 normal samples is above 1: a clamp at 1 (or 0) never acts on
    the seeded draw (err/bound 0 there), and acts on every row of the small negative one."""
    spec = compiled(ROW_MAX)
    old = "return y.reshape((16,))"
    path = edited(tmp_path, spec, old, f"return torch.clamp(y.reshape((16,)), min={low})")
    report = run_check(spec, kernel_path=path)
    assert report.verdict == "FAIL"
    by_name = {draw.name: draw for draw in report.draws}
    assert by_name["seed 0"].outputs[0].ok  # the seeded draw alone is fooled
    assert by_name["small negative"].outputs[0].mismatched == 16


LAYER_NORM = """kernel layer_norm
dims M = 16, N = 256
input x: f32[M, N]
output y: f32[M, N]
let mu = mean(x, axis=1, keepdim=true)
let v = var(x, axis=1, keepdim=true, correction=0)
y = (x - mu) * rsqrt(v + EPS)
"""


@pytest.mark.parametrize("eps", ["1e-05", "1e-06"])
def test_layer_norm_without_its_eps_fails(tmp_path, eps):
    """At unit variance eps moves the output by 5e-6 relative, inside f32's bound; the
    small negative draw (inputs -|v| x 1e-3) makes it dominate, and the spec's `v + eps`
    says it must be reached."""
    spec = compiled(LAYER_NORM.replace("EPS", eps))
    correct = run_check(spec)
    assert correct.verdict == "PASS" and not correct.unreached
    path = edited(tmp_path, spec, f"pypto.rsqrt(v + {eps})", "pypto.rsqrt(v)")
    report = run_check(spec, kernel_path=path)
    assert report.verdict == "FAIL"
    seeded, *others = report.draws
    assert seeded.outputs[0].ok and any(not draw.outputs[0].ok for draw in others)


GATE = """kernel gate
dims M = 16, N = 1024
input x: DT[M, N]
input w: DT[N]
output y: DT[M, N]
y = x * sigmoid(w)
"""


@pytest.mark.parametrize(
    ("dtype", "wrong"),
    [
        ("f16", "y.bfloat16().half()"),  # 3 mantissa bits lost
        ("f16", "y * 1.002"),  # 4 units of f16
        ("bf16", "y * 1.008"),  # 2 units of bf16
    ],
)
def test_half_precision_kernels_a_few_units_off_fail(tmp_path, dtype, wrong):
    """Bounds of twice the unit roundoff times the computation's scale: the correct kernel
    stays below half of its bound, a kernel a few units off exceeds it."""
    spec = compiled(GATE.replace("DT", dtype))
    correct = run_check(spec)
    assert correct.verdict == "PASS" and correct.outputs[0].worst_ratio < 0.5
    path = edited(tmp_path, spec, "return y.reshape((16, 1024))", f"return {wrong}")
    assert run_check(spec, kernel_path=path).verdict == "FAIL"


def test_a_forward_that_writes_its_input_fails(tmp_path):
    spec = compiled(GATE.replace("DT", "f32"))
    old = "return y.reshape((16, 1024))"
    path = edited(tmp_path, spec, old, f"x.zero_()\n        {old}")
    report = run_check(spec, kernel_path=path)
    assert report.verdict == "FAIL"
    assert all(o.ok for o in report.outputs)  # the values were right
    assert any("wrote to its input `x`" in problem for problem in report.problems)


@pytest.mark.parametrize(("returned", "what"), [("[y]", "a list of 1"), ("(y,)", "a tuple of 1")])
def test_a_forward_returning_another_container_fails(tmp_path, returned, what):
    spec = compiled(GATE.replace("DT", "f32"))
    path = edited(tmp_path, spec, "return y.reshape((16, 1024))", f"return {returned}")
    report = run_check(spec, kernel_path=path)
    assert report.verdict == "FAIL"
    assert any(f"returned {what} tensor; the spec declares a tensor" in p for p in report.problems)


PROBLEM = """import torch


class Model(torch.nn.Module):
    def forward(self, x, w):
        return RESULT


def get_inputs():
    return [INPUT, torch.randn(1024)]


def get_init_inputs():
    return []
"""


def problem_file(tmp_path, result: str, given: str = "torch.randn(16, 1024)"):
    path = tmp_path / "problem.py"
    path.write_text(PROBLEM.replace("RESULT", result).replace("INPUT", given), encoding="utf-8")
    return path


def test_a_problem_returning_another_dtype_than_the_spec_fails(tmp_path):
    spec = compiled(GATE.replace("DT", "f32"))
    report = run_check(spec, against=problem_file(tmp_path, "(x * torch.sigmoid(w)).double()"))
    assert report.verdict == "FAIL"
    assert any("returns torch.float64, the spec declares f32" in p for p in report.problems)


def test_non_contiguous_problem_inputs_and_outputs_pass(tmp_path):
    """A transposed input from get_inputs() and a transposed view returned by forward are
    values like any other (pypto refused the view as a golden)."""
    spec = compiled(GATE.replace("DT", "f32"))
    problem = problem_file(
        tmp_path, "(x * torch.sigmoid(w)).t().contiguous().t()", "torch.randn(1024, 16).t()"
    )
    assert run_check(spec, against=problem).verdict == "PASS"


def test_an_output_vacuous_on_the_seeded_draw_is_judged_on_another():
    """relu(x - 10) is zeros on the seeded draw; the spec's relu must see a positive
    operand, which the large draw (x 30) gives: judged there, not vacuous."""
    spec = compiled(ROW_MAX.replace("y = max(x, axis=1)", "y = sum(relu(x - 10.0), axis=1)"))
    report = run_check(spec)
    assert report.verdict == "PASS"
    names = [draw.name for draw in report.draws]
    assert report.draws[0].outputs[0].vacuous is not None and "large" in names
    assert report.outputs[0].vacuous is None


def test_a_branch_no_draw_reaches_is_listed():
    spec = compiled(
        "kernel capped\ndims M = 16, N = 256\ninput x: f32[M, N]\noutput y: f32[M, N]\n"
        "y = max(sigmoid(x), 2.0)\n"
    )
    report = run_check(spec)
    assert report.verdict == "DEGENERATE"  # 2.0 everywhere, whatever x
    assert any("its first operand selected" in what for what in report.unreached)


def test_an_equality_only_exact_inputs_reach_is_reached_at_thresholds(tmp_path):
    """`x != 0.5` is false only where x is 0.5 exactly, which no continuous draw gives: a
    kernel comparing with 0.515 passed every other draw."""
    spec = compiled(
        "kernel unequal\ndims M = 16, N = 256\ninput x: f32[M, N]\noutput y: f32[M, N]\n"
        "y = where(x != 0.5, 2.0, x)\n"
    )
    assert run_check(spec).verdict == "PASS"
    report = run_check(spec, kernel_path=edited(tmp_path, spec, "x != 0.5", "x != 0.515"))
    assert report.verdict == "FAIL"
    by_name = {draw.name: draw for draw in report.draws}
    assert by_name["seed 0"].outputs[0].ok
    assert not by_name["at thresholds"].outputs[0].ok


def test_the_thresholds_draw_sets_half_the_values_to_the_constants():
    (draw,) = [d for d in with_thresholds(draws(0), {0.5, -2.0}) if d.name == "at thresholds"]
    drawn = torch.randn(4096, dtype=torch.float64)
    values = transformed(drawn, "real", draw)
    at = (values == 0.5) | (values == -2.0)
    assert 0.45 < float(at.double().mean()) < 0.55
    assert torch.equal(values[~at], drawn[~at])
    assert {0.5, -2.0} <= set(values[at].tolist())
    assert not any(d.name == "at thresholds" for d in with_thresholds(draws(0), set()))


def test_the_draws_keep_each_input_in_its_domain():
    values = torch.rand(64, dtype=torch.float64) + 0.1
    for draw in with_thresholds(draws(0), {-1.0, 0.0, 0.5}):
        positive = transformed(values, "positive", draw)
        assert bool((positive > 0).all()), draw.name
        assert torch.equal(transformed(values, "unit", draw), values)


def test_a_draw_whose_exact_values_overflow_is_seen():
    spec = compiled(
        "kernel grow\ndims N = 64\ninput x: f32[N]\noutput y: f32[N]\ny = exp(x * 30.0)\n"
    )
    checked = spec.lowered.checked
    observation = Observation(spec.lowered.source.text)
    evaluate_bounds(checked, [torch.full((64,), 4.0)], {}, observation)
    assert observation.overflows and "beyond f32's range" in observation.overflows[0]
    assert checked.outputs[0].type.dtype is ir.DType.F32


def level2(number: int):
    (spec,) = LEVEL2_SPECS.glob(f"{number}_*.pto")
    (problem,) = LEVEL2.glob(f"{number}_*.py")
    return spec, problem


def level2_check(number: int, kernel_path=None):
    spec, problem = level2(number)
    text = spec.read_text(encoding="utf-8")
    small = ptodsl.compile(text, name=spec.name, dims=CI_DIMS[spec.stem], tuning=None)
    resize = ci_resize(spec.stem)
    return small, run_check(small, kernel_path=kernel_path, against=problem, resize=resize)


@pytest.mark.parametrize("number", [66, 80])
def test_a_degenerate_problem_is_degenerate_and_exits_0(number):
    """#66 (a softmax over one column) and #80 (a value minus its mean over one column)
    are constants of their problems: DEGENERATE, with the op that makes them so named."""
    spec, problem = level2(number)
    dims = {66: ["B=2"], 80: ["B=2", "K=64", "O=128"]}[number]
    command = [sys.executable, "-m", "ptodsl", "check", str(spec), "--against", str(problem)]
    command += [arg for dim in dims for arg in ("--dim", dim)]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "result: DEGENERATE" in result.stdout
    assert {66: "softmax(m, axis=1)", 80: "top - mean(top"}[number] in result.stdout


def test_a_kernel_ignoring_the_input_of_level_2_36_fails(tmp_path):
    """#36's output is its bias wherever GELU underflows (sums near -40 at full shape): a
    kernel returning the bias passed with error 0. Other draws give GELU work to do."""
    small, report = level2_check(36)
    assert report.verdict == "PASS"
    path = edited(
        tmp_path,
        small,
        "return y.reshape((2, 16, 1, 32))",
        "return self.bias.detach().reshape(1, 16, 1, 1).expand(2, 16, 1, 32).contiguous()",
    )
    _, wrong = level2_check(36, kernel_path=path)
    assert wrong.verdict == "FAIL"


def test_level_2_96_is_checked_at_its_modules_own_weight_scale():
    """#96's clamp(0, 1) after a 3-D transposed convolution: weights drawn at 1 saturated it
    (every output 1.0); drawn at each parameter's own spread the output varies."""
    _, report = level2_check(96)
    assert report.verdict == "PASS"
    assert report.draws[0].outputs[0].vacuous is None
