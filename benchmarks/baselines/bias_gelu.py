"""Baseline `bias_gelu`: h = x + bias[N]; tanh-GELU 0.5 h (1 + tanh(0.79788 (h + 0.044715 h^3))).
2-D [M, N] (the [N] bias broadcasts over rows), rule-book 2-D tile (8, 4096). pypto 0.2.0
has no tanh: tanh(a) = 2 * sigmoid(2a) - 1."""

import pypto
import torch

from benchmarks.baselines._patterns import row_map


def _compute(x, bias):
    h = x + bias
    inner = (h + h * h * h * 0.044715) * 0.7978845608028654
    t = pypto.sigmoid(inner * 2.0) * 2.0 - 1.0
    return h * 0.5 * (t + 1.0)


class ModelNew(torch.nn.Module):
    def forward(self, x, bias):
        assert x.dim() == 2 and x.dtype == torch.float32
        n = x.shape[1]
        assert bias.shape == (n,) and bias.dtype == torch.float32
        return row_map(_compute, x, [bias.reshape(1, n)])
