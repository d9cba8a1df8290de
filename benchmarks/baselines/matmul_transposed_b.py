"""Baseline `matmul_transposed_b`: A @ B.T with B [N, K] (KernelBench #17). Pattern B: loop
along M with TARGET_LOOP_COUNT = 32, matmul(..., b_trans=True)."""

import torch

from benchmarks.baselines._patterns import matmul_bt, matmul_rows


class ModelNew(torch.nn.Module):
    def forward(self, A, B):
        assert A.dim() == 2 and B.dim() == 2 and A.dtype == torch.float32
        n, k = B.shape
        assert A.shape[1] == k
        return matmul_rows(matmul_bt, A, [B], n)
