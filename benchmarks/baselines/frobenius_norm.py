"""Baseline `frobenius_norm`: x / ||x||_F on [N, C, H, W], one global norm. Flattened with vec
tile 8192, at rank 2 (`flat_layout`: the same contiguous bytes per tile, which the cost model
charges by their bytes, unlike a rank-1 tile's; issue 13). Up to 2048 tiles: one pass.
Beyond (the spec's 67M elements make 8192 tiles): pattern E, a loop over TARGET_LOOP_COUNT =
32 chunks whose partial sums are assembled into a [1, 32] tensor (a pypto.zeros accumulator
gives zeros in 0.2.0), summed, then a second 32-chunk loop scales x by rsqrt(total)."""

import functools

import pypto
import torch

from benchmarks.baselines._common import MAX_TILES, auto_tiles, ceil_div, chunk_plan
from benchmarks.baselines._patterns import (
    build_kernel,
    flat_layout,
    for_chunks,
    tensor_specs,
)


@functools.cache
def make_frobenius_norm_kernel(shape):
    (rows, width), tile = flat_layout(shape)
    loop = auto_tiles((rows, width), tile) > MAX_TILES
    _, num_iters, _, tail = chunk_plan(rows)
    num_parts = num_iters + (1 if tail > 0 else 0)
    # The [1, num_parts] partials are reduced along their last axis: 32 fp32 are 128 bytes, a
    # multiple of the 32-byte alignment; other counts are padded up to a multiple of 8.
    padded_parts = ceil_div(num_parts, 8) * 8

    def total_of(values):
        return pypto.sum(pypto.sum(values, 1, keepdim=True), 0, keepdim=True)

    def body(x, y):
        pypto.set_vec_tile_shapes(*tile)
        if not loop:
            # pypto broadcasts along one axis at a time: the [1, 1] norm to a row first
            y[:] = x * pypto.expand_clone(pypto.rsqrt(total_of(x * x)), [1, width])
            return
        parts = pypto.zeros([1, padded_parts], dtype=pypto.DT_FP32)

        def partial_sum(index, off, length):
            xc = pypto.view(x, [length, width], [off, 0])
            pypto.assemble(total_of(xc * xc), [0, index], parts)

        for_chunks(rows, partial_sum, name="SUM_LOOP")
        inv_norm = pypto.expand_clone(pypto.rsqrt(pypto.sum(parts, 1, keepdim=True)), [1, width])

        def scale(_, off, length):
            pypto.assemble(pypto.view(x, [length, width], [off, 0]) * inv_norm, [off, 0], y)

        for_chunks(rows, scale, name="SCALE_LOOP")

    return build_kernel(tensor_specs([((rows, width), torch.float32)] * 2), body)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        assert x.dim() == 4 and x.dtype == torch.float32
        rows = flat_layout(tuple(x.shape))[0]
        y = torch.empty(rows, dtype=torch.float32, device=x.device)
        make_frobenius_norm_kernel(tuple(x.shape))(x.contiguous().reshape(rows), y)
        return y.reshape(x.shape)
