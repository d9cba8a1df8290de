"""Baseline `hinge_loss`: mean(clamp(1 - p * t, min=0)) over [B, 1] (pattern D, flattened
1-D, vec tile 8192; 1.0 - x written x * -1.0 + 1.0 per rule 5)."""

import pypto
import torch

from benchmarks.baselines._patterns import flat_sum


def _terms(p, t):
    return pypto.maximum(p * t * -1.0 + 1.0, 0.0)


class ModelNew(torch.nn.Module):
    def forward(self, p, t):
        assert p.dim() == 2 and p.dtype == torch.float32
        assert t.shape == p.shape and t.dtype == torch.float32
        return flat_sum(_terms, [p, t], 1.0 / p.numel())
