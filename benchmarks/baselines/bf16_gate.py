"""Baseline `bf16_gate`: y = sigmoid(x) * w + w^2 - sqrt(w) / (1 + w), bf16 end to end,
x [M, N], w [N] broadcast over rows. 2-D with the rule-book tile (8, 4096). Hand rewrites:
pow(w, 2) -> w * w, 1.0 + w -> w + 1.0. `gate` also serves half_gate (f16)."""

import pypto
import torch

from benchmarks.baselines._patterns import row_map


def _compute(x, w):
    return pypto.sigmoid(x) * w + w * w - pypto.sqrt(w) / (w + 1.0)


def gate(x, w, dtype):
    assert x.dim() == 2 and x.dtype == dtype
    n = x.shape[1]
    assert w.shape == (n,) and w.dtype == dtype
    return row_map(_compute, x, [w.reshape(1, n)])


class ModelNew(torch.nn.Module):
    def forward(self, x, w):
        return gate(x, w, torch.bfloat16)
