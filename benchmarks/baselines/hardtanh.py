"""Baseline `hardtanh`: F.hardtanh(x, min_val, max_val) on [M, N], flattened to 1-D
(pattern A, vec tile 8192). clamp = minimum(maximum(x, lo), hi)."""

import pypto
import torch

from benchmarks.baselines._patterns import flat_map


def _compute(x, min_val, max_val):
    return pypto.minimum(pypto.maximum(x, min_val), max_val)


class ModelNew(torch.nn.Module):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0):
        super().__init__()
        self.min_val = float(min_val)
        self.max_val = float(max_val)

    def forward(self, x):
        assert x.dim() == 2 and x.dtype == torch.float32
        return flat_map(_compute, [x], params=(self.min_val, self.max_val))
