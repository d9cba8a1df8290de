"""Baseline `frobenius_norm`: x / ||x||_F on [N, C, H, W], one global norm. Flattened 1-D with
vec tile 8192. Up to 2048 tiles: one pass. Beyond (the spec's 67M elements make 8192 tiles):
pattern E, a loop over TARGET_LOOP_COUNT = 32 chunks whose partial sums are assembled into a
[32] tensor (a pypto.zeros accumulator gives zeros in 0.2.0), summed, then a second 32-chunk
loop scales x by rsqrt(total)."""

import functools

import pypto
import torch

from benchmarks.baselines._common import MAX_TILES, auto_tiles, ceil_div, chunk_plan
from benchmarks.baselines._patterns import (
    FLAT_TILE,
    build_kernel,
    for_chunks,
    tensor_specs,
)


@functools.cache
def make_frobenius_norm_kernel(size):
    loop = auto_tiles((size,), FLAT_TILE) > MAX_TILES
    _, num_iters, _, tail = chunk_plan(size)
    num_parts = num_iters + (1 if tail > 0 else 0)
    # The [num_parts] partials are reduced along their last axis: 32 fp32 are 128 bytes, a
    # multiple of the 32-byte alignment; other counts are padded up to a multiple of 8.
    padded_parts = ceil_div(num_parts, 8) * 8

    def body(x, y):
        pypto.set_vec_tile_shapes(*FLAT_TILE)
        if not loop:
            total = pypto.sum(x * x, 0, keepdim=True)
            y[:] = x * pypto.rsqrt(total)
            return
        parts = pypto.zeros([padded_parts], dtype=pypto.DT_FP32)

        def partial_sum(index, off, length):
            xc = pypto.view(x, [length], [off])
            pypto.assemble(pypto.sum(xc * xc, 0, keepdim=True), [index], parts)

        for_chunks(size, partial_sum, name="SUM_LOOP")
        inv_norm = pypto.rsqrt(pypto.sum(parts, 0, keepdim=True))

        def scale(_, off, length):
            pypto.assemble(pypto.view(x, [length], [off]) * inv_norm, [off], y)

        for_chunks(size, scale, name="SCALE_LOOP")

    return build_kernel(tensor_specs([((size,), torch.float32)] * 2), body)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        assert x.dim() == 4 and x.dtype == torch.float32
        size = x.numel()
        y = torch.empty((size,), dtype=torch.float32, device=x.device)
        make_frobenius_norm_kernel(size)(x.contiguous().reshape(size), y)
        return y.reshape(x.shape)
