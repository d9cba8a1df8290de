"""PyPTO 0.2.0's limits, asserted on a plan (`ptodsl.ir.plan`): shared by the example, tuning
and random-spec tests."""

from __future__ import annotations

import math

import attrs

from ptodsl.ir.target import PYPTO_0_2_0

# The target as tiling saw it before UB was counted op by op: the old plans, which the
# limits below must reject.
WITHOUT_UB_RULE = attrs.evolve(
    PYPTO_0_2_0,
    ub_bytes=1 << 40,
    select_block_workspace_bytes=0,
    spill_safe_tile_elements=1 << 40,
)


def assert_cube_tile_fits(cube: dict) -> None:
    """Multiples of 16, L0 <= L1 with L1 % L0 == 0, fp32 tiles within L0A/L0B/L0C and L1."""
    (m0, m1), (k0, k1), (n0, n1) = cube["m"], cube["k"], cube["n"]
    assert all(v % 16 == 0 for v in (m0, k0, n0))
    assert m0 <= m1 and k0 <= k1 and n0 <= n1 and k1 % k0 == 0
    assert m0 * k0 * 4 <= 64 * 1024 and n0 * k0 * 4 <= 64 * 1024 and m0 * n0 * 4 <= 128 * 1024
    assert (m1 + n1) * k1 * 4 <= 512 * 1024


def assert_window_steps_fit(phase: dict) -> None:
    """Every op of every step within the tile budget and the auto-tile limit, at rank <= 4
    (the split rank 4); a transpose's tiles within a quarter of the budget (its workspace)."""
    for step in phase["steps"]:
        for name, op in step["tiles"].items():
            shape, tile = op["shape"], op["tile"]
            assert len(tile) == len(shape) <= PYPTO_0_2_0.max_rank
            assert all(1 <= t <= s for t, s in zip(tile[:-1], shape[:-1], strict=True))
            budget = PYPTO_0_2_0.max_tile_elements
            if step["transposed"] and name in ("swap", "result"):
                budget //= 4
            assert math.prod(tile) <= budget
            assert op["auto_tiles"] <= PYPTO_0_2_0.max_auto_tiles
        assert len(step["split"]) == 4
    loop = phase["loop"]
    if loop is not None:
        assert loop["count"] * loop["chunk"] + loop["tail"] == phase["shape"][loop["axis"]]


def assert_conv_fits(phase: dict) -> None:
    """A convolution's cube tiles; every shape it computes on at rank <= 4 under a tile
    within the budget (a binary op's operands and result then fit UB), not past the shape
    but for a 32-byte aligned last axis, within the auto-tile limit; its rows loop covers
    the output rows (ptodsl.ir.verify checks the batch loop against the convolution)."""
    assert_cube_tile_fits(phase["cube_tile"])
    for op in phase["tiles"]:
        shape, tile = op["shape"], op["tile"]
        assert len(tile) == len(shape) <= PYPTO_0_2_0.max_rank
        assert all(1 <= t <= s for t, s in zip(tile[:-1], shape[:-1], strict=True))
        align = PYPTO_0_2_0.reduce_align_bytes // 4
        assert tile[-1] <= -(-shape[-1] // align) * align
        assert math.prod(tile) <= PYPTO_0_2_0.max_tile_elements
        assert op["auto_tiles"] <= PYPTO_0_2_0.max_auto_tiles
    rows = phase["rows_loop"]
    assert rows["count"] * rows["chunk"] + rows["tail"] == phase["shape"][rows["axis"]]


def assert_ub_fits(phase: dict) -> None:
    """The phase's widest op within UB at the phase's tile: its bytes per element over the
    tile's elements, each row taken in whole 32-byte blocks (a [2048, 4] f32 tile holds as
    much as [2048, 8]), plus its workspace."""
    tile, row_bytes = phase["tile"], phase["tile_last_axis_bytes"]
    itemsize = row_bytes // phase["tile"][-1]
    block = PYPTO_0_2_0.reduce_align_bytes
    padded_row = -(-row_bytes // block) * block // itemsize
    elements = math.prod(tile[:-1]) * padded_row
    ub = phase["ub"]
    assert elements * ub["bytes_per_element"] + ub["workspace"] <= PYPTO_0_2_0.ub_bytes, phase


def assert_plan_within_limits(plan: dict) -> None:
    """Every phase of a plan (ptodsl.ir.plan) within PyPTO 0.2.0's tile, tile-count and loop
    rules."""
    for kernel in plan["kernels"]:
        for phase in kernel["phases"]:
            if phase["kind"] == "cube":
                assert_cube_tile_fits(phase["cube_tile"])
                continue
            if phase["kind"] == "window":
                assert_window_steps_fit(phase)
                continue
            if phase["kind"] == "conv":
                assert_conv_fits(phase)
                continue
            shape, tile = phase["shape"], phase["tile"]
            assert len(tile) == len(shape) <= PYPTO_0_2_0.max_rank
            assert all(1 <= t <= s for t, s in zip(tile[:-1], shape[:-1], strict=True))
            # A reduced last axis that is not whole 32-byte blocks gets a tile rounded up to the
            # next block, past the shape (PyPTO's rule; an axis under 32 bytes: one block).
            align = PYPTO_0_2_0.reduce_align_bytes * tile[-1] // phase["tile_last_axis_bytes"]
            assert tile[-1] <= shape[-1] or tile[-1] == -(-shape[-1] // align) * align
            assert math.prod(tile) <= PYPTO_0_2_0.max_tile_elements
            assert_ub_fits(phase)
            loop = phase["loop"]
            if loop is None:
                assert phase["auto_tiles"] <= PYPTO_0_2_0.max_auto_tiles
            else:
                assert phase["auto_tiles"] > PYPTO_0_2_0.max_auto_tiles
                assert loop["tiles_per_iteration"] <= PYPTO_0_2_0.max_auto_tiles
                assert loop["count"] * loop["chunk"] + loop["tail"] == shape[loop["axis"]]
                assert loop["tail"] < loop["chunk"]
