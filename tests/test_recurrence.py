"""Time loops (`for t in range(T)` ... `end`): the step is one spec, lowered once and run by
`forward` once per step; each step reads its slice of a sequence, carries values to the
next, writes its slice of an output; the spec's body holds the steps written out. Checked
in pypto's SIM against torch, and wrong loops shown rejected."""

from __future__ import annotations

import attrs
import pytest

import ptodsl
from ptodsl.checking.check import run_check
from ptodsl.checking.problems import ProblemError
from ptodsl.ir import nodes as ir
from ptodsl.ir.forward import forward_faults

# An Elman RNN with a bias input read whole by every step, a let of the step's own, every
# step's output and the last hidden state.
ELMAN = """kernel elman
dims T = 5, B = 2, I = 8, H = 16
input x: f32[T, B, I]
input h0: f32[B, H]
input b: f32[H]
weight w_ih: f32[H, I] = randn
weight w_hh: f32[H, H] = randn
output y: f32[T, B, H]
output h_n: f32[B, H]
let h = h0
for t in range(T)
    let pre = x[t] @ w_ih.T + h @ w_hh.T
    h = tanh(pre + b)
    y[t] = h * 0.5
end
h_n = h
"""

ELMAN_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w_ih = nn.Parameter(torch.randn(16, 8))
        self.w_hh = nn.Parameter(torch.randn(16, 16))

    def forward(self, x, h0, b):
        h = h0
        outputs = []
        for t in range(x.shape[0]):
            h = torch.tanh(x[t] @ self.w_ih.T + h @ self.w_hh.T + b)
            outputs.append(h * 0.5)
        return torch.stack(outputs), h


def get_inputs():
    return [torch.randn(5, 2, 8), torch.randn(2, 16), torch.randn(16)]


def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def elman():
    return ptodsl.compile(ELMAN, name="elman.pto")


def test_a_time_loop_is_one_step_kernel_run_per_step(elman):
    loop = elman.lowered.checked.recurrence
    assert loop.count == 5
    assert loop.sliced == (("x_t", "x"),)
    assert loop.carried == (("h", "h_next", "h0"),)
    assert loop.stacked == (("y_t", "y"),)
    assert loop.final == (("h_n", "h"),)
    # lowered once: the step's kernels, never five copies, launched once per step
    assert {k.name for k in elman.program.kernels} == {"elman_step"}
    assert elman.program.launch_count == 5 * elman.program.step.launch_count
    assert not elman.program.single_call  # pypto's per-pass goldens are one launch's
    assert "for t in range(0, 5, 1):" in elman.source
    # the spec's body holds every step written out (what the bounds and draws read)
    lets = [s.name for s in elman.lowered.checked.body if isinstance(s, ir.Let)]
    assert [n for n in lets if n.endswith("_h")] == [f"_step{i}_h" for i in range(5)]


def test_a_time_loop_is_torchs_loop_in_sim(elman, tmp_path):
    problem = tmp_path / "elman.py"
    problem.write_text(ELMAN_PROBLEM, encoding="utf-8")
    report = run_check(elman, against=problem)
    assert report.ok, report.to_json()


def test_a_loop_one_step_short_is_not_the_problem(tmp_path):
    """Written one step short (and its output one step shorter, as it must be), the spec
    returns another shape than the problem's Model: `check` refuses it."""
    problem = tmp_path / "elman.py"
    problem.write_text(ELMAN_PROBLEM, encoding="utf-8")
    short = ELMAN.replace("range(T)", "range(T - 1)").replace("y: f32[T, B, H]", "y: f32[4, B, H]")
    compiled = ptodsl.compile(short, name="short.pto")
    with pytest.raises(ProblemError, match=r"returns \[5, 2, 16\], the spec declares \[4"):
        run_check(compiled, against=problem, passes="graph")


# Wrong forwards a compiler of time loops could emit, each a mutation of the right one:
# a step left out, the carried value never carried, each step reading the step before.
WRONG_LOOPS = {
    "one step short": ("range(0, 5, 1)", "range(0, 4, 1)"),
    "the hidden state not carried": ("h = h_next.reshape(2, 16)", "h = h0"),
    "steps read one behind": ("x_t = x[t]", "x_t = x[max(t - 1, 0)]"),
}


@pytest.mark.parametrize("case", sorted(WRONG_LOOPS))
def test_check_rejects_a_time_loop_built_wrong(case, elman, tmp_path):
    right, wrong = WRONG_LOOPS[case]
    assert elman.source.count(right) == 1
    module = tmp_path / "wrong_loop.py"
    module.write_text(elman.source.replace(right, wrong), encoding="utf-8")
    report = run_check(elman, kernel_path=module, passes="graph")
    assert not report.ok
    assert any(output["mismatched"] for output in report.to_json()["outputs"])


def test_the_forward_verifier_catches_a_loop_that_writes_the_wrong_output(elman):
    program = elman.program
    loop = program.spec.recurrence
    spec = attrs.evolve(program.spec, recurrence=attrs.evolve(loop, count=4))
    assert any(
        "not one step of" in fault for fault in forward_faults(attrs.evolve(program, spec=spec))
    )
    unfinished = attrs.evolve(loop, final=())
    spec = attrs.evolve(program.spec, recurrence=unfinished)
    assert any(
        "the loop writes outputs" in f for f in forward_faults(attrs.evolve(program, spec=spec))
    )


# Gated cells as torch's nn.LSTM and nn.GRU compute them (gates in torch's order: i, f, g,
# o and r, z, n), written out over the steps, with the weights of one layer.
GATED = {
    "lstm": (
        """kernel lstm
dims T = 4, B = 2, I = 8, H = 16
input x: f32[T, B, I]
input h0: f32[B, H]
input c0: f32[B, H]
weight w_ih: f32[(4 * H), I] = randn
weight w_hh: f32[(4 * H), H] = randn
weight b_ih: f32[(4 * H)] = randn
output y: f32[T, B, H]
output c_n: f32[B, H]
let h = h0
let c = c0
for t in range(T)
    let i, f, g, o = (x[t] @ w_ih.T + b_ih + h @ w_hh.T).split(H, axis=1)
    c = sigmoid(f) * c + sigmoid(i) * tanh(g)
    h = sigmoid(o) * tanh(c)
    y[t] = h
end
c_n = c
""",
        """    def forward(self, x, h0, c0):
        h, c, outputs = h0, c0, []
        for t in range(x.shape[0]):
            gates = x[t] @ self.w_ih.T + self.b_ih + h @ self.w_hh.T
            i, f, g, o = gates.chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outputs.append(h)
        return torch.stack(outputs), c
""",
        "[torch.randn(4, 2, 8), torch.randn(2, 16), torch.randn(2, 16)]",
    ),
    "gru": (
        """kernel gru
dims T = 4, B = 2, I = 8, H = 16
input x: f32[T, B, I]
input h0: f32[B, H]
weight w_ih: f32[(3 * H), I] = randn
weight w_hh: f32[(3 * H), H] = randn
weight b_ih: f32[(3 * H)] = randn
output y: f32[T, B, H]
let h = h0
for t in range(T)
    let ir, iz, i_n = (x[t] @ w_ih.T + b_ih).split(H, axis=1)
    let hr, hz, hn = (h @ w_hh.T).split(H, axis=1)
    let r = sigmoid(ir + hr)
    let z = sigmoid(iz + hz)
    h = (1.0 - z) * tanh(i_n + r * hn) + z * h
    y[t] = h
end
""",
        """    def forward(self, x, h0):
        h, outputs = h0, []
        for t in range(x.shape[0]):
            ir, iz, i_n = (x[t] @ self.w_ih.T + self.b_ih).chunk(3, dim=1)
            hr, hz, hn = (h @ self.w_hh.T).chunk(3, dim=1)
            r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
            h = (1 - z) * torch.tanh(i_n + r * hn) + z * h
            outputs.append(h)
        return torch.stack(outputs)
""",
        "[torch.randn(4, 2, 8), torch.randn(2, 16)]",
    ),
}


def _gated_problem(cell: str) -> str:
    _, forward, inputs = GATED[cell]
    gates = 4 if cell == "lstm" else 3
    return f"""import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w_ih = nn.Parameter(torch.randn({gates} * 16, 8))
        self.w_hh = nn.Parameter(torch.randn({gates} * 16, 16))
        self.b_ih = nn.Parameter(torch.randn({gates} * 16))

{forward}

def get_inputs():
    return {inputs}


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("cell", sorted(GATED))
def test_gated_cells_over_time_are_torchs(cell, tmp_path):
    """LSTM and GRU gates: the gates split from the products, two carried values (the
    LSTM's cell state output after the last step), in SIM against torch."""
    problem = tmp_path / f"{cell}.py"
    problem.write_text(_gated_problem(cell), encoding="utf-8")
    compiled = ptodsl.compile(GATED[cell][0], name=f"{cell}.pto")
    report = run_check(compiled, against=problem)
    assert report.ok, report.to_json()


def test_an_integer_index_reads_one_position_and_drops_its_axis():
    """`x[-1]`, torch's integer index (the last step of a sequence), outside any loop."""
    spec = (
        "kernel last\ndims T = 3, B = 2, N = 8\ninput x: f32[T, B, N]\noutput y: f32[B, N]\n"
        "y = x[-1] * 2.0 + x[0]\n"
    )
    compiled = ptodsl.compile(spec, name="last.pto")
    report = run_check(compiled)
    assert report.ok, report.to_json()


TWICE = """kernel twice
dims T = 3, B = 2, N = 8
input x: f32[T, B, N]
input h0: f32[B, N]
output y: f32[T, B, N]
let h = h0
for t in range(T)
    h = tanh(x[t] + h)
    h = h * 0.5
    y[t] = h
end
"""

TWICE_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, h0):
        h, outputs = h0, []
        for t in range(x.shape[0]):
            h = torch.tanh(x[t] + h)
            h = h * 0.5
            outputs.append(h)
        return torch.stack(outputs)


def get_inputs():
    return [torch.randn(3, 2, 8), torch.randn(2, 8)]


def get_init_inputs():
    return []
"""


def test_a_value_assigned_twice_in_a_step_is_read_as_its_latest(tmp_path):
    problem = tmp_path / "twice.py"
    problem.write_text(TWICE_PROBLEM, encoding="utf-8")
    report = run_check(ptodsl.compile(TWICE, name="twice.pto"), against=problem)
    assert report.ok, report.to_json()
