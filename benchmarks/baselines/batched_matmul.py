"""Baseline `batched_matmul`: torch.bmm(A, B) for [B, M, K] @ [B, K, N] (KernelBench #3).
Pattern B, 3-D batched matmul: one call, no loop. Cube tiles as in the rule book, without its
two flags (pypto 0.2.0's set_cube_tile_shapes takes (m, k, n, enable_split_k))."""

import torch

from benchmarks.baselines._patterns import chunk_map, matmul


class ModelNew(torch.nn.Module):
    def forward(self, A, Bm):
        assert A.dim() == 3 and Bm.dim() == 3 and A.dtype == torch.float32
        b, m, k = A.shape
        n = Bm.shape[2]
        assert Bm.shape == (b, k, n)
        return chunk_map(matmul, [A, Bm], out_shapes=[(b, m, n)], cube=True, loop=False)[0]
