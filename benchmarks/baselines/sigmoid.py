"""Baseline `sigmoid`: torch.sigmoid(x) on [M, N], flattened to 1-D (pattern A, vec tile 8192)."""

import pypto
import torch

from benchmarks.baselines._patterns import flat_map


def _compute(x):
    return pypto.sigmoid(x)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        assert x.dim() == 2 and x.dtype == torch.float32
        return flat_map(_compute, [x])
