"""Baseline `sum_dim`: torch.sum(x, dim=1, keepdim=True) on [B, M, N]. One-axis 3-D reduction
with the rule book's (1, 16, 256) tile (its "single-axis 3-D reduction" starting point); the
kernel writes [B, 1, N]. mean_dim and max_dim subclass this ModelNew with their own compute."""

import pypto
import torch

from benchmarks.baselines._patterns import AXIS_TILE, single


def _compute(x, m):
    return pypto.sum(x, 1, keepdim=True)


class ModelNew(torch.nn.Module):
    compute = staticmethod(_compute)  # compute(x, m) -> [B, 1, N]

    def __init__(self, dim: int = 1):
        super().__init__()
        assert dim == 1, "this kernel reduces dim 1"

    def forward(self, x):
        assert x.dim() == 3 and x.dtype == torch.float32
        b, m, n = x.shape
        return single(self.compute, [x], [(b, 1, n)], params=(m,), tile=AXIS_TILE)[0]
