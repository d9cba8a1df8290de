"""Official-pattern baseline for `channel_affine` (examples/channel_affine.pto, x * w + b on
[4, 8, 16, 16]), variant: one of the two tilings of the 4-D add in pypto r0.2.0's
tiling example (examples/01_beginner/tiling, a [4, 32, 64, 256] add): vec tile (1, 2, 4, 128), one
pass over the whole tensor with no loop. The weights are stretched along H first (see
channel_affine.affine)."""

import torch

from benchmarks.baselines.official._scaffolds import whole
from benchmarks.baselines.official.channel_affine import affine, weights

TILE = (1, 2, 4, 128)


class ModelNew(torch.nn.Module):
    def forward(self, x, w, b):
        return whole(affine, [x, *weights(x, w, b)], vec_tile=TILE)[0]
