"""Official-pattern baseline for `layer_norm` (examples/kernelbench/40_layer_norm.pto:
LayerNorm over (C, H, W) of [N, C, H, W] with an elementwise affine [C, H, W]), after pypto
r0.2.0's LayerNorm example (examples/02_intermediate/basic_nn/layer_normalization): 2-D
(rows, hidden), vec tile (64, 128), one pass with no loop; mean = sum / hidden, the centred
values, var = sum(centred^2) / hidden, centred / sqrt(var + eps) * gamma + beta, assembled
into the output at offset 0. Here rows = N, hidden = C*H*W, gamma and beta the [1, hidden]
affine. At the full shape that is 32768 tiles in one pass: the scaffold refuses it and
benchmarks.run compares at the CI dims."""

import pypto
import torch

from benchmarks.baselines.official._scaffolds import whole

TILE = (64, 128)


def _layer_norm(x, gamma, beta, hidden, eps):
    mean = pypto.sum(x, -1, keepdim=True) / hidden
    centred = x - mean
    var = pypto.sum(centred * centred, -1, keepdim=True) / hidden
    return centred / pypto.sqrt(var + eps) * gamma + beta


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
        y = whole(
            _layer_norm, rows, params=(float(hidden), self.eps), vec_tile=TILE, assemble=True
        )[0]
        return y.reshape(n, c, h, w)
