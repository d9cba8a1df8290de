"""Official-pattern baseline for `matmul_transposed_b` (examples/kernelbench/
17_matmul_transposed_b.pto, A @ B.T with B [N, K]), after the right-transposed case of pypto
r0.2.0's matmul example: cube tiles [32, 32], [64, 64], [64, 64], one
pypto.matmul(..., b_trans=True), no loop."""

import torch

from benchmarks.baselines.official.square_matmul import product


class ModelNew(torch.nn.Module):
    def forward(self, A, B):
        assert A.dim() == 2 and B.dim() == 2 and B.shape[1] == A.shape[1]
        return product(A, B, b_trans=True)
