"""The tile and loop rules on a sweep of shapes: primes, 1, very large, ranks 1 to 4."""

from __future__ import annotations

import math

import pytest
from plan_limits import WITHOUT_UB_RULE, assert_plan_within_limits

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
    (1, 1, 1, 1), (16, 64, 256, 256), (2, 3, 5, 7), (8, 1, 1, 1048576),
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
    if loop is None:  # only when one row block alone is too many tiles
        assert auto_tiles(shape[1:], tile[1:]) > TARGET.max_auto_tiles
        return
    assert loop.chunk % tile[0] == 0
    assert loop.count >= 1 and 0 <= loop.tail < loop.chunk
    assert loop.count * loop.chunk + loop.tail == shape[0], "chunks and tail cover axis 0 exactly"
    block = (loop.chunk, *shape[1:])
    assert auto_tiles(block, tile) <= TARGET.max_auto_tiles


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
