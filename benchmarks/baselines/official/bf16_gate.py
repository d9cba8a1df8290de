"""Official-pattern baseline for `bf16_gate` (examples/bf16_gate.pto: sigmoid gating of
x [16, 1024] by a positive w [N], bf16 end to end), after pypto r0.2.0's SwiGLU activation
example (examples/02_intermediate/operators/activation, also bf16): a vec tile of 32 on
every axis, (32, 32) here, one pass with no loop, a sigmoid gate multiplied by a second
operand. The spec's extra terms (w^2 - sqrt(w) / (1 + w)) follow in the same pass.
`gate` also serves half_gate (f16)."""

import pypto
import torch

from benchmarks.baselines.official._scaffolds import whole

TILE = (32, 32)


def _gate(x, w):
    return pypto.sigmoid(x) * w + w * w - pypto.sqrt(w) / (w + 1.0)


def gate(x, w, dtype):
    assert x.dim() == 2 and x.dtype == dtype
    n = x.shape[1]
    assert w.shape == (n,) and w.dtype == dtype
    return whole(_gate, [x, w.reshape(1, n)], vec_tile=TILE)[0]


class ModelNew(torch.nn.Module):
    def forward(self, x, w):
        return gate(x, w, torch.bfloat16)
