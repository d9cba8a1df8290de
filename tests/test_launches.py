"""Kernels too big to verify in one launch run in launches along their outputs' axis 0.

The budget is shrunk here so that small kernels split: the plan, the generated `forward` and
the analysis that keeps a kernel whole when an op mixes indices along the axis are checked
without the simulator; a few split kernels, and wrong launch loops, run in pypto SIM.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time

import attrs
import psutil
import pytest
import torch
from conftest import CI_DIMS, EXAMPLE_BY_STEM, EXAMPLES, ROOT, example_dims

import ptodsl
from ptodsl.checking.check import problem_case, run_check, spec_case
from ptodsl.checking.draws import draws, seeded_draw
from ptodsl.checking.error_bounds import evaluate_bounds
from ptodsl.checking.problems import ProblemError
from ptodsl.ir import sim_memory
from ptodsl.ir.target import PYPTO_0_2_0
from ptodsl.passes import launches as launches_pass
from ptodsl.passes.launches import _rows_cut, _shrunk
from ptodsl.runtime.simulator import SimulationError, run_model
from ptodsl.tools.tuning import probe_cost


def compiled(text: str, count: int = 4) -> ptodsl.Compiled:
    """`text` compiled with a budget that `count` launches of it fit with a quarter to spare
    when every tensor is sliced (launches hold two launches' copies at once); fewer do not."""
    whole = ptodsl.compile(text, name="case.pto", tuning=None).lowered.checked
    needed = sim_memory.verification_bytes(whole) - sim_memory.BASE_BYTES
    budget = sim_memory.BASE_BYTES + 2 * needed / count * 1.25
    target = attrs.evolve(PYPTO_0_2_0, verify_memory_budget=budget)
    return ptodsl.compile(text, name="case.pto", target=target, tuning=None)


# The #9 pattern: M sizes both A's rows (sliced) and B's columns (whole to every launch).
TALL = """kernel tall
dims M = 256, N = 16
input A: f32[M, N]
input B: f32[N, M]
output C: f32[M, M]
C = A @ B
"""

SOFTMAX_ROWS = """kernel rows
dims B = 8, D = 256
input x: f32[B, D]
weight w: f32[B, D] = ones
output y: f32[B, D]
output s: f32[B, 1]
y = softmax(x, axis=1) * w
s = sum(x * x, axis=1, keepdim=true)
"""

POOL = """kernel pool
dims N = 4, C = 3, H = 8, W = 8, P = 4
input x: f32[N, C, H, W]
output y: f32[N, C, P, P]
y = window_mean(x, axis=[2, 3], size=2)
"""


def test_a_split_kernel_is_one_launch_and_forward_loops():
    spec = compiled(TALL)
    launches = spec.kernel.launches
    # B, whole in every launch, does not shrink: more launches than halving the rest needs
    assert launches == ptodsl.ir.nodes.Launches(count=4, chunk=64, sliced=("A",))
    assert compiled(SOFTMAX_ROWS).kernel.launches.count == 4
    inputs = {t.name: t.type.shape for t in spec.kernel.inputs}
    assert inputs == {"A": (64, 16), "B": (16, 256)}
    assert spec.kernel.outputs[0].type.shape == (64, 256)
    assert spec.plan["kernels"][0]["launches"] == {
        "count": 4,
        "chunk": 64,
        "sliced": ["A"],
        "channels": None,
        "rows": None,
    }
    assert any(d.startswith("launches: 4 of 64") for d in spec.kernel.decisions)
    assert "for start in range(0, 256, 64):" in spec.source
    assert '_expect("A", A, (256, 16), torch.float32)' in spec.source
    assert "C = torch.empty((256, 256)" in spec.source
    # the reference and the check see the whole kernel
    assert spec.lowered.checked.outputs[0].type.shape == (256, 256)


def test_a_kernel_within_the_budget_stays_whole():
    spec = ptodsl.compile(TALL, name="case.pto", tuning=None)
    assert spec.kernel.launches is None
    assert spec.plan["kernels"][0]["launches"] is None


MIXING = {
    "a reduction over the launch axis": "y = x - mean(x, axis=0, keepdim=true)",
    "a scan along it": "y = cumsum(x, axis=0)",
    "a softmax along it": "y = softmax(x, axis=0)",
    "a flip of it": "y = flip(x, axis=0)",
    "a window along it": "y = window_max(x, axis=[0], size=3, stride=1, padding=1)",
    "a sliced row against a whole column": "y = x * v",
}


@pytest.mark.parametrize("case", sorted(MIXING))
def test_an_op_mixing_indices_of_the_axis_keeps_the_kernel_whole(case):
    text = (
        "kernel k\ndims M = 64, N = 64\ninput x: f32[M, N]\ninput v: f32[N]\n"
        f"output y: f32[M, N]\n{MIXING[case]}\n"
    )
    spec = compiled(text)
    assert spec.kernel.launches is None
    (decision,) = [d for d in spec.kernel.decisions if d.startswith("launches")]
    assert decision.startswith("launches: one, though verification needs")


def test_a_transposed_operand_keeps_the_kernel_whole():
    text = (
        "kernel k\ndims M = 64, K = 32, N = 48\ninput a: f32[K, M]\ninput b: f32[K, N]\n"
        "output c: f32[M, N]\nc = a.T @ b\n"
    )
    assert compiled(text).kernel.launches is None


@pytest.mark.parametrize("text", [TALL, SOFTMAX_ROWS, POOL], ids=["tall", "rows", "pool"])
def test_a_split_kernel_passes_check(text):
    spec = compiled(text)
    assert spec.kernel.launches is not None
    report = run_check(spec)
    assert report.ok, ptodsl.checking.check.format_report(report)


WRONG_LAUNCHES = {
    "the last launch left out": ("range(0, 256, 64)", "range(0, 192, 64)"),
    "every launch reads the first rows": ("_kernel_A[start : start + 64]", "_kernel_A[0:64]"),
    "every launch writes the first rows": ("C[start : start + 64]", "C[0:64]"),
}


def test_a_launched_kernels_cost_is_one_launch_times_the_count(tmp_path):
    """probe_cost simulates one launch of a launched kernel (its worker then holds one
    launch): the cost model times every launch alike, so it equals the forward's sum."""
    spec = compiled(TALL)
    module = tmp_path / "launched.py"
    module.write_text(spec.source, encoding="utf-8")
    every_launch = probe_cost(spec.lowered, module_path=module)  # forward: all four
    assert probe_cost(spec.lowered) == every_launch
    assert every_launch.sim_time_us > 0


CONV = """kernel conv
dims N = 2, C_in = 3, H = 12, W = 12, C_out = 8, H_out = 10, W_out = 10
input x: f32[N, C_in, H, W]
weight conv: conv2d(C_in, C_out, 3, bias=false)
output y: f32[N, C_out, H_out, W_out]
y = conv(x)
"""


def channel_launched(text: str = CONV) -> ptodsl.Compiled:
    """`text` with a budget one sample per launch is just over: each sample then runs in
    launches of output channels."""
    whole = ptodsl.compile(text, name="case.pto", tuning=None).lowered.after("twin_operands")
    per_sample = _shrunk(whole, (whole.inputs[0].name,), 1)
    budget = min(map(sim_memory.verification_bytes, (whole, per_sample))) - 1
    target = attrs.evolve(PYPTO_0_2_0, verify_memory_budget=budget)
    return ptodsl.compile(text, name="case.pto", target=target, tuning=None)


def test_a_convolution_too_big_per_sample_launches_by_output_channels():
    spec = channel_launched()
    launches = spec.kernel.launches
    assert launches.count == 2 and launches.chunk == 1
    assert launches.channels == ptodsl.ir.nodes.ChannelLaunches(
        count=2, chunk=4, inputs=(ptodsl.ir.nodes.ChannelCut("conv_weight", 0, 4),)
    )
    shapes = {t.name: t.type.shape for t in spec.lowered.after("launches").inputs}
    assert shapes == {"x": (1, 3, 12, 12), "conv_weight": (4, 3, 3, 3)}
    assert spec.lowered.after("launches").outputs[0].type.shape == (1, 4, 10, 10)
    assert spec.plan["kernels"][0]["launches"]["channels"] == {
        "count": 2,
        "chunk": 4,
        "inputs": [{"name": "conv_weight", "axis": 0, "chunk": 4}],
    }
    assert "for channel in range(0, 8, 4):" in spec.source
    assert "y[start : start + 1, channel : channel + 4]" in spec.source
    assert "y = torch.empty((2, 8, 10, 10)" in spec.source
    report = run_check(spec)
    assert report.ok, ptodsl.checking.check.format_report(report)


GROUPED = CONV.replace("C_in = 3", "C_in = 4").replace("bias=false", "groups=2, bias=false")

TRANSPOSED = """kernel convt
dims N = 2, C_in = 4, H = 6, W = 6, C_out = 8, H_out = 13, W_out = 13
input x: f32[N, C_in, H, W]
weight conv_t: conv_transpose2d(C_in, C_out, 3, stride=2, bias=false)
output y: f32[N, C_out, H_out, W_out]
y = conv_t(x)
"""

# A stride of 2 spaces the input with zeros in a staging launch; with groups, each group's
# channel launch stages its own input channels.
TRANSPOSED_GROUPED = TRANSPOSED.replace("bias=false", "groups=2, bias=false")


@pytest.mark.parametrize(
    ("text", "parts", "launch_count", "lines"),
    [
        (
            GROUPED,
            [("conv_weight", 0, 4), ("x", 1, 2)],
            4,
            [
                "channel_in = channel // 2",
                "_kernel_x[start : start + 1, channel_in : channel_in + 2]",
            ],
        ),
        (
            TRANSPOSED,
            [("conv_t_weight", 1, 4)],
            4 + 2,  # a staging launch per sample, before its channel launches
            ["_kernel_conv_t_weight[:, channel : channel + 4].reshape(16, 9)"],
        ),
        (
            TRANSPOSED_GROUPED,
            [("conv_t_weight", 0, 2), ("x", 1, 2)],
            4 + 4,  # a staging launch per channel launch: its group's input
            ["_kernel_conv_t_weight[channel_in : channel_in + 2].reshape(8, 9)"],
        ),
    ],
    ids=["grouped", "transposed", "transposed_grouped"],
)
def test_a_grouped_or_transposed_convolution_launches_by_output_channels(
    text, parts, launch_count, lines
):
    """A transposed convolution's weight [C_in, C_out / groups, ...] is cut along its output
    channels; a grouped convolution launches whole groups, each on its input channels."""
    spec = channel_launched(text)
    channels = spec.kernel.launches.channels
    assert channels.count == 2 and channels.chunk == 4
    assert [(c.name, c.axis, c.chunk) for c in channels.inputs] == parts
    assert spec.kernel.launch_count == launch_count
    for line in lines:
        assert line in spec.source
    report = run_check(spec)
    assert report.ok, ptodsl.checking.check.format_report(report)


def test_anything_beside_the_convolution_keeps_its_channels_whole():
    """A bias added after the convolution reads the weights' channels another way: each
    sample stays one launch (over the budget, as the decision says)."""
    text = CONV.replace("bias=false", "bias=true")
    spec = channel_launched(text)
    assert spec.kernel.launches.channels is None


WRONG_CHANNEL_LAUNCHES = {
    "the last channels left out": ("range(0, 8, 4)", "range(0, 4, 4)"),
    "every launch reads the first channels' weights": (
        "_kernel_conv_weight[channel : channel + 4]",
        "_kernel_conv_weight[0:4]",
    ),
    "every launch writes the first channels": (
        "y[start : start + 1, channel : channel + 4]",
        "y[start : start + 1, 0:4]",
    ),
}


WRONG_GROUP_LAUNCHES = {
    "every group's launch reads the first group's input": (
        GROUPED,
        "channel_in = channel // 2",
        "channel_in = 0",
    ),
    "every launch reads the first channels of a transposed weight": (
        TRANSPOSED,
        "_kernel_conv_t_weight[:, channel : channel + 4]",
        "_kernel_conv_t_weight[:, 0:4]",
    ),
    "every group's launch reads the first group's transposed weight": (
        TRANSPOSED_GROUPED,
        "_kernel_conv_t_weight[channel_in : channel_in + 2]",
        "_kernel_conv_t_weight[0:2]",
    ),
}


WRONG_LOOPS = {
    **{case: (lambda: compiled(TALL), *edit) for case, edit in WRONG_LAUNCHES.items()},
    **{case: (channel_launched, *edit) for case, edit in WRONG_CHANNEL_LAUNCHES.items()},
    **{
        case: (functools.partial(channel_launched, text), *edit)
        for case, (text, *edit) in WRONG_GROUP_LAUNCHES.items()
    },
}


@pytest.mark.parametrize("case", sorted(WRONG_LOOPS))
def test_a_wrong_launch_loop_fails_check(tmp_path, case):
    make, old, new = WRONG_LOOPS[case]
    spec = make()
    assert spec.source.count(old) == 1
    path = tmp_path / "wrong.py"
    path.write_text(spec.source.replace(old, new), encoding="utf-8")
    report = run_check(spec, kernel_path=path)
    assert not report.ok
    assert report.outputs[0].mismatched > 0


# Row launches: a sample too big even in launches of one output channel (#68) runs in
# launches of consecutive output rows, each of every channel, reading the whole sample.
ONE_CHANNEL = CONV.replace("C_out = 8", "C_out = 1")
# spaced by a staging launch per sample; 15 output rows
TRANSPOSED_ONE_CHANNEL = (
    TRANSPOSED.replace("C_out = 8", "C_out = 1")
    .replace("H = 6", "H = 7")
    .replace("H_out = 13", "H_out = 15")
)
TRANSPOSED_3D = """kernel convt3
dims N = 2, C_in = 3, D = 4, H = 5, W = 6, C_out = 4, D_out = 6, H_out = 7, W_out = 8
input x: f32[N, C_in, D, H, W]
weight conv_t: conv_transpose3d(C_in, C_out, 3, bias=false)
output y: f32[N, C_out, D_out, H_out, W_out]
y = conv_t(x)
"""


def row_launched(text: str = ONE_CHANNEL, rows: int = 5) -> ptodsl.Compiled:
    """`text` with a budget that launches of `rows` output rows of one sample just fit."""
    whole = ptodsl.compile(text, name="case.pto", tuning=None).lowered.after("twin_operands")
    per_sample = _shrunk(whole, (whole.inputs[0].name,), 1)
    budget = sim_memory.verification_bytes(_rows_cut(per_sample, rows, "first_row"))
    target = attrs.evolve(PYPTO_0_2_0, verify_memory_budget=budget)
    return ptodsl.compile(text, name="case.pto", target=target, tuning=None)


@pytest.fixture
def no_channel_launches(monkeypatch):
    """Channel launches that never fit: a convolution of several output channels then runs
    in row launches, as #68's does at full shape."""
    monkeypatch.setattr(launches_pass, "_split_channels", lambda block, fits, memory: block)


@pytest.mark.parametrize(
    ("text", "rows", "launch_count", "lines"),
    [
        (
            ONE_CHANNEL,
            2,
            2 * 5,
            [
                "def _make_conv_kernel(first_row):",
                "_rows_y = torch.empty((5, 1, 1, 2, 10), dtype=torch.float32",
                "for row in range(0, 10, 2):",
                "_rows_y[row // 2].reshape(1, 1, 2, 10),",
                "_sample_y = _settled(_rows_y).permute(1, 2, 0, 3, 4)",
                "y[start : start + 1] = _sample_y.reshape(1, 1, 10, 10)",
            ],
        ),
        (
            TRANSPOSED_ONE_CHANNEL,
            3,
            2 * 5 + 2,  # a staging launch per sample, before its row launches
            ["for row in range(0, 15, 3):", "(row,),"],
        ),
    ],
    ids=["conv", "transposed"],
)
def test_a_convolution_too_big_per_output_channel_launches_by_output_rows(
    text, rows, launch_count, lines
):
    spec = row_launched(text, rows)
    launches = spec.kernel.launches
    assert launches.count == 2 and launches.channels is None
    extent = spec.kernel.outputs[0].declared_shape[2] * launches.rows.count
    assert launches.rows == ptodsl.ir.nodes.RowLaunches(count=extent // rows, chunk=rows)
    assert spec.kernel.launch_count == launch_count
    assert f"each {launches.rows.count} of {rows} output rows" in spec.kernel.decisions[-1]
    assert spec.plan["kernels"][0]["launches"]["rows"] == {
        "count": launches.rows.count,
        "chunk": rows,
        "variable": "first_row",
    }
    for line in lines:
        assert line in spec.source
    report = run_check(spec)
    assert report.ok, ptodsl.checking.check.format_report(report)


def test_a_convolution_down_to_one_channel_per_launch_launches_by_output_rows():
    """The multiply-add cap leaves launches of one output channel each (#66's 1024): each an
    M = 1 matmul over the whole sample's stacked taps. Row launches of every channel fit the
    memory budget, and take their place (cut for memory only)."""
    one_channel_of_macs = 100 * 27  # a channel's 10 x 10 outputs of 3 channels x 9 taps
    target = attrs.evolve(PYPTO_0_2_0, max_conv_macs_per_launch=one_channel_of_macs)
    spec = ptodsl.compile(CONV, name="case.pto", target=target, tuning=None)
    launches = spec.kernel.launches
    assert launches.channels is None
    assert launches.rows == ptodsl.ir.nodes.RowLaunches(count=2, chunk=5)
    assert "(row launches are cut for memory only)" in spec.kernel.decisions[-1]
    report = run_check(spec)
    assert report.ok, ptodsl.checking.check.format_report(report)


@pytest.mark.parametrize("text", [CONV, TRANSPOSED_3D], ids=["conv", "transposed_3d"])
def test_row_launches_of_several_channels_pass_check(no_channel_launches, text):
    """Every channel's rows in one launch, joined per sample into the output's channels (a
    3-D convolution's kernel sees the batch and channels as one axis)."""
    spec = row_launched(text, 2)
    assert spec.kernel.launches.rows.chunk == 2
    report = run_check(spec)
    assert report.ok, ptodsl.checking.check.format_report(report)


# Each is a `forward` or kernel a row launch could wrongly get: (old, new, replace every).
WRONG_ROW_LAUNCHES = {
    "every launch views the first rows": ("offset + first_row", "offset", True),
    "every launch's kernel built for row 0": ("(row,),", "(0,),", False),
    "every launch one row further": ("(row,),", "(row + 1,),", False),
    "every launch writes the first launch's rows": ("_rows_y[row // 2]", "_rows_y[0]", False),
    "the last launch left out": ("range(0, 10, 2)", "range(0, 8, 2)", False),
    "the launches' rows joined channel-major": (
        ".permute(1, 2, 0, 3, 4)",
        ".permute(1, 0, 2, 3, 4)",
        False,
    ),
}


@pytest.mark.parametrize("case", sorted(WRONG_ROW_LAUNCHES))
def test_a_wrong_row_launch_fails_check(tmp_path, no_channel_launches, case):
    old, new, every = WRONG_ROW_LAUNCHES[case]
    spec = row_launched(CONV, 2)
    assert spec.source.count(old) >= 1 if every else spec.source.count(old) == 1
    path = tmp_path / "wrong.py"
    path.write_text(spec.source.replace(old, new), encoding="utf-8")
    report = run_check(spec, kernel_path=path)
    assert not report.ok


# the draws every check runs (`ptodsl.checking.draws`): the seeded one, negative and small
DRAWS = sum(draw.always for draw in draws(0))


@pytest.fixture
def worker_per_launch(monkeypatch):
    """`check` runs each launch in a worker of its own, as it does when all launches in one
    worker would exceed the verification budget (full-shape #54, #59). It does so with graph
    verification only (`passes="graph"` below: small kernels would get per-pass
    verification); the runs' (launches, launches in flight) are recorded, to be checked: one
    per draw of the check (these specs have nothing for the optional draws to reach)."""
    monkeypatch.setattr(sim_memory, "worker_per_launch", lambda program: True)
    runs = []

    def recording(*args, **kwargs):
        runs.append((kwargs["launches"], kwargs["launches_in_flight"]))
        return run_model(*args, **kwargs)

    monkeypatch.setattr(ptodsl.checking.check, "run_model", recording)
    return runs


def test_a_worker_per_launch_computes_what_one_worker_does(worker_per_launch):
    """One launch at a time and two at a time (`launches_in_flight`) give the values and
    every launch's simulated time: probe_cost's is one launch's times their count."""
    spec = compiled(TALL)
    one, two = (run_check(spec, passes="graph", launch_jobs=jobs) for jobs in (1, 2))
    assert worker_per_launch == [(4, 1)] * DRAWS + [(4, 2)] * DRAWS
    every_launch = probe_cost(spec.lowered).sim_time_us
    for report in (one, two):
        assert report.ok, ptodsl.checking.check.format_report(report)
        assert report.sim_time_us == pytest.approx(every_launch)
    assert one.outputs[0].max_abs_error == two.outputs[0].max_abs_error


@pytest.mark.parametrize("case", sorted(WRONG_LAUNCHES))
def test_a_wrong_launch_loop_fails_check_in_a_worker_per_launch(tmp_path, worker_per_launch, case):
    """Two launches at a time: one at a time runs the same workers, in order."""
    spec = compiled(TALL)
    old, new = WRONG_LAUNCHES[case]
    path = tmp_path / "wrong.py"
    path.write_text(spec.source.replace(old, new), encoding="utf-8")
    report = run_check(spec, kernel_path=path, passes="graph", launch_jobs=2)
    assert worker_per_launch == [(4, 2)]  # the seeded draw fails: no other draw runs
    assert not report.ok
    assert report.outputs[0].mismatched > 0


def test_a_staged_convolution_in_flight_reads_each_samples_padded_input(worker_per_launch):
    """Each sample's staging launch writes the buffer its channel launches read: two at a
    time, a channel launch waits for its staging launch, the next staging launch for none
    (the launches before it read the buffer as it was when they started)."""
    spec = channel_launched(
        CONV.replace("bias=false", "padding=1, bias=false").replace(
            "H_out = 10, W_out = 10", "H_out = 12, W_out = 12"
        )
    )
    assert spec.kernel.program.staging and spec.kernel.launch_count == 6
    report = run_check(spec, passes="graph", launch_jobs=2)
    assert worker_per_launch == [(6, 2)] * DRAWS
    assert report.ok, ptodsl.checking.check.format_report(report)


def test_each_launchs_worker_has_the_timeout(worker_per_launch):
    # 8 launches of 512 rows, each 0.3 to 1.5 s of simulation (measured at stop 59; 5 s
    # before), never within 0.25 s. The model's worker has its own start beside its
    # launches' timeouts (simulator.MODEL_START_S): a launch's timeout is what ends it.
    larger = TALL.replace("M = 256, N = 16", "M = 4096, N = 1024")
    with pytest.raises(SimulationError, match=r"did not finish within 0\.25 s"):
        run_check(compiled(larger), passes="graph", timeout=0.25)
    assert worker_per_launch == [(8, 1)]  # the seeded draw's, which timed out


def test_check_runs_a_worker_per_launch_only_where_one_worker_would_hold_too_much():
    """#54 at full shape (64 launches) needs workers of their own; at CI dims its staging
    and kernel launches share one."""
    spec = ROOT / "examples" / "kernelbench" / "54_conv3d_square_input_square_kernel.pto"
    full = ptodsl.compile(spec, tuning=None).program
    assert full.launch_count == 64
    assert sim_memory.worker_per_launch(full)
    scaled = ptodsl.compile(spec, dims=CI_DIMS[spec.stem], tuning=None).program
    assert not sim_memory.worker_per_launch(scaled)


def test_the_model_worker_hears_how_many_launches_may_run_at_once(tmp_path):
    from ptodsl.runtime.simulator import LaunchWorkers, _worker_environment

    env = _worker_environment(tmp_path, LaunchWorkers(1.5, 2, 3 << 30))
    assert env["PTODSL_LAUNCHES_IN_FLIGHT"] == "2"
    assert env["PTODSL_LAUNCH_TIMEOUT"] == "1.5"
    assert env["PTODSL_LAUNCH_MEMORY"] == str(3 << 30)
    assert env["PTODSL_SIM"] == "interpret"


def test_row_launches_in_flight_join_each_samples_rows_once_written(tmp_path, worker_per_launch):
    """Two row launches at a time: `forward` joins a sample's rows only after the launches
    that write them have ended (`_settled`); joined before, they are stale."""
    spec = row_launched(TRANSPOSED_ONE_CHANNEL, 3)
    assert spec.kernel.launch_count == 12
    report = run_check(spec, passes="graph", launch_jobs=2)
    assert report.ok, ptodsl.checking.check.format_report(report)
    path = tmp_path / "unsettled.py"
    path.write_text(spec.source.replace("_settled(_rows_y)", "_rows_y"), encoding="utf-8")
    report = run_check(spec, kernel_path=path, passes="graph", launch_jobs=2)
    assert worker_per_launch == [(12, 2)] * (DRAWS + 1)  # every draw, then the failing one
    assert not report.ok
    assert report.outputs[0].mismatched > 0


def test_a_launched_kernels_error_scales_are_evaluated_a_launch_at_a_time():
    """The spec's own float64 evaluation runs on one launch's samples at a time (a
    convolution's, whole, held 20.7 GB at #68's full shape): the scales are those of the
    whole evaluation."""
    spec = compiled(TALL)
    assert spec.kernel.launches.count == 4
    case = spec_case(spec, seeded_draw(0))
    whole, _ = evaluate_bounds(spec.lowered.checked, case.inputs, {})
    assert torch.equal(case.scales[0], whole[0].scale)


def test_a_problem_differing_in_the_last_launchs_samples_is_rejected_there(tmp_path):
    problem = tmp_path / "tall.py"
    problem.write_text(
        "import torch\n\n\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, A, B):\n"
        "        C = A @ B\n"
        "        C[-1, -1] += 1.0\n"
        "        return C\n\n\n"
        "def get_inputs():\n"
        "    return [torch.randn(256, 16), torch.randn(16, 256)]\n\n\n"
        "def get_init_inputs():\n"
        "    return []\n",
        encoding="utf-8",
    )
    with pytest.raises(ProblemError, match=r"computes something else .* at \[255, 255\]"):
        problem_case(compiled(TALL), problem, seeded_draw(0))


def test_a_checks_launch_workers_are_forked_by_the_commands_zygote(worker_per_launch):
    """The process tree of a check with launches in flight is three deep: this process, its
    zygote, and every worker (the launches' too: a worker asks its zygote for them, where
    it once started a zygote of its own, five levels in all). ptodsl's processes are the
    ones that lead a session of their own (a zygote, a worker); what pypto's compiler runs
    hangs below a worker, in its session. Sampled every 20 ms."""
    spec = compiled(TALL)
    depths: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:
        me = psutil.Process()
        while not done.is_set():
            for process in me.children(recursive=True):
                with contextlib.suppress(psutil.Error, ProcessLookupError):
                    if os.getsid(process.pid) == process.pid:
                        depths[process.pid] = _depth_below(process, me.pid)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        report = run_check(spec, passes="graph", launch_jobs=2)
    finally:
        done.set()
        sampler.join()
    assert report.ok, ptodsl.checking.check.format_report(report)
    assert worker_per_launch == [(4, 2)] * DRAWS
    assert max(depths.values()) == 2  # below this process: its zygote, then the workers
    assert sum(depth == 2 for depth in depths.values()) >= 4  # the launches' among them


def _depth_below(process: psutil.Process, ancestor: int) -> int:
    depth = 0
    while process.pid != ancestor:
        process = process.parent()
        depth += 1
    return depth


def test_a_launch_is_weighed_with_the_loops_planned_for_it():
    # #44's MLP at batch 64 in one launch: its estimate as it stands (4 loop iterations
    # assumed) fits the budget; with the 9 iterations the loops pass plans, it is twice over
    text = EXAMPLE_BY_STEM["44_MiniGPTBlock"].read_text()
    budget = PYPTO_0_2_0.verify_memory_budget
    unbounded = attrs.evolve(PYPTO_0_2_0, verify_memory_budget=float("inf"))
    whole = ptodsl.compile(text, dims={"B": 64}, target=unbounded, tuning=None)
    (one,) = (k for k in whole.program.kernels if k.name == "gelu")
    assert one.launches is None and sim_memory.iterations(one) > sim_memory.ASSUMED_ITERATIONS
    assert sim_memory.verification_bytes(one) > 2 * budget
    unplanned = attrs.evolve(one, schedule=None)
    assert sim_memory.verification_bytes(unplanned) <= budget
    spec = ptodsl.compile(text, dims={"B": 64}, tuning=None)
    (gelu,) = (k for k in spec.program.kernels if k.name == "gelu")
    assert gelu.launches is not None and gelu.launches.count == 4
    assert sim_memory.verification_bytes(gelu) <= budget


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_planned_launch_fits_the_budget_or_says_why_not(path):
    spec = ptodsl.compile(path.read_text(), name=path.name, dims=example_dims(path), tuning=None)
    budget = PYPTO_0_2_0.verify_memory_budget
    for kernel in spec.program.kernels:
        over = any("still over" in d or "launches: one, though" in d for d in kernel.decisions)
        assert over or sim_memory.verification_bytes(kernel) <= budget, kernel.name


# A launched kernel reading an intermediate that its writer, one launch, stored in its
# kernel shape ([B * T, C]): the launches cut the intermediate along its declared samples.
NORM_THEN_PROJECT = """kernel norm_then_project
dims B = 4, T = 8, C = 32, D = 512
input x: f32[B, T, C]
weight proj: linear(C, D)
output y: f32[B, T, D]
let h = x - mean(x, axis=2, keepdim=true)
y = relu(proj(h))
"""


def test_launches_cut_an_intermediate_along_its_declared_samples():
    whole = ptodsl.compile(NORM_THEN_PROJECT, name="case.pto", tuning=None)
    writer = whole.program.kernels[0]
    budget = 2 * sim_memory.verification_bytes(writer) - sim_memory.BASE_BYTES
    target = attrs.evolve(PYPTO_0_2_0, verify_memory_budget=budget)
    spec = ptodsl.compile(NORM_THEN_PROJECT, name="case.pto", target=target, tuning=None)
    writer, reader = spec.program.kernels
    assert writer.launches is None and reader.launches is not None
    assert "h = torch.empty((32, 32)" in spec.source
    assert "_kernel_h = h.contiguous().reshape(4, 8, 32)" in spec.source
    # before: `h[start : start + 1].reshape(8, 32)` cut one row of [32, 32], and torch
    # refused the reshape ("shape '[8, 32]' is invalid for input of size 32")
    report = run_check(spec)
    assert report.ok, report.to_json()
