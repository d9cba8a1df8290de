"""Baseline `scalar_first`: u = 1 - x; y = u * (2 / x) - c; z = -tanh(c - u) on [N],
1-D with vec tile 8192 (pattern A). Hand rewrites for pypto 0.2.0 (rule 5): 1.0 - x ->
x * -1.0 + 1.0, 2.0 / x -> reciprocal(x) * 2.0, no tanh: -tanh(a) = 1 - 2 * sigmoid(2a)
written as sigmoid(a * 2.0) * -2.0 + 1.0. Tile 8192 > N = 4096, kept literally."""

import pypto
import torch

from benchmarks.baselines._patterns import flat_map


def _compute(x, c):
    u = x * -1.0 + 1.0
    y = u * (pypto.reciprocal(x) * 2.0) - c
    a = u * -1.0 + c
    z = pypto.sigmoid(a * 2.0) * -2.0 + 1.0
    return y, z


class ModelNew(torch.nn.Module):
    def __init__(self, c: float = 0.5):
        super().__init__()
        self.c = float(c)

    def forward(self, x):
        assert x.dim() == 1 and x.dtype == torch.float32
        return flat_map(_compute, [x], n_out=2, params=(self.c,))
