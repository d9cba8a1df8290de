"""Baseline `leaky_relu`: F.leaky_relu(x, negative_slope) on [M, N], flattened to 1-D
(pattern A, vec tile 8192)."""

import pypto
import torch

from benchmarks.baselines._patterns import flat_map


def _compute(x, negative_slope):
    return pypto.where(x > 0.0, x, x * negative_slope)


class ModelNew(torch.nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = float(negative_slope)

    def forward(self, x):
        assert x.dim() == 2 and x.dtype == torch.float32
        return flat_map(_compute, [x], params=(self.negative_slope,))
