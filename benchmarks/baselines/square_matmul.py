"""Baseline `square_matmul`: A @ B for square [N, N] matrices (KernelBench #1). Pattern B:
loop along M with TARGET_LOOP_COUNT = 32 (BASIC_BATCH = ceil(M / 32) rows), view -> matmul ->
assemble."""

import torch

from benchmarks.baselines._patterns import matmul, matmul_rows


class ModelNew(torch.nn.Module):
    def forward(self, A, B):
        assert A.dim() == 2 and B.dim() == 2 and A.dtype == torch.float32
        k, n = B.shape
        assert A.shape[1] == k
        return matmul_rows(matmul, A, [B], n)
