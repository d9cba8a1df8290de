"""Interpreter mode: a generated KernelBench answer, exec()'d as KernelBench's loader does and
called in pypto's simulator, returns the values pypto's calculator computes (checked against
the problem's own Model under `check`'s bounds), raises when only the cost model was asked
for, and leaves nothing of pypto's in the caller's working directory or terminal."""

from __future__ import annotations

import threading

import pytest
import torch
from conftest import CI_DIMS, INTERPRETER_PATTERNS, ROOT, ci_resize

import ptodsl
from ptodsl.checking.check import compare, problem_case
from ptodsl.checking.draws import seeded_draw
from ptodsl.emission.codegen import emit_kernelbench
from ptodsl.runtime import memory
from ptodsl.runtime.interpret import CostOnly, _Launches, overlaps
from ptodsl.runtime.simulator import SimRun, SimulationError

SPECS = ROOT / "examples" / "kernelbench"
PROBLEMS = ROOT / "tests" / "problems" / "kernelbench"


def answer_model(compiled: ptodsl.Compiled, spec_name: str) -> type:
    """`ModelNew` of the kernelbench answer, loaded as KernelBench's harness loads one."""
    context: dict = {}
    text = emit_kernelbench(compiled.program, spec_name)
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
    resize = ci_resize(stem) if dims else None
    case = problem_case(compiled, PROBLEMS / f"{stem}.py", seeded_draw(0), resize=resize)
    checked = compiled.lowered.checked
    arguments, state = case.forward_and_state(checked)
    model = answer_model(compiled, spec.name)(**case.init_kwargs)
    # the drawn weights over the module's own state (a BatchNorm's buffers stay as built)
    model.load_state_dict({**model.state_dict(), **state}, strict=True)
    capfd.readouterr()
    torch.manual_seed(case.draw.data_seed)  # as the check's run: dropout draws from it
    with torch.no_grad():
        result = model(*arguments)
    results = result if isinstance(result, tuple) else (result,)
    # training mode's running statistics, as the check compares them
    results += tuple(model.get_buffer(o.updates) for o in checked.outputs if o.updates)
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


# A program of two kernels: a 3-D convolution alone (batch 2), then its bias and a softmax
# over its channels.
TWO_KERNELS = """kernel conv3d_softmax
dims N = 2, C_in = 2, D = 4, H = 4, W = 4, C_out = 4, D_out = 2, H_out = 2, W_out = 2
input x: f32[N, C_in, D, H, W]
weight conv: conv3d(C_in, C_out, 3)
output y: f32[N, C_out, D_out, H_out, W_out]
y = softmax(conv(x), axis=1)
"""


def test_the_interpreter_runs_and_traces_a_programs_kernels_in_order(
    simulator, monkeypatch, tmp_path
):
    monkeypatch.setenv("PTODSL_TRACE", str(tmp_path / "trace"))
    compiled = ptodsl.compile(TWO_KERNELS, name="two.pto")
    assert len(compiled.program.calls) == 2
    torch.manual_seed(0)
    model = answer_model(compiled, "two.pto")()
    x = torch.randn(2, 2, 4, 4, 4)
    expected = torch.softmax(model.conv(x), dim=1)
    torch.testing.assert_close(model(x).detach(), expected.detach(), rtol=1e-4, atol=1e-5)
    launches = sorted(p.name for p in (tmp_path / "trace").iterdir())
    assert launches == ["launch_0", "launch_1"]  # the convolution's, then the softmax's


def test_an_unknown_cost_mode_is_an_error(simulator, monkeypatch):
    model = answer_model(ptodsl.compile(SMALL, name="small.pto"), "small.pto")()
    monkeypatch.setenv("PTODSL_SIM", "fast")
    with pytest.raises(ValueError, match="PTODSL_SIM='fast'"):
        model(torch.randn(16, 64))


def test_interpret_mode_is_asked_for_where_the_run_mode_names_an_npu(simulator, monkeypatch):
    monkeypatch.setenv("AIKG_PYPTO_RUN_MODE", "0")
    monkeypatch.setenv("PTODSL_INTERPRET", "1")
    model = answer_model(ptodsl.compile(SMALL, name="small.pto"), "small.pto")()
    x = torch.randn(16, 64)
    assert torch.allclose(model(x), torch.exp(x - 1.0), rtol=1e-5, atol=1e-6)


# Launches in flight (PTODSL_LAUNCHES_IN_FLIGHT): the order `_Launches` keeps, with stand-ins
# for the prepared runs (their workers are pypto's; `tests/test_launches.py` runs real ones).


class StandIn:
    """A prepared launch whose run returns `values` (after `wait()`, when given), or raises
    `error`."""

    def __init__(self, values, wait=None, error=None):
        self.values, self.wait, self.error = values, wait, error
        self.began = threading.Event()

    def run(self):
        self.began.set()
        if self.wait is not None:
            self.wait()
        if self.error is not None:
            raise self.error
        return SimRun(self.values, 1.0, 1, (), "graph")


def test_launches_in_flight_run_at_once():
    launches = _Launches()
    y = torch.zeros(4, 8)
    both = threading.Barrier(2, timeout=10)  # neither run returns before the other began
    for rows, value in ((y[:2], 1.0), (y[2:], 2.0)):
        launches.wait_for((rows,), 2)
        launches.start(StandIn([torch.full((2, 8), value)], wait=both.wait), (rows,), 2)
    assert len(launches.running) == 2
    launches.finish_all()
    assert torch.equal(y, torch.cat([torch.ones(2, 8), torch.full((2, 8), 2.0)]))


def test_launches_in_flight_start_only_while_their_memory_fits_together(monkeypatch):
    """Two launches may run at once, but their estimates do not fit beside each other: the
    second starts when the first has ended (the executor's memory gate, as for checks)."""
    monkeypatch.setattr(memory, "budget", lambda: 10 * memory.GIB)
    launches = _Launches()
    y = torch.zeros(4, 8)
    gate = threading.Event()
    first = StandIn([torch.ones(2, 8)], wait=lambda: gate.wait(10))
    second = StandIn([torch.full((2, 8), 2.0)])
    launches.start(first, (y[:2],), 2, 6 * memory.GIB)
    launches.start(second, (y[2:],), 2, 6 * memory.GIB)
    assert first.began.wait(10)
    assert not second.began.wait(1.0)
    gate.set()
    launches.finish_all()
    assert second.began.is_set()
    assert torch.equal(y, torch.cat([torch.ones(2, 8), torch.full((2, 8), 2.0)]))


def test_a_launch_reading_what_a_running_launch_writes_waits_for_its_values():
    launches = _Launches()
    buffer, other = torch.zeros(2, 8), torch.zeros(2, 8)
    gate = threading.Event()
    writer = StandIn([torch.full((2, 8), 7.0)], wait=lambda: gate.wait(10))
    launches.start(writer, (buffer,), 2)
    assert writer.began.wait(10)
    # a launch of other tensors does not wait
    launches.wait_for((other,), 2)
    assert len(launches.running) == 1
    gate.set()
    # a launch reading a view of the buffer starts after the writer's values are written
    launches.wait_for((buffer[1],), 2)
    assert launches.running == []
    assert torch.equal(buffer, torch.full((2, 8), 7.0))


def test_a_launch_waits_for_its_writer_only():
    """A launch that reads what the newer of two running launches writes starts once that
    one has ended, while the older, writing elsewhere, still runs."""
    launches = _Launches()
    older, newer = torch.zeros(2), torch.zeros(2)
    gate = threading.Event()
    launches.start(StandIn([torch.ones(2)], wait=lambda: gate.wait(10)), (older,), 3)
    launches.start(StandIn([torch.full((2,), 5.0)]), (newer,), 3)
    launches.wait_for((newer,), 3)
    assert torch.equal(newer, torch.full((2,), 5.0))
    assert len(launches.running) == 1 and not older.any()
    gate.set()
    launches.finish_all()
    assert torch.equal(older, torch.ones(2))


def test_no_more_launches_than_in_flight_run():
    launches = _Launches()
    outputs = [torch.zeros(1) for _ in range(3)]
    for number, output in enumerate(outputs):
        launches.wait_for((output,), 2)
        launches.start(StandIn([torch.full((1,), float(number + 1))]), (output,), 2)
        assert len(launches.running) <= 2
    # the oldest finished first to make room
    assert outputs[0].item() == 1.0 and len(launches.running) == 2
    launches.finish_all()
    assert [o.item() for o in outputs] == [1.0, 2.0, 3.0]


def test_a_failed_launch_in_flight_raises_when_it_is_waited_for():
    launches = _Launches()
    y = torch.zeros(2)
    launches.start(StandIn([], error=SimulationError("the kernel crashed")), (y[:1],), 2)
    launches.start(StandIn([torch.ones(1)]), (y[1:],), 2)
    with pytest.raises(SimulationError, match="the kernel crashed"):
        launches.finish_all()
    assert launches.running == []


@pytest.mark.parametrize(
    "a, b, shared",
    [
        (lambda t: t[:2], lambda t: t[2:], False),
        (lambda t: t[:3], lambda t: t[2:], True),
        (lambda t: t[1], lambda t: t[1:2].reshape(8), True),
        (lambda t: t, lambda t: torch.zeros(4, 8), False),
        (lambda t: t[:, 0], lambda t: t[2, 1:], True),  # a column spans its rows
        (lambda t: t[:0], lambda t: t, False),
    ],
    ids=["disjoint rows", "overlapping rows", "same row", "other tensor", "column", "empty"],
)
def test_overlaps_is_true_where_two_views_may_share_elements(a, b, shared):
    whole = torch.zeros(4, 8)
    assert overlaps(a(whole), b(whole)) is shared
    assert overlaps(b(whole), a(whole)) is shared
