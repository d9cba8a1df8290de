"""Baseline `sum_of_squares`: sum(x * x) over [N, C, H, W] (67M elements at the spec size).
Pattern E: flattened 1-D, vec tile 8192; 8192 tiles > 2048, so it loops over 32 chunks and
accumulates into the output (a pypto.zeros accumulator gives zeros in 0.2.0)."""

import torch

from benchmarks.baselines._patterns import flat_sum


def _terms(x):
    return x * x


class ModelNew(torch.nn.Module):
    def forward(self, x):
        assert x.dim() == 4 and x.dtype == torch.float32
        return flat_sum(_terms, [x], 1.0)
