"""Baseline `huber_loss`: smooth L1, mean(where(|d| < beta, 0.5 d^2 / beta, |d| - 0.5 beta)),
d = p - t over [B, D] (pattern D, flattened 1-D, vec tile 8192)."""

import pypto
import torch

from benchmarks.baselines._patterns import flat_sum


def _terms(p, t, beta):
    d = p - t
    ad = pypto.abs(d)
    return pypto.where(ad < beta, d * d * (0.5 / beta), ad - 0.5 * beta)


class ModelNew(torch.nn.Module):
    def __init__(self, beta: float = 1.0):
        super().__init__()
        self.beta = float(beta)

    def forward(self, p, t):
        assert p.dim() == 2 and p.dtype == torch.float32
        assert t.shape == p.shape and t.dtype == torch.float32
        return flat_sum(_terms, [p, t], 1.0 / p.numel(), params=(self.beta,))
