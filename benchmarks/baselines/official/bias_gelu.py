"""Official-pattern baseline for `bias_gelu` (examples/bias_gelu.pto: h = x + bias[N] on
[64, 1024], then tanh-GELU), after pypto r0.2.0's GELU activation example
(examples/02_intermediate/operators/activation): a vec tile of 32 on every axis, (32, 32)
here, one pass with no loop, GELU as x * sigmoid(k * x). The example's k = 1.702 is a
coarser approximation than our spec's tanh form, which has the same shape exactly:
0.5 h (1 + tanh(a)) = h * sigmoid(2a), a = 0.79788 (h + 0.044715 h^3). So this kernel is the
example's x * sigmoid(...) with the spec's argument, after the bias add."""

import pypto
import torch

from benchmarks.baselines.official._scaffolds import whole

TILE = (32, 32)
TWO_SQRT_2_OVER_PI = 2.0 * 0.7978845608028654


def _bias_gelu(x, bias):
    h = x + bias
    inner = (h * h * 0.044715 + 1.0) * h * TWO_SQRT_2_OVER_PI
    return h * pypto.sigmoid(inner)


class ModelNew(torch.nn.Module):
    def forward(self, x, bias):
        assert x.dim() == 2 and x.dtype == torch.float32
        n = x.shape[1]
        assert bias.shape == (n,) and bias.dtype == torch.float32
        return whole(_bias_gelu, [x, bias.reshape(1, n)], vec_tile=TILE)[0]
