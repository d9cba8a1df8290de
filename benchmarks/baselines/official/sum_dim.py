"""Official-pattern baseline for `sum_dim` (examples/kernelbench/47_sum_dim.pto:
torch.sum(x, dim=1, keepdim=True) on [16, 256, 256]), after the sum of pypto r0.2.0's
reduction example (examples/01_beginner/compute/reduce_ops): a vec tile of 8 on every axis,
(8, 8, 8) here, one pypto.sum over the dim in one pass, no loop: 2048 tiles at this shape.
The example's amax (max_dim) and a sum scaled by 1 / M (mean_dim) subclass this ModelNew."""

import pypto
import torch

from benchmarks.baselines.official._scaffolds import whole


def _sum(x, m):
    return pypto.sum(x, 1, keepdim=True)


class ModelNew(torch.nn.Module):
    compute = staticmethod(_sum)  # compute(x, m) -> [B, 1, N]

    def __init__(self, dim: int = 1):
        super().__init__()
        assert dim == 1, "this kernel reduces dim 1"

    def forward(self, x):
        assert x.dim() == 3 and x.dtype == torch.float32
        b, m, n = x.shape
        return whole(self.compute, [x], [(b, 1, n)], params=(m,), vec_tile=(8, 8, 8))[0]
