"""Official-pattern baseline for `linear_relu` (examples/linear_relu.pto: relu(x @ W.T + b),
x [512, 1024], W [768, 1024]), after the linear projection of pypto r0.2.0's function example
(examples/03_advanced/patterns/function): cube tiles [64, 64], [64, 64], [64, 64], one
pypto.matmul over the whole operands with no loop, the bias added to its result. That
example sets no vec tile for the bias add; its vector kernels (layer norm, residual add) use
(64, 128), set here before the add and the relu (this spec's W is [N, K], hence b_trans)."""

import pypto
import torch

from benchmarks.baselines.official._scaffolds import whole

CUBE_TILES = ([64, 64], [64, 64], [64, 64])
VEC_TILE = (64, 128)


def _linear_relu(x, w, b):
    pypto.set_cube_tile_shapes(*CUBE_TILES)
    h = pypto.matmul(x, w, pypto.DT_FP32, b_trans=True)
    pypto.set_vec_tile_shapes(*VEC_TILE)
    return pypto.relu(h + b)


class ModelNew(torch.nn.Module):
    def forward(self, x, W, b):
        assert x.dim() == 2 and W.dim() == 2 and x.dtype == torch.float32
        m, k = x.shape
        n = W.shape[0]
        assert W.shape == (n, k) and b.shape == (n,)
        return whole(_linear_relu, [x, W, b.reshape(1, n)], [(m, n)])[0]
