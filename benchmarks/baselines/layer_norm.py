"""Baseline `layer_norm`: LayerNorm over (C, H, W) with elementwise affine weight/bias [C, H, W]
on [N, C, H, W]. Pattern C like GroupNorm/InstanceNorm: reshape to (N, C*H*W), tile
(1, 16384), loop along the batch with TARGET_LOOP_COUNT = 32 (N = 16 < 32: 16 iterations of
one row); var = sq_sum * inv_hidden - mean * mean."""

import pypto
import torch

from benchmarks.baselines._patterns import ROW_TILE, norm_map


def _layer_norm(xc, weight, bias, inv_hidden, eps):
    mean = pypto.sum(xc, 1, keepdim=True) * inv_hidden
    var = pypto.sum(xc * xc, 1, keepdim=True) * inv_hidden - mean * mean
    return (xc - mean) * pypto.rsqrt(var + eps) * weight + bias


class ModelNew(torch.nn.Module):
    def __init__(self, normalized_shape: tuple = (64, 256, 256), eps: float = 1e-05):
        super().__init__()
        self.eps = float(eps)
        self.weight = torch.nn.Parameter(torch.ones(tuple(normalized_shape)))
        self.bias = torch.nn.Parameter(torch.zeros(tuple(normalized_shape)))

    def forward(self, x):
        weight, bias = self.weight.detach(), self.bias.detach()
        assert x.dim() == 4 and x.dtype == torch.float32
        n, c, h, w = x.shape
        assert weight.shape == (c, h, w) and bias.shape == (c, h, w)
        hidden = c * h * w
        rows = [x.reshape(n, hidden), weight.reshape(1, hidden), bias.reshape(1, hidden)]
        y = norm_map(_layer_norm, rows[0], rows[1:], params=(1.0 / hidden, self.eps), tile=ROW_TILE)
        return y.reshape(n, c, h, w)
