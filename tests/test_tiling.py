"""The tile and loop rules on a sweep of shapes: primes, 1, very large, ranks 1 to 4."""

from __future__ import annotations

import math

import pytest
from conftest import TINY_TILES
from plan_limits import WITHOUT_UB_RULE, assert_plan_within_limits
from test_check_rejects import wrong_kernel

import ptodsl
from ptodsl.checking.check import run_check
from ptodsl.ir.plan import plan_of
from ptodsl.ir.target import PYPTO_0_2_0 as TARGET
from ptodsl.passes.loops import plan_loop
from ptodsl.passes.tiling import auto_tiles, ceil_div, choose_tile

SHAPES = [
    (1,), (7,), (8191,), (16384,), (16385,), (262144,), (1000003,), (67108864,), (999999937,),
    (1, 1), (16, 16384), (3, 5), (97, 1031), (128, 4096), (16384, 4096), (2, 33554432),
    (1, 1, 1), (16, 64, 65536), (13, 17, 19), (4, 256, 256),
    (1, 1, 1, 1), (16, 64, 256, 256), (2, 3, 5, 7), (8, 1, 1, 1048576), (2, 4, 3136, 3136),
]  # fmt: skip


@pytest.mark.parametrize("itemsize", [4, 2])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_tile_rules(shape, itemsize):
    tile = choose_tile(shape, itemsize)
    assert len(tile) == len(shape)
    assert all(1 <= t <= s for t, s in zip(tile, shape, strict=True))
    assert math.prod(tile) <= TARGET.max_tile_elements
    wanted = TARGET.min_contiguous_bytes // itemsize
    assert tile[-1] >= min(shape[-1], wanted), "last-axis tile below 1 KB though the axis allows"


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_loop_rules(shape):
    tile = choose_tile(shape, 4)
    loop = plan_loop(shape, tile, TARGET)
    if auto_tiles(shape, tile) <= TARGET.max_auto_tiles:
        assert loop is None, "a loop only when the tiles would exceed the limit"
        return
    if loop is None:  # only when one index of every axis alone is too many tiles
        for axis in range(len(shape)):
            index = shape[:axis] + (1,) + shape[axis + 1 :]
            assert auto_tiles(index, tile) > TARGET.max_auto_tiles
        return
    axis = loop.axis
    assert loop.chunk % tile[axis] == 0
    assert loop.count >= 1 and 0 <= loop.tail < loop.chunk
    assert loop.count * loop.chunk + loop.tail == shape[axis], "chunks and tail cover the axis"
    block = shape[:axis] + (loop.chunk,) + shape[axis + 1 :]
    assert auto_tiles(block, tile) <= TARGET.max_auto_tiles
    for outer in range(axis):  # the outermost axis whose single index fits
        index = shape[:outer] + (1,) + shape[outer + 1 :]
        assert shape[outer] == 1 or auto_tiles(index, tile) > TARGET.max_auto_tiles


def test_a_loop_goes_inward_when_one_index_of_the_outer_axis_has_too_many_tiles():
    """Level 3 #31 over a 56 x 56 image: the softmax of [batch 2, heads 4, 3136, 3136]
    scores has 2512 tiles per batch index, past pypto's 2048, but 1256 per head."""
    shape, tile = (2, 4, 3136, 3136), (1, 1, 5, 3136)
    loop = plan_loop(shape, tile, TARGET, reduced=frozenset({3}))
    assert loop is not None and loop.axis == 1
    assert plan_loop(shape, tile, TARGET, reduced=frozenset({1, 3})).axis == 2


def test_balanced_tiles_avoid_slivers():
    assert choose_tile((16385,), 4) == (8200,)
    assert ceil_div(16385, 8200) == 2
    assert choose_tile((20000,), 4) == (10000,)


@pytest.mark.parametrize("itemsize", [4, 2])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_partial_last_axis_tiles_are_32_byte_aligned(shape, itemsize):
    """PyPTO rejects reductions whose last-axis tile is not a multiple of 32 bytes."""
    tile = choose_tile(shape, itemsize)
    assert tile[-1] == shape[-1] or (tile[-1] * itemsize) % TARGET.reduce_align_bytes == 0


# A where of tensors over rows of one 32-byte block ([8192, 4] row sums): pypto's UB check
# failed it at the old [2048, 8] tile ("WHERE_TT ... total size [209056] exceeds MEM_UB size
# [196608]").
WHERE_OVER_SHORT_ROWS = """kernel halved_negatives
dims R = 8192, C = 4
input h: f32[R, C]
output y: f32[R]
let a = sum(h, axis=1)
y = where(a >= 0.0, a, a * 0.5)
"""


def test_a_where_over_short_rows_fits_ub_where_the_old_tiling_did_not():
    compiled = ptodsl.compile(WHERE_OVER_SHORT_ROWS, name="case.pto", tuning=None)
    assert_plan_within_limits(compiled.plan)
    old = ptodsl.compile(WHERE_OVER_SHORT_ROWS, name="case.pto", target=WITHOUT_UB_RULE)
    with pytest.raises(AssertionError):
        assert_plan_within_limits(plan_of(old.kernel))  # judged by the real target
    assert run_check(compiled).ok


# Level-2 #43's last kernel at full shape: a logsumexp over 16 channels whose (1, 8, 2048)
# tile filled UB and cut both reductions (the max and the sum) in two failed pypto 0.2.0's
# simulator from 32 samples on ("hasCall=0 opSequenceAfterOOO_"), passing at 16.
CHANNEL_LOGSUMEXP = """kernel channel_logsumexp
dims N = 32, C = 16, S = 2048
input x: f32[N, C, S]
output y: f32[N, 1, S]
y = relu(logsumexp(x, axis=1, keepdim=true))
"""


def test_two_reductions_cut_in_a_tile_that_fills_ub_take_the_spill_safe_budget():
    compiled = ptodsl.compile(CHANNEL_LOGSUMEXP, name="case.pto", tuning=None)
    (phase,) = compiled.kernel.schedule.phases
    assert math.prod(phase.tile) <= TARGET.spill_safe_tile_elements
    assert phase.tile[1] < 16  # still cut: the budget, not the cut, was what failed
    report = run_check(compiled, passes="graph")
    assert report.ok, report.to_json()


# Softmax over heads' scores where one batch index has more tiles than the (tiny) target
# allows: the loop runs over the heads, each block softmaxing whole rows of its own (a
# scale per sample and row keeps the four axes apart).
SCORES_SOFTMAX = """kernel scores_softmax
dims B = 2, H = 8, L = 8, S = 64
input x: f32[B, H, L, S]
input scale: f32[B, 1, L, 1]
output y: f32[B, H, L, S]
y = softmax(x * scale, axis=3)
"""


# Rows scaled by a value each, where one row alone has more tiles than allowed: the loop
# runs along the rows' own (last) axis.
LONG_ROWS_SCALED = """kernel long_rows_scaled
dims B = 2, S = 4096
input x: f32[B, S]
input v: f32[B, 1]
output y: f32[B, S]
y = x * v
"""


@pytest.mark.parametrize(
    ("spec", "axis"), [(SCORES_SOFTMAX, 1), (LONG_ROWS_SCALED, 1)], ids=["heads", "last_axis"]
)
def test_a_loop_over_an_inner_axis_computes_what_torch_does(spec, axis):
    compiled = ptodsl.compile(spec, name="case.pto", target=TINY_TILES, tuning=None)
    (phase,) = compiled.kernel.schedule.phases
    assert phase.loop is not None and phase.loop.axis == axis
    report = run_check(compiled)
    assert report.ok, report.to_json()


@pytest.mark.parametrize(
    ("spec", "old", "new"),
    [
        # every block one head short of the next: the last heads never computed
        (SCORES_SOFTMAX, "offset = i * 2", "offset = i * 1"),
        # every block reads the first heads, and writes them where its own belong
        (SCORES_SOFTMAX, "pypto.view(x, [2, 2, 8, 64], [0, offset, 0, 0])",
         "pypto.view(x, [2, 2, 8, 64], [0, 0, 0, 0])"),
        # blocks along the rows' own axis one element apart
        (LONG_ROWS_SCALED, "offset = i * 1024", "offset = i * 1023"),
    ],
    ids=["heads_step", "heads_read", "last_axis_step"],
)  # fmt: skip
def test_a_loop_over_an_inner_axis_cut_wrong_fails_the_check(spec, old, new, tmp_path):
    compiled = ptodsl.compile(spec, name="case.pto", target=TINY_TILES, tuning=None)
    report = run_check(compiled, kernel_path=wrong_kernel(tmp_path, compiled, old, new))
    assert not report.ok and report.outputs[0].mismatched > 0


def test_a_loop_goes_over_a_reduced_axis_when_no_free_axis_fits():
    """Level 2 #72 at full shape: BatchNorm3d's statistics over 128 samples of 63^3 values
    per channel; one channel alone has 3968 tiles, one sample 496."""
    shape, tile = (128, 16, 250047), (1, 1, 8072)
    loop = plan_loop(shape, tile, TARGET, reduced=frozenset({0, 2}))
    assert loop is not None and loop.axis == 0
    assert auto_tiles((loop.chunk, 16, 250047), tile) <= TARGET.max_auto_tiles
    # a free axis that fits still wins
    assert plan_loop((256, 16, 4096), (1, 1, 4096), TARGET, reduced=frozenset({0, 2})).axis == 1


# BatchNorm3d in training mode where one channel has more tiles than the (tiny) target
# allows: the statistics loop over the samples, each block's partial sums combined after its
# loop, the mean and the running statistics computed once between the loops.
BATCH_NORM_OVER_SAMPLES = """kernel batch_norm_over_samples
dims N = 16, C = 2, D = 8, H = 8, W = 8
input x: f32[N, C, D, H, W]
weight batch_norm: batch_norm3d(C)
output y: f32[N, C, D, H, W]
y = batch_norm(x)
"""


def _batch_norm_over_samples() -> ptodsl.Compiled:
    return ptodsl.compile(BATCH_NORM_OVER_SAMPLES, name="case.pto", target=TINY_TILES, tuning=None)


def test_batch_norm_statistics_looped_over_the_samples_compute_what_torch_does():
    compiled = _batch_norm_over_samples()
    statistics = compiled.program.kernels[0]
    looped = [p for p in statistics.schedule.phases if p.loop is not None]
    assert looped and all(p.loop.axis == 0 and p.partials for p in looped)
    once = [p for p in statistics.schedule.phases if p.loop is None]
    assert once and all(p.shape == (1, 2, 1) for p in once)
    report = run_check(compiled)  # both modes, the running statistics too
    assert report.ok, report.to_json()


@pytest.mark.parametrize(
    ("old", "new", "count"),
    [
        # every block's partial sums written over the first block's (in both kernels
        # that compute the mean)
        ("pypto.assemble(_chunk__r0, [i, 0, 0], _parts__r0)",
         "pypto.assemble(_chunk__r0, [0, 0, 0], _parts__r0)", 2),
        # the mean over half the values: a count cut wrong
        ("mean_value = _r0 * 0.0001220703125", "mean_value = _r0 * 0.000244140625", 1),
        # the variance's partials combined without the last block
        ("_r1 = pypto.sum(_parts__r1, 0, keepdim=True)",
         "_r1 = pypto.sum(pypto.view(_parts__r1, [7, 2, 1], [0, 0, 0]), 0, keepdim=True)", 2),
    ],
    ids=["partials_overwritten", "mean_count", "last_block_dropped"],
)  # fmt: skip
def test_batch_norm_looped_over_the_samples_cut_wrong_fails_the_check(old, new, count, tmp_path):
    compiled = _batch_norm_over_samples()
    wrong = wrong_kernel(tmp_path, compiled, old, new, count)
    report = run_check(compiled, kernel_path=wrong)
    assert not report.ok and any(o.mismatched > 0 for o in report.outputs)


# The mean of every channel as an output, and subtracted by a loop over the samples: the
# stored mean is the let that loop reads, so it is cloned (moved, it came out off by up to
# 3e16), under a tile whose last axis is 32 bytes (pypto refuses a clone under [1, 2, 1]).
MEAN_AND_CENTRE = """kernel mean_and_centre
dims N = 16, C = 2, S = 512
input x: f32[N, C, S]
output m: f32[1, C, 1]
output y: f32[N, C, S]
let mu = mean(x, axis=[0, 2], keepdim=true)
m = mu
y = x - mu
"""


def test_a_stored_value_a_loop_reads_is_cloned_under_an_aligned_tile():
    compiled = ptodsl.compile(MEAN_AND_CENTRE, name="case.pto", target=TINY_TILES, tuning=None)
    lines = compiled.source.splitlines()
    stored = lines.index("        m[:] = pypto.clone(mu)")
    assert lines[stored - 2] == "        pypto.set_vec_tile_shapes(1, 2, 8)"
    report = run_check(compiled)
    assert report.ok, report.to_json()


# A row max whose one row has more tiles than the (tiny) target allows, and no other axis
# to loop over: the loop runs along the row, each block's maxima combined after it.
LONG_ROW_MAX = """kernel long_row_max
dims M = 2, N = 4096
input x: f32[M, N]
output y: f32[M, N]
y = x - max(x, axis=1, keepdim=true)
"""


def test_a_row_max_too_long_for_one_loop_index_loops_along_the_row(tmp_path):
    compiled = ptodsl.compile(LONG_ROW_MAX, name="case.pto", target=TINY_TILES, tuning=None)
    first, second = compiled.kernel.schedule.phases
    assert first.loop.axis == 1 and first.partials and second.loop.axis == 1
    report = run_check(compiled)
    assert report.ok, report.to_json()
    # blocks one element apart in both loops: the last element of the row never read
    wrong = wrong_kernel(tmp_path, compiled, "offset = i * 1024", "offset = i * 1023", count=2)
    report = run_check(compiled, kernel_path=wrong)
    assert not report.ok and report.outputs[0].mismatched > 0


# Outputs one long along the loop's axis beside a looped one (a module's running statistics
# next to a batch loop): before stop 61 the verifier refused the phases tiling made of them
# (an internal error); they now run once, before the loop.
NARROW_BESIDE_A_LOOP = """kernel narrow_beside_a_loop
dims N = 16, C = 2, S = 512
input x: f32[N, C, S]
input w: f32[1, C, 1]
input r: f32[1, C, 1]
output y: f32[N, C, S]
output s: f32[1, C, 1]
y = x * w
s = r * 2.0
"""


def test_outputs_one_long_along_a_loop_run_once_before_it():
    compiled = ptodsl.compile(NARROW_BESIDE_A_LOOP, name="case.pto", target=TINY_TILES, tuning=None)
    once, looped = compiled.kernel.schedule.phases
    assert once.loop is None and once.shape == (1, 2, 1) and looped.loop is not None
    report = run_check(compiled)
    assert report.ok, report.to_json()
