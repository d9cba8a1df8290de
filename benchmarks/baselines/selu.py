"""Baseline `selu`: torch.selu(x) on [M, N], flattened to 1-D (pattern A, vec tile 8192)."""

import pypto
import torch

from benchmarks.baselines._patterns import flat_map


def _compute(x, alpha, scale):
    pos = pypto.maximum(x, 0.0)
    neg = pypto.minimum(x, 0.0)
    return (pos + (pypto.exp(neg) - 1.0) * alpha) * scale


class ModelNew(torch.nn.Module):
    def __init__(self, alpha: float = 1.6732632423543772, scale: float = 1.0507009873554805):
        super().__init__()
        self.alpha = float(alpha)
        self.scale = float(scale)

    def forward(self, x):
        assert x.dim() == 2 and x.dtype == torch.float32
        return flat_map(_compute, [x], params=(self.alpha, self.scale))
