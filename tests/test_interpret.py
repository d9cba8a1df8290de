"""Interpreter mode: a generated KernelBench answer, exec()'d as KernelBench's loader does and
called in pypto's simulator, returns the values pypto's calculator computes (checked against
the problem's own Model under `check`'s bounds), raises when only the cost model was asked
for, and leaves nothing of pypto's in the caller's working directory or terminal."""

from __future__ import annotations

import pytest
import torch
from conftest import CI_DIMS, INTERPRETER_PATTERNS, ROOT

import ptodsl
from ptodsl.checking import compare, problem_case, problem_rescale
from ptodsl.codegen import emit_kernelbench
from ptodsl.interpret import CostOnly

SPECS = ROOT / "examples" / "kernelbench"
PROBLEMS = ROOT / "tests" / "problems" / "kernelbench"


def answer_model(compiled: ptodsl.Compiled, spec_name: str) -> type:
    """`ModelNew` of the kernelbench answer, loaded as KernelBench's harness loads one."""
    context: dict = {}
    text = emit_kernelbench(compiled.kernel, spec_name)
    exec(compile(text, "<string>", "exec"), context)
    return context["ModelNew"]


@pytest.fixture
def simulator(monkeypatch, tmp_path):
    """pypto's SIM run mode, no PTODSL_SIM, and a working directory of the test's own."""
    monkeypatch.setenv("AIKG_PYPTO_RUN_MODE", "1")
    monkeypatch.delenv("PTODSL_SIM", raising=False)
    monkeypatch.delenv("PTODSL_TRACE", raising=False)
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    return workdir


@pytest.mark.parametrize("stem", INTERPRETER_PATTERNS)
def test_forward_in_the_simulator_returns_the_problems_values(stem, simulator, capfd):
    spec = SPECS / f"{stem}.pto"
    dims = CI_DIMS.get(stem)  # the large shapes scaled, as CI checks them
    compiled = ptodsl.compile(spec.read_text(encoding="utf-8"), name=spec.name, dims=dims)
    rescale = problem_rescale(compiled.lowered.syntax.declared_dims, dims) if dims else None
    case = problem_case(compiled, PROBLEMS / f"{stem}.py", seed=0, rescale=rescale)
    checked = compiled.lowered.checked
    arguments, state = case.forward_and_state(checked)
    model = answer_model(compiled, spec.name)(**case.init_kwargs)
    model.load_state_dict(state)
    capfd.readouterr()
    with torch.no_grad():
        result = model(*arguments)
    results = result if isinstance(result, tuple) else (result,)
    for output, actual, expected, scale in zip(
        checked.outputs, results, case.expected, case.scales, strict=True
    ):
        judged = compare(output.name, actual, expected, scale, output.type.dtype)
        assert judged.ok, judged
    assert list(simulator.iterdir()) == []  # no output/ folder, no logs
    printed = capfd.readouterr()
    assert printed.out == "" and printed.err == ""


SMALL = """kernel shifted_exp
dims N = 16, C = 64
input x: f32[N, C]
output y: f32[N, C]
y = exp(x - 1.0)
"""


def test_cost_only_mode_raises_instead_of_returning_unwritten_outputs(simulator, monkeypatch):
    monkeypatch.setenv("PTODSL_SIM", "cost")
    model = answer_model(ptodsl.compile(SMALL, name="small.pto"), "small.pto")()
    with pytest.raises(CostOnly, match=r"PTODSL_SIM=cost: .* us simulated\) and writes no outputs"):
        model(torch.randn(16, 64))
    assert list(simulator.iterdir()) == []


def test_a_trace_folder_keeps_each_launchs_swim_lanes(simulator, monkeypatch, tmp_path):
    monkeypatch.setenv("PTODSL_TRACE", str(tmp_path / "trace"))
    model = answer_model(ptodsl.compile(SMALL, name="small.pto"), "small.pto")()
    x = torch.randn(16, 64)
    assert torch.allclose(model(x), torch.exp(x - 1.0), rtol=1e-5, atol=1e-6)
    assert [p.name for p in (tmp_path / "trace").iterdir()] == ["launch_0"]
    assert any((tmp_path / "trace" / "launch_0").glob("*.json"))


def test_an_unknown_cost_mode_is_an_error(simulator, monkeypatch):
    monkeypatch.setenv("PTODSL_SIM", "fast")
    model = answer_model(ptodsl.compile(SMALL, name="small.pto"), "small.pto")()
    with pytest.raises(ValueError, match="PTODSL_SIM='fast'"):
        model(torch.randn(16, 64))


def test_interpret_mode_is_asked_for_where_the_run_mode_names_an_npu(simulator, monkeypatch):
    monkeypatch.setenv("AIKG_PYPTO_RUN_MODE", "0")
    monkeypatch.setenv("PTODSL_INTERPRET", "1")
    model = answer_model(ptodsl.compile(SMALL, name="small.pto"), "small.pto")()
    x = torch.randn(16, 64)
    assert torch.allclose(model(x), torch.exp(x - 1.0), rtol=1e-5, atol=1e-6)
