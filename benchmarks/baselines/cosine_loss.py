"""Baseline `cosine_loss`: mean(1 - cosine_similarity(a, b, dim=1)) over [B, D].
Pattern D per-sample loss: kept 2-D, two tile phases: row sums with the rule book's
(1, 16384) row tile, then the batch mean over the [B, 1] column with a (B, 1) tile.
1.0 - x is written x * -1.0 + 1.0 (rule 5)."""

import pypto
import torch

from benchmarks.baselines._patterns import ROW_TILE, single


def _cosine_loss(a, bb, b):
    dot = pypto.sum(a * bb, 1, keepdim=True)
    norm_a = pypto.sqrt(pypto.sum(a * a, 1, keepdim=True))
    norm_b = pypto.sqrt(pypto.sum(bb * bb, 1, keepdim=True))
    pypto.set_vec_tile_shapes(min(b, 16384), 1)
    cos = dot / pypto.maximum(norm_a * norm_b, 1e-8)
    return pypto.sum(cos * -1.0 + 1.0, 0, keepdim=True) * (1.0 / b)


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        assert a.dim() == 2 and a.dtype == torch.float32
        assert b.shape == a.shape and b.dtype == torch.float32
        rows = a.shape[0]
        loss = single(_cosine_loss, [a, b], [(1, 1)], params=(rows,), tile=ROW_TILE)[0]
        return loss.reshape(())
