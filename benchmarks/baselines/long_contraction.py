"""Baseline `long_contraction`: A @ B with K = 70000. Pattern B: loop along M with
TARGET_LOOP_COUNT = 32 (M = 16: 16 iterations of one row). Adjustment: pypto 0.2.0 fails on
contractions with K > 65535, so each row block sums ceil(K / 65535) = 2 matmuls over
K-chunks of 35000 (unrolled inside the iteration, no nested loop). Cube tiles as in the rule
book, without its two flags (0.2.0's set_cube_tile_shapes takes (m, k, n, enable_split_k))."""

import pypto
import torch

from benchmarks.baselines._common import ceil_div
from benchmarks.baselines._patterns import CUBE_TILES, matmul_rows

MAX_K = 65535


def _rows_times_b(a_rows, B, rows, k, k_chunk, n):
    pypto.set_cube_tile_shapes(*CUBE_TILES)
    acc = None
    for start in range(0, k, k_chunk):  # plain range: unrolled at trace time
        size = min(k_chunk, k - start)
        a_part = pypto.view(a_rows, [rows, size], [0, start])
        b_part = pypto.view(B, [size, n], [start, 0])
        part = pypto.matmul(a_part, b_part, pypto.DT_FP32)
        if acc is None:
            acc = part
        else:
            pypto.set_vec_tile_shapes(8, 4096)
            acc = acc + part
    return acc


class ModelNew(torch.nn.Module):
    def forward(self, A, B):
        assert A.dim() == 2 and B.dim() == 2 and A.dtype == torch.float32
        k, n = B.shape
        assert A.shape[1] == k
        k_chunk = ceil_div(k, ceil_div(k, MAX_K))
        return matmul_rows(
            _rows_times_b, A, [B], n, params=(k, k_chunk, n), cube=False, pass_size=True
        )
