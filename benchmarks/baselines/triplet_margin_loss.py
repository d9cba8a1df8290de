"""Baseline `triplet_loss`: TripletMarginLoss, mean(relu(|a - p + eps|_2 - |a - n + eps|_2 +
margin))
over the batch of [B, D] rows. Pattern D per-sample loss: kept 2-D, two tile phases: row
norms with the rule book's (1, 16384) row tile, then the batch mean over [B, 1] with (B, 1)."""

import pypto
import torch

from benchmarks.baselines._patterns import ROW_TILE, single


def _triplet_loss(a, p, n, b, margin, eps):
    diff_pos = a - p + eps
    diff_neg = a - n + eps
    d_pos = pypto.sqrt(pypto.sum(diff_pos * diff_pos, 1, keepdim=True))
    d_neg = pypto.sqrt(pypto.sum(diff_neg * diff_neg, 1, keepdim=True))
    pypto.set_vec_tile_shapes(min(b, 16384), 1)
    per_sample = pypto.relu(d_pos - d_neg + margin)
    return pypto.sum(per_sample, 0, keepdim=True) * (1.0 / b)


class ModelNew(torch.nn.Module):
    def __init__(self, margin: float = 1.0, eps: float = 1e-06):
        super().__init__()
        self.margin = float(margin)
        self.eps = float(eps)

    def forward(self, a, p, n):
        assert a.dim() == 2 and a.dtype == torch.float32
        assert p.shape == a.shape and n.shape == a.shape
        params = (a.shape[0], self.margin, self.eps)
        loss = single(_triplet_loss, [a, p, n], [(1, 1)], params=params, tile=ROW_TILE)[0]
        return loss.reshape(())
