"""Baseline `scalar_multiply`: A * s on [M, N] (KernelBench #5), flattened to 1-D with vec
tile 8192; 16384 x 4096 makes 8192 tiles > 2048, so it loops over TARGET_LOOP_COUNT = 32
chunks (the rule book's 1-D scalar-mul example)."""

import torch

from benchmarks.baselines._patterns import flat_map


def _compute(A, s):
    return A * s


class ModelNew(torch.nn.Module):
    def forward(self, A, s):
        assert A.dim() == 2 and A.dtype == torch.float32
        return flat_map(_compute, [A], params=(float(s),))
