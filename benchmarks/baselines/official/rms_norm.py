"""Official-pattern baseline for `rms_norm` (examples/kernelbench/36_rms_norm.pto: x /
sqrt(mean(x^2 over C) + eps) on [N, C, H, W], no weight), after pypto r0.2.0's RMSNorm
example (examples/02_intermediate/basic_nn/layer_normalization): vec tile (64, 128), one
pass with no loop; mean_sq = sum(x^2) / hidden, rms = sqrt(mean_sq + eps), x / rms,
assembled into the output at offset 0. The official example reduces the last axis of (rows,
hidden); ours reduces C, the middle axis of [N, C, H*W], so the tile keeps the example's two
sizes as (1, 64, 128): C = 64 whole in one tile (as the example's hidden fits its 128) and
128 along the contiguous axis, 8192 elements as there. At the full shape that is 8192 tiles
in one pass: the scaffold refuses it and benchmarks.run compares at the CI dims."""

import pypto
import torch

from benchmarks.baselines.official._scaffolds import whole

TILE = (1, 64, 128)


def _rms_norm(x, channels, eps):
    mean_sq = pypto.sum(x * x, 1, keepdim=True) / channels
    return x / pypto.sqrt(mean_sq + eps)


class ModelNew(torch.nn.Module):
    def __init__(self, num_features: int = 64, eps: float = 1e-05):
        super().__init__()
        self.num_features = num_features
        self.eps = float(eps)

    def forward(self, x):
        assert x.dim() == 4 and x.dtype == torch.float32
        n, c, h, w = x.shape
        y = whole(
            _rms_norm,
            [x.reshape(n, c, h * w)],
            params=(float(c), self.eps),
            vec_tile=TILE,
            assemble=True,
        )
        return y[0].reshape(n, c, h, w)
