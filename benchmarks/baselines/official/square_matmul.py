"""Official-pattern baseline for `square_matmul` (examples/kernelbench/1_square_matmul.pto,
A @ B on [2048, 2048]), after pypto r0.2.0's matmul example
(examples/01_beginner/compute/matmul_ops, basic case): cube tiles [32, 32], [64, 64],
[64, 64], the whole product in one pypto.matmul, no loop and no view. matmul_tail,
matmul_transposed_b (the example's right-transposed case) and batched_matmul (its batch
case) use the same kernel through `product`.

The single matmul's L0 tile count, ceil(M / 32) * ceil(K / 64) * ceil(N / 64) (times the
batch), is capped at MAX_TILES: at the full 2048^3 it is 65536 and pypto's SIM did not finish
within 600 s (2 GB resident), so the module refuses and benchmarks.run compares at
official.REDUCED_DIMS (N = 512: 1024 tiles, about 20 s)."""

import pypto
import torch

from benchmarks.baselines._common import MAX_TILES, ceil_div
from benchmarks.baselines.official._scaffolds import whole

CUBE_TILES = ([32, 32], [64, 64], [64, 64])


def _matmul(a, b):
    return pypto.matmul(a, b, pypto.DT_FP32)


def _matmul_bt(a, b):
    return pypto.matmul(a, b, pypto.DT_FP32, b_trans=True)


def product(a, b, *, b_trans=False):
    """a @ b (a @ b.T when b_trans) in fp32, 2-D or batched 3-D."""
    assert a.dtype == torch.float32 and a.dim() == b.dim() and a.dim() in (2, 3)
    n = b.shape[-2] if b_trans else b.shape[-1]
    *batch, m, k = a.shape
    tiles = ceil_div(m, CUBE_TILES[0][0]) * ceil_div(k, CUBE_TILES[1][0])
    tiles *= ceil_div(n, CUBE_TILES[2][0]) * (batch[0] if batch else 1)
    assert tiles <= MAX_TILES, f"one matmul of {tiles} cube tiles exceeds {MAX_TILES}"
    out_shape = (*a.shape[:-1], n)
    compute = _matmul_bt if b_trans else _matmul
    return whole(compute, [a, b], [out_shape], cube_tiles=CUBE_TILES)[0]


class ModelNew(torch.nn.Module):
    def forward(self, A, B):
        assert A.dim() == 2 and B.shape[0] == A.shape[1]
        return product(A, B)
