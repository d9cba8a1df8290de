"""Official-pattern baseline for `sigmoid` (examples/kernelbench/21_sigmoid.pto,
torch.sigmoid on [16, 16384]), after pypto r0.2.0's SiLU activation example
(examples/02_intermediate/operators/activation), the closest official kernel: a vec tile of
32 on every axis, (32, 32) here, one pass with no loop. The example computes
x * sigmoid(x); the spec wants sigmoid(x) alone, so the product is left out."""

import pypto
import torch

from benchmarks.baselines.official._scaffolds import whole

TILE = (32, 32)


def _sigmoid(x):
    return pypto.sigmoid(x)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        assert x.dim() == 2 and x.dtype == torch.float32
        return whole(_sigmoid, [x], vec_tile=TILE)[0]
