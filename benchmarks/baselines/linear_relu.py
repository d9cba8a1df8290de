"""Baseline `linear_relu`: relu(x @ W.T + b), x [M, K], W [N, K], b [N]. Pattern B: loop along
M with TARGET_LOOP_COUNT = 32 (BASIC_BATCH = 16 rows for M = 512); each chunk does the matmul
(b_trans=True), then the vec tile is set again for bias add + relu on the [16, N] chunk,
using the rule book's 2-D elementwise tile (8, 4096). Cube tiles as in the rule book, without
its two flags (pypto 0.2.0's set_cube_tile_shapes takes (m, k, n, enable_split_k))."""

import pypto
import torch

from benchmarks.baselines._patterns import CUBE_TILES, matmul_rows


def _linear_relu(x_rows, W, b):
    pypto.set_cube_tile_shapes(*CUBE_TILES)
    h = pypto.matmul(x_rows, W, pypto.DT_FP32, b_trans=True)
    pypto.set_vec_tile_shapes(8, 4096)
    return pypto.relu(h + b)


class ModelNew(torch.nn.Module):
    def forward(self, x, W, b):
        assert x.dim() == 2 and W.dim() == 2 and x.dtype == torch.float32
        m, k = x.shape
        n = W.shape[0]
        assert W.shape == (n, k) and b.shape == (n,)
        # (8, 4096) stays within 16384 elements as long as n <= 2048.
        assert min(8, m) * min(4096, n) <= 16384
        return matmul_rows(_linear_relu, x, [W, b.reshape(1, n)], n, cube=False)
