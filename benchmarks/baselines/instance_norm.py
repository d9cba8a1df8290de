"""Baseline `instance_norm`: InstanceNorm2d (no affine) on [N, C, H, W]: per (sample, channel)
mean and biased variance over H, W. Pattern C: reshape to (N*C, H*W), tile (1, 16384), loop
along the flat batch with TARGET_LOOP_COUNT = 32; var = sq_sum * inv_hidden - mean * mean."""

import pypto
import torch

from benchmarks.baselines._patterns import ROW_TILE, norm_map


def _normalize(xc, inv_hidden, eps):
    mean = pypto.sum(xc, 1, keepdim=True) * inv_hidden
    var = pypto.sum(xc * xc, 1, keepdim=True) * inv_hidden - mean * mean
    return (xc - mean) * pypto.rsqrt(var + eps)


class ModelNew(torch.nn.Module):
    def __init__(self, eps: float = 1e-05):
        super().__init__()
        self.eps = float(eps)

    def forward(self, x):
        assert x.dim() == 4 and x.dtype == torch.float32
        n, c, h, w = x.shape
        x2 = x.reshape(n * c, h * w)
        y = norm_map(_normalize, x2, params=(1.0 / (h * w), self.eps), tile=ROW_TILE)
        return y.reshape(n, c, h, w)
