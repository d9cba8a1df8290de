"""Convolutions (issue 18): `conv` and `conv_transpose` in pypto SIM at small shapes, one
feature per case; the wrong kernels each feature could produce, which `check` must reject;
the plan's invariants at every KernelBench convolution's full shape.

The 34 KernelBench convolutions themselves are checked against their problem files in
test_kernelbench.py (at CI_DIMS); these cases reach what those do not: blocks of rows with
a tail (a target with a small block), a bias, a convolution followed by other work, and
the staging launch that pads the input (left out, or padding the wrong sample)."""

from __future__ import annotations

import attrs
import pytest
from conftest import EXAMPLES
from plan_limits import assert_plan_within_limits
from test_check_rejects import wrong_kernel

import ptodsl
from ptodsl.checking.check import run_check
from ptodsl.frontend.diagnostics import Source
from ptodsl.ir import nodes as ir
from ptodsl.ir.target import PYPTO_0_2_0
from ptodsl.pipeline import lower

# Blocks of two output rows of PADDED_GROUPED (its taps stack K = 2 channels x 9 taps, over
# 12 columns a row): a few rows per block and a tail, at small shapes.
SMALL_BLOCKS = attrs.evolve(PYPTO_0_2_0, conv_block_elements=18 * 12 * 2)

PADDED_GROUPED = """kernel conv_block
dims N = 2, C = 4, H = 9, W = 10, CO = 4, HO = 7, WO = 12
input x: f32[N, C, H, W]
weight w: f32[CO, 2, 3, 3] = randn
output y: f32[N, CO, HO, WO]
y = conv(x, w, padding=[1, 2], dilation=[2, 1], groups=2)
"""
TRANSPOSED = """kernel conv_t_block
dims N = 2, C = 4, H = 5, W = 6, CO = 4, HO = 12, WO = 14
input x: f32[N, C, H, W]
weight w: f32[C, 2, 3, 3] = randn
output y: f32[N, CO, HO, WO]
y = conv_transpose(x, w, stride=2, output_padding=1, groups=2)
"""
STRIDED = """kernel conv_s_block
dims N = 2, C = 3, L = 40, CO = 8, LO = 11
input x: f32[N, C, L]
weight w: f32[CO, C, 3] = randn
output y: f32[N, CO, LO]
y = conv(x, w, stride=3, dilation=4)
"""
BATCH_NORM_3D = """kernel bn3d
dims N = 1, C = 3, D = 6, H = 8, W = 8, CO = 4, DO = 4, HO = 6, WO = 6
input x: f32[N, C, D, H, W]
weight conv: conv3d(C, CO, 3, bias=false)
output y: f32[N, CO, DO, HO, WO]
let a = conv(x)
y = a - mean(a, axis=[0, 2, 3, 4], keepdim=true)
"""

CASES = {
    "padded_dilated_grouped_rows_with_a_tail": (PADDED_GROUPED, SMALL_BLOCKS),
    "transposed_strided_grouped_output_padding": (TRANSPOSED, PYPTO_0_2_0),
    "strided_dilated_1d": (STRIDED, PYPTO_0_2_0),
    "3d_rows_with_a_tail": (
        """kernel conv3
dims N = 2, C = 3, D = 6, H = 5, W = 7, CO = 4, DO = 4, HO = 5, WO = 5
input x: f32[N, C, D, H, W]
weight w: f32[CO, C, 3, 1, 3] = randn
output y: f32[N, CO, DO, HO, WO]
y = conv(x, w)
""",
        attrs.evolve(PYPTO_0_2_0, conv_block_elements=27 * 25 * 3),
    ),
    "transposed_3d_cropped": (
        """kernel conv_t3
dims N = 2, C = 4, D = 3, H = 4, W = 5, CO = 8, DO = 1, HO = 3, WO = 5
input x: f32[N, C, D, H, W]
weight w: f32[C, 2, 3, 3, 3] = randn
output y: f32[N, CO, DO, HO, WO]
y = conv_transpose(x, w, stride=2, padding=3, groups=4)
""",
        PYPTO_0_2_0,
    ),
    # the module's bias is added per channel; the ReLU after it is a phase of its own
    "module_with_bias_then_relu": (
        """kernel conv_bias_relu
dims N = 2, C = 3, H = 8, W = 9, CO = 5
param kernel_size: int[2] = [3, 5]
input x: f32[N, C, H, W]
weight conv: conv2d(C, CO, kernel_size, padding=[1, 2])
output y: f32[N, CO, H, W]
y = relu(conv(x))
""",
        PYPTO_0_2_0,
    ),
    # a residual: x is the convolution's input (a twin in its declared layout) and summed
    "residual_around_a_convolution": (
        """kernel conv_residual
dims N = 2, C = 4, H = 8, W = 9
input x: f32[N, C, H, W]
weight conv: conv2d(C, C, 3, padding=1)
output y: f32[N, C, H, W]
y = relu(conv(x) + x)
""",
        PYPTO_0_2_0,
    ),
    # BatchNorm3d's batch statistics after a 3-D convolution at batch 1: the convolution
    # merges the batch with the channels (PyPTO has rank 4), and the mean over the batch
    # must keep the merged axis (merge_axes once reduced it, and pypto failed with F21004
    # at expand_clone)
    "batch_norm_3d_statistics_at_batch_1": (BATCH_NORM_3D, PYPTO_0_2_0),
    # and at batch 2 after a 2-D convolution (rank 4: nothing merges with the batch)
    "batch_norm_2d_statistics_at_batch_2": (
        """kernel bn2d
dims N = 2, C = 3, H = 8, W = 8, CO = 4, HO = 6, WO = 6
input x: f32[N, C, H, W]
weight conv: conv2d(C, CO, 3, bias=false)
output y: f32[N, CO, HO, WO]
let a = conv(x)
y = a - mean(a, axis=[0, 2, 3], keepdim=true)
""",
        PYPTO_0_2_0,
    ),
    # a convolution of a convolution: the inner result stored as it is computed
    "depthwise_then_pointwise": (
        """kernel separable
dims N = 2, C = 3, H = 9, W = 8, CO = 6, HO = 7, WO = 6
input x: f32[N, C, H, W]
weight depthwise: conv2d(C, C, 3, groups=3, bias=false)
weight pointwise: conv2d(C, CO, 1, bias=false)
output y: f32[N, CO, HO, WO]
y = pointwise(depthwise(x))
""",
        SMALL_BLOCKS,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_convolution_matches_torch_in_sim(case):
    text, target = CASES[case]
    lower(Source(text, f"{case}.pto"), target=target)  # verified after every pass
    compiled = ptodsl.compile(text, name=f"{case}.pto", target=target)
    assert_plan_within_limits(compiled.plan)
    report = run_check(compiled)
    assert report.ok, report.to_json()


def test_small_blocks_make_a_tail():
    compiled = ptodsl.compile(PADDED_GROUPED, name="case.pto", target=SMALL_BLOCKS)
    (phase,) = compiled.plan["kernels"][0]["phases"]
    assert phase["kind"] == "conv"
    assert phase["rows_loop"] == {"axis": 2, "count": 3, "chunk": 2, "tail": 1}
    assert phase["pad"] == {"front": [1, 8], "back": [1, 8]}  # W padded in 32-byte blocks


MUTANTS = {
    # a tap's view one row off, one column off
    "tap_row_off_by_one": (
        PADDED_GROUPED,
        "[2, 2, 12], [0, offset + 2, 7])",
        "[2, 2, 12], [0, offset + 1, 7])",
    ),
    "tap_column_off": (
        PADDED_GROUPED,
        "[2, 2, 12], [2, offset + 4, 8])",
        "[2, 2, 12], [2, offset + 4, 6])",
    ),
    # group 1's block written over group 0's channels
    "group_over_the_other": (
        PADDED_GROUPED,
        "pypto.assemble(_chunk_part1, [offset_batch, 2, offset, 0], y)",
        "pypto.assemble(_chunk_part1, [offset_batch, 0, offset, 0], y)",
    ),
    # the tail block one row up
    "tail_row_off_by_one": (
        PADDED_GROUPED,
        "pypto.assemble(_tail_part0, [offset_batch, 0, 6, 0], y)",
        "pypto.assemble(_tail_part0, [offset_batch, 0, 5, 0], y)",
    ),
    # a tap's view stacked in the next tap's place too (that tap left out)
    "tap_stacked_twice": (
        PADDED_GROUPED,
        "pypto.assemble(_chunk_col8g1, [0, 8, 0], _chunk_stack1)",
        "pypto.assemble(_chunk_col7g1, [0, 8, 0], _chunk_stack1)",
    ),
    # the padding on one end only
    "padding_at_one_end": (
        PADDED_GROUPED,
        "pypto.concat([pypto.concat([_zeros0_x, _input_x], 1), _zeros0_x], 1)",
        "pypto.concat([pypto.concat([_input_x, _zeros0_x], 1), _zeros0_x], 1)",
    ),
    # the staging launch (the input padded into device memory) left out: the kernel reads
    # whatever the buffer held
    "staging_launch_left_out": (
        PADDED_GROUPED,
        "_launch(_make_conv_block_padded_x_kernel, (), 1, _kernel_x, _padded_x)",
        "pass",
    ),
    # it pads the first sample into every sample's place
    "staging_of_the_first_sample_only": (
        PADDED_GROUPED,
        "pypto.view(x, [1, 4, 9, 10], [offset_batch, 0, 0, 0])",
        "pypto.view(x, [1, 4, 9, 10], [0, 0, 0, 0])",
    ),
    # the kernel reads the first sample's padded input for every sample
    "staged_first_sample_for_every_sample": (
        PADDED_GROUPED,
        "pypto.view(_padded_x, [1, 4, 11, 26], [offset_batch, 0, 0, 0])",
        "pypto.view(_padded_x, [1, 4, 11, 26], [0, 0, 0, 0])",
    ),
    # a transposed convolution's weight [C_in, C_out/groups] read as it is stored (square
    # per group), not exchanged
    "transposed_weight_unexchanged": (
        TRANSPOSED,
        "pypto.transpose(_channelsg0_w, 0, 1)",
        "pypto.clone(_channelsg0_w)",
    ),
    # its kernel not flipped: the weight's first tap times the first tap's input
    "transposed_kernel_unflipped": (
        TRANSPOSED,
        "[2, 12, 14], [0, offset + 2, 8])",
        "[2, 12, 14], [0, offset, 6])",
    ),
    # a depthwise tap's view times another tap's weight column (the vector cores' path)
    "depthwise_weight_of_another_tap": (
        CASES["depthwise_then_pointwise"][0],
        "_chunk_col1g0 * _tap1_depthwise_weight",
        "_chunk_col1g0 * _tap2_depthwise_weight",
    ),
    # a strided tap's outputs from the next column of the split axis
    "strided_column_off": (
        STRIDED,
        "[3, 11, 1], [0, offset + 1, 1])",
        "[3, 11, 1], [0, offset + 1, 2])",
    ),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_a_wrong_convolution_fails(mutant, tmp_path):
    text, old, new, *count = MUTANTS[mutant]
    small = text is PADDED_GROUPED or text is CASES["depthwise_then_pointwise"][0]
    target = SMALL_BLOCKS if small else PYPTO_0_2_0
    compiled = ptodsl.compile(text, name="case.pto", target=target)
    path = wrong_kernel(tmp_path, compiled, old, new, *count)
    report = run_check(compiled, kernel_path=path)
    assert not report.ok
    assert any(output.mismatched > 0 for output in report.outputs), report.to_json()


def test_batch_norm_3d_over_the_wrong_axes_fails(tmp_path):
    """The kernel of the mean over every axis but the batch (across the channels too) is
    not BatchNorm3d's: check must reject it in the simulator."""
    compiled = ptodsl.compile(BATCH_NORM_3D, name="bn3d.pto")
    across = BATCH_NORM_3D.replace("axis=[0, 2, 3, 4]", "axis=[1, 2, 3, 4]")
    wrong = ptodsl.compile(across, name="bn3d.pto")
    path = tmp_path / "wrong.py"
    path.write_text(wrong.source, encoding="utf-8")
    report = run_check(compiled, kernel_path=path)
    assert not report.ok
    assert any(output.mismatched > 0 for output in report.outputs), report.to_json()


BATCH_NORM_STATEMENT = "y = a - mean(a, axis=[0, 2, 3, 4], keepdim=true)"


@pytest.mark.parametrize(
    "statement",
    [
        # BatchNorm3d's statistics at batch 2: the mean over the batch keeps the channels,
        # which the 3-D convolution merges with the batch
        BATCH_NORM_STATEMENT,
        # a running total along the channels at batch 2 would run across the batch
        "y = cumsum(a, axis=1)",
    ],
)
def test_a_3d_convolution_at_batch_2_with_work_along_its_batch_or_channels_is_cut(statement):
    """One kernel would merge the batch and the channels (PyPTO's rank 4), which this work
    keeps apart: the convolution runs in a kernel of its own (passes/partition.py)."""
    text = BATCH_NORM_3D.replace("N = 1", "N = 2").replace(BATCH_NORM_STATEMENT, statement)
    compiled = ptodsl.compile(text, name="bn3d.pto", tuning=None)
    first, _ = compiled.program.calls
    assert "a 3-D convolution's batch and channel axes" in first.cut_because.message
    report = run_check(compiled)
    assert report.ok, report.to_json()


@pytest.mark.parametrize("axis", [0, 1])
def test_a_3d_convolution_at_batch_1_scans_along_its_channels(axis):
    """At batch 1 the merged axis is the channels: a running total along them runs along
    it, one along the batch (1 long) is the value itself."""
    text = BATCH_NORM_3D.replace(BATCH_NORM_STATEMENT, f"y = cumsum(a, axis={axis})")
    store = lower(Source(text, "scan.pto"), until="merge_axes").kernel.body[-1]
    if axis == 0:
        assert isinstance(store.value, ir.Ref)
    else:
        assert store.value.op == "cumsum" and store.value.attrs.axis == 0
        assert store.value.type.shape == (4, 4, 6, 6)


CONVOLUTIONS = [
    p for p in EXAMPLES if p.parent.name == "kernelbench" and 54 <= int(p.stem.split("_")[0]) <= 87
]


def test_every_kernelbench_convolution_has_a_spec():
    """Each is also verified after every pass and its plan held to PyPTO's limits at full
    shape (test_verify, test_examples), and checked against its problem (test_kernelbench)."""
    assert len(CONVOLUTIONS) == 34


@pytest.mark.parametrize("path", CONVOLUTIONS, ids=lambda p: p.stem.split("_")[0])
def test_an_exchanged_tile_takes_whole_blocks_of_rows(path):
    """PyPTO's transpose works on 16 rows at a time: a tile of fewer rows (#75's [1, 4096]
    of a [768, 8192] exchange) overflows UB at full shape, where CI's dims do not reach."""
    from ptodsl.passes.tiling import TRANSPOSE_ROWS, conv_shapes

    compiled = ptodsl.compile(path)
    for phase in compiled.kernel.schedule.phases:
        plan = phase.conv
        if plan is None:
            continue
        conv = compiled.kernel.body[phase.statements[0]].value
        geometry = ir.ConvGeometry.of(conv)
        shapes = conv_shapes(geometry, plan.front, plan.back, plan.rows, plan.vector, plan.staged)
        for shape, exchanged in shapes:
            if exchanged:
                assert plan.tile(shape)[-2] >= min(shape[-2], TRANSPOSE_ROWS), (shape, plan)
