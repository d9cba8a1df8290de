"""Baseline `rms_norm`: x / sqrt(mean(x * x, dim=1, keepdim=True) + eps) on [N, C, H, W].
Pattern C RMSNorm: 3-D (B, C, S) with S = H*W, tile (1, 1, 16384), loop along the batch with
TARGET_LOOP_COUNT = 32 (N = 16: 16 iterations of one sample), sum over dim 1 (C)."""

import pypto
import torch

from benchmarks.baselines._patterns import norm_map


def _rms(xc, inv_c, eps):
    mean_sq = pypto.sum(xc * xc, 1, keepdim=True) * inv_c
    return xc * pypto.rsqrt(mean_sq + eps)


class ModelNew(torch.nn.Module):
    def __init__(self, num_features: int = 64, eps: float = 1e-05):
        super().__init__()
        self.num_features = num_features
        self.eps = float(eps)

    def forward(self, x):
        assert x.dim() == 4 and x.dtype == torch.float32
        n, c, h, w = x.shape
        x3 = x.reshape(n, c, h * w)
        y = norm_map(_rms, x3, params=(1.0 / c, self.eps), tile=(1, 1, 16384))
        return y.reshape(n, c, h, w)
