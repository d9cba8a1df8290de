"""Official-pattern baseline for `batched_matmul` (examples/kernelbench/3_batched_matmul.pto,
torch.bmm on [128, 128, 256] @ [128, 256, 512]), after the batch case of pypto r0.2.0's
matmul example: cube tiles [32, 32], [64, 64], [64, 64], one 3-D pypto.matmul, no loop."""

import torch

from benchmarks.baselines.official.square_matmul import product


class ModelNew(torch.nn.Module):
    def forward(self, A, B):
        assert A.dim() == 3 and B.dim() == 3 and B.shape[:2] == (A.shape[0], A.shape[2])
        return product(A, B)
