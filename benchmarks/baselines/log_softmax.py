"""Baseline `log_softmax`: torch.log_softmax(x, dim=1) on [B, D]:
(x - max) - log(sum(exp(x - max))), row-wise, rule-book tile (1, 16384)."""

import pypto
import torch

from benchmarks.baselines._patterns import ROW_TILE, row_map


def _compute(x):
    shifted = x - pypto.amax(x, 1, keepdim=True)
    return shifted - pypto.log(pypto.sum(pypto.exp(shifted), 1, keepdim=True))


class ModelNew(torch.nn.Module):
    def forward(self, x):
        assert x.dim() == 2 and x.dtype == torch.float32
        return row_map(_compute, x, tile=ROW_TILE)
