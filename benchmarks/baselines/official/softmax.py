"""Official-pattern baseline for `softmax` (examples/kernelbench/23_softmax.pto, [16, 16384],
softmax along dim 1), after pypto r0.2.0's softmax example
(examples/02_intermediate/operators/softmax): a 4-D [B, S, H, D] tensor, vec tile
(1, 4, 1, 64), a `pypto.loop` over B one batch per iteration (view [1, S, H, D] -> amax,
subtract, exp, sum, divide along the last axis -> assemble). Our [B, D] rows are that tensor
with S = H = 1: [B, 1, 1, D], B = 16 iterations of 256 tiles of 64 elements."""

import pypto
import torch

from benchmarks.baselines.official._scaffolds import per_batch

TILE = (1, 4, 1, 64)


def _softmax(x):
    shifted = x - pypto.amax(x, -1, keepdim=True)
    e = pypto.exp(shifted)
    return e / pypto.sum(e, -1, keepdim=True)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        assert x.dim() == 2 and x.dtype == torch.float32
        b, d = x.shape
        return per_batch(_softmax, [x.reshape(b, 1, 1, d)], vec_tile=TILE).reshape(b, d)
