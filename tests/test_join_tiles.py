"""A join (`cat`) runs under a vector tile whose last axis is whole 32-byte blocks.

pypto 0.2.0 copies a concatenation's operands into its result tile by tile and refuses a
vector tile whose last entry is not a multiple of 32 bytes, whatever the shapes ("CHECK
FAILED: lastDimBytes % BLOCK_SIZE == 0 ... Last dim bytes: 4", operation_impl.cpp's
CheckFwkOpTileShape). A join along the channels of an `[N, C, 1, 1]` value (efficient
channel attention: a global mean, a window over the channels, the channels rolled by a
join) used to get the `[N, C, 1]` tile of its phase and compiled, then failed in SIM
(issue 39). The tiling pass now aligns the last-axis tile of every phase that joins, as it
does for crops and row reductions.
"""

from __future__ import annotations

import pytest
from plan_limits import assert_plan_within_limits

import ptodsl
from ptodsl.checking.check import run_check
from ptodsl.ir import nodes as ir
from ptodsl.ir import ops, verify
from ptodsl.ir.target import PYPTO_0_2_0 as TARGET
from ptodsl.ir.verify import VerifyError
from ptodsl.passes import tiling
from ptodsl.runtime.simulator import SimulationError

# Efficient channel attention with its channels also rolled by one: the mean over the
# spatial axes is [N, C, 1] in the kernel's frame, so the window and the join run on rows
# of one element.
CHANNEL_ATTENTION = """kernel channel_attention
dims N = 2, C = 16, H = 4, W = 4
input x: f32[N, C, H, W]
output y: f32[N, C, H, W]
let p = mean(x, axis=[2, 3], keepdim=true)
let s = window_sum(p, axis=[1], size=[3], stride=[1], padding=[1])
let r = cat([s[:, 1:, :, :], s[:, :1, :, :]], axis=1) + s
y = x * sigmoid(r)
"""

# An [N, C, 1, 1] input joined with a stride-1 window over its channels; the second output
# keeps the spatial axes in the frame, so the [N, C, 1] phase is not merged away.
CHANNEL_JOIN = """kernel channel_join
dims N = 4, C = 16
input x: f32[N, C, 1, 1]
input z: f32[N, C, 4, 4]
output y: f32[N, C, 1, 1]
output q: f32[N, C, 4, 4]
let s = window_sum(x, axis=[1], size=[3], stride=[1], padding=[1])
y = cat([s[:, 1:, :, :], s[:, :1, :, :]], axis=1) + s
q = z * 2.0
"""


def compiled(text: str):
    return ptodsl.compile(text, name="case.pto", tuning=None)


def joining_phases(kernel: ir.Kernel) -> list[ir.Phase]:
    """The vector phases whose statements join values."""
    return [
        phase
        for phase in kernel.schedule.phases
        if phase.window is None
        and any(
            isinstance(node, ir.Op) and ops.lookup(node.op).kind is ops.Kind.CONCAT
            for index in phase.statements
            for node in ir.walk(kernel.body[index].value)
        )
    ]


def last_axis_bytes(phase: ir.Phase) -> int:
    return phase.tile[-1] * 4  # the specs here are f32


@pytest.mark.parametrize("text", [CHANNEL_ATTENTION, CHANNEL_JOIN], ids=["eca", "input"])
def test_a_phase_that_joins_gets_a_32_byte_last_axis_tile(text, monkeypatch):
    spec = compiled(text)
    phases = joining_phases(spec.kernel)
    assert phases, "the join is in a vector phase of its own shape"
    for phase in phases:
        assert phase.shape[-1] == 1, "the join's rows are one element long"
        assert last_axis_bytes(phase) % TARGET.reduce_align_bytes == 0, phase
        assert phase.tile[:-1] == phase.shape[:-1]  # small enough for one tile
    assert_plan_within_limits(spec.plan)
    # The rule before issue 39 (crops of shorter rows and row reductions only) left the join
    # a tile of one 4-byte element per row, the plan pypto refused in SIM: the verifier,
    # which runs after every pass, now refuses it at compile time.
    monkeypatch.setattr(tiling, "_concatenates", lambda kernel, statements: False)
    with pytest.raises(VerifyError, match="a join under a last-axis tile of 4 bytes"):
        compiled(text)


def test_the_old_tile_of_a_join_is_what_pypto_refuses(monkeypatch):
    """The [2, 16, 1] tile of the join's phase is the one pypto's concat rejects (the
    verifier's phase checks set aside, to let the old plan through to PyPTO)."""
    monkeypatch.setattr(tiling, "_concatenates", lambda kernel, statements: False)
    monkeypatch.setattr(verify._Verifier, "phase", lambda self, number, phase: None)
    old = compiled(CHANNEL_ATTENTION)
    assert [last_axis_bytes(phase) for phase in joining_phases(old.kernel)] == [4]
    with pytest.raises(SimulationError, match="Last dim bytes: 4"):
        run_check(old)


@pytest.mark.parametrize("text", [CHANNEL_ATTENTION, CHANNEL_JOIN], ids=["eca", "input"])
def test_a_join_of_one_element_rows_passes_check(text):
    report = run_check(compiled(text))
    assert report.ok, report


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # the channels joined unrolled: each channel reads its own window, not the next's
        ("pypto.view(s, [2, 15, 1], [0, 1, 0])", "pypto.view(s, [2, 15, 1], [0, 0, 0])"),
        # the window's last tap one channel short: a sum of two neighbours
        (
            "pypto.view(_split0_s, [2, 16, 1, 1], [0, 2, 0, 0])",
            "pypto.view(_split0_s, [2, 16, 1, 1], [0, 1, 0, 0])",
        ),
    ],
    ids=["join", "window"],
)
def test_a_wrong_channel_join_fails(old, new, tmp_path):
    spec = compiled(CHANNEL_ATTENTION)
    assert spec.source.count(old) == 1, f"{old!r} is not in the generated module once"
    path = tmp_path / "wrong.py"
    path.write_text(spec.source.replace(old, new), encoding="utf-8")
    try:
        report = run_check(spec, kernel_path=path)
    except SimulationError as error:  # pypto's own verification stopped it: no PASS either
        assert "FAILED" in str(error)
        return
    assert not report.ok
