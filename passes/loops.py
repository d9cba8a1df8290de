"""Inserts a loop into a phase whose tiles would exceed the target's auto-tile limit.

One loop, along kernel axis 0, never nested. Each iteration handles `chunk` rows, a multiple
of the tile's axis-0 extent, so that no iteration exceeds the limit. A chunk that divides the
axis exactly is preferred; otherwise the loop is followed by one constant-size tail block, so
every view has a compile-time size and nothing reads or writes past the tensor.
"""

from __future__ import annotations

import attrs

from ptodsl import ir
from ptodsl.diagnostics import SpecError
from ptodsl.passes.tiling import auto_tiles, ceil_div
from ptodsl.target import PYPTO_0_2_0, Target


def plan_loop(shape: tuple[int, ...], tile: tuple[int, ...], target: Target) -> ir.Loop | None:
    """The loop for one phase, or None when its tiles fit without one."""
    if auto_tiles(shape, tile) <= target.max_auto_tiles:
        return None
    tiles_per_row_block = auto_tiles(shape[1:], tile[1:])
    row_blocks = target.max_auto_tiles // tiles_per_row_block
    if row_blocks == 0:
        return None
    largest_chunk = row_blocks * tile[0]
    fewest_iterations = ceil_div(shape[0], largest_chunk)
    # A chunk that divides the axis (within 2x of the fewest iterations) needs no tail.
    for count in range(fewest_iterations, 2 * fewest_iterations + 1):
        if shape[0] % count == 0 and (shape[0] // count) % tile[0] == 0:
            return ir.Loop(count=count, chunk=shape[0] // count, tail=0)
    # Otherwise the fewest full-size chunks, and a tail block smaller than one chunk.
    chunk = max(tile[0], shape[0] // fewest_iterations // tile[0] * tile[0])
    return ir.Loop(count=shape[0] // chunk, chunk=chunk, tail=shape[0] % chunk)


def insert_loops(kernel: ir.Kernel, target: Target = PYPTO_0_2_0) -> ir.Kernel:
    assert kernel.schedule is not None, "tiling runs first"
    phases = []
    for phase in kernel.schedule.phases:
        loop = plan_loop(phase.shape, phase.tile, target)
        if loop is None and auto_tiles(phase.shape, phase.tile) > target.max_auto_tiles:
            span = kernel.outputs[0].span
            raise SpecError(
                f"shape {list(phase.shape)} needs more than {target.max_auto_tiles} tiles of "
                f"{list(phase.tile)} even per row; one loop along axis 0 cannot split it",
                span,
            )
        phases.append(attrs.evolve(phase, loop=loop))
    return attrs.evolve(kernel, schedule=ir.Schedule(tuple(phases)))
