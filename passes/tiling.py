"""Chooses the vector tile shape of each phase from the phase's actual shape.

Rules (PyPTO's limits and the basics' principle 4): rank(tile) = rank(shape) <= 4; every tile
axis <= the shape's axis; prod(tile) <= the target's tile budget; the last axis is filled
first, so a tile moves as many contiguous bytes as the shape allows (>= 1 KB when the last
axis is that long); then tiles are balanced so that the last tile along an axis is not a
sliver. Whether the phase needs a loop (too many tiles) is the loop pass's decision.
"""

from __future__ import annotations

import math

import attrs

from ptodsl import ir
from ptodsl.target import PYPTO_0_2_0, Target


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def auto_tiles(shape: tuple[int, ...], tile: tuple[int, ...]) -> int:
    return math.prod(ceil_div(size, t) for size, t in zip(shape, tile, strict=True))


def _balanced(size: int, tile: int, align: int) -> int:
    """The smallest tile (a multiple of `align` where possible) giving as few tiles as `tile`."""
    count = ceil_div(size, tile)
    even = ceil_div(size, count)
    aligned = ceil_div(even, align) * align
    return aligned if aligned <= tile and aligned <= size else even


def choose_tile(
    shape: tuple[int, ...], itemsize: int, target: Target = PYPTO_0_2_0
) -> tuple[int, ...]:
    budget = target.max_tile_elements
    align = max(1, target.reduce_align_bytes // itemsize)
    tile = [1] * len(shape)
    for axis in reversed(range(len(shape))):
        tile[axis] = min(shape[axis], budget)
        budget //= tile[axis]
        if budget <= 1:
            break
    last = len(shape) - 1
    return tuple(
        _balanced(size, t, align if axis == last else 1)
        for axis, (size, t) in enumerate(zip(shape, tile, strict=True))
    )


def tile_phases(kernel: ir.Kernel, target: Target = PYPTO_0_2_0) -> ir.Kernel:
    """One phase over the whole (elementwise) body, iterating the outputs' kernel shape."""
    output = kernel.outputs[0]
    shape = output.kernel_shape
    tile = choose_tile(shape, output.type.dtype.itemsize, target)
    phase = ir.Phase(statements=tuple(range(len(kernel.body))), shape=shape, tile=tile)
    return attrs.evolve(kernel, schedule=ir.Schedule((phase,)))
