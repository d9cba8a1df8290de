"""Baseline `mean_dim`: torch.mean(x, dim=1) on [B, M, N]: sum_dim's one-axis 3-D reduction
(tile (1, 16, 256)) scaled by 1 / M; the kernel writes [B, 1, N] and forward reshapes."""

import pypto

from benchmarks.baselines import sum_dim


def _compute(x, m):
    return pypto.sum(x, 1, keepdim=True) * (1.0 / m)


class ModelNew(sum_dim.ModelNew):
    compute = staticmethod(_compute)

    def forward(self, x):
        return super().forward(x).reshape(x.shape[0], x.shape[2])
