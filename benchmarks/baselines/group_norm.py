"""Baseline `group_norm`: GroupNorm with G groups of CG channels on [N, G*CG, H, W]: mean and
biased variance per (sample, group) over (CG, H, W), then a per-channel affine. Pattern C
(GroupNorm): the rule book's 2-D (flat_batch, hidden) layout cannot carry the per-channel
weights, so the kernel keeps 4-D (N, G, CG, H*W) with the 4-D form of its (1, 16384) tile,
(1, 1, 1, 16384), and loops along the outermost axis N with TARGET_LOOP_COUNT = 32 (N = 16:
16 iterations of one sample). Statistics [b, G, 1, 1] stretch along two axes, so they are
expand_clone'd to [b, G, CG, 1] (one broadcast axis per op).
var = sq_sum * inv_hidden - mean * mean."""

import pypto
import torch

from benchmarks.baselines._patterns import norm_map


def _group_norm(xc, weight, bias, nb, g, cg, inv_hidden, eps):
    s1 = pypto.sum(pypto.sum(xc, 3, keepdim=True), 2, keepdim=True)
    s2 = pypto.sum(pypto.sum(xc * xc, 3, keepdim=True), 2, keepdim=True)
    mean = s1 * inv_hidden
    var = s2 * inv_hidden - mean * mean
    rstd = pypto.rsqrt(var + eps)
    scale = pypto.expand_clone(rstd, [nb, g, cg, 1]) * pypto.expand_clone(weight, [nb, g, cg, 1])
    shift = (
        pypto.expand_clone(bias, [nb, g, cg, 1]) - pypto.expand_clone(mean, [nb, g, cg, 1]) * scale
    )
    return xc * scale + shift


class ModelNew(torch.nn.Module):
    # The spec splits the 64 channels into G = 8 groups; a hand-written GroupNorm fixes G too.
    NUM_GROUPS = 8

    def __init__(self, num_features: int = 64, num_groups: int = NUM_GROUPS, eps: float = 1e-05):
        super().__init__()
        assert num_groups == self.NUM_GROUPS
        self.eps = float(eps)
        self.weight = torch.nn.Parameter(torch.ones(num_features))
        self.bias = torch.nn.Parameter(torch.zeros(num_features))

    def forward(self, x):
        weight, bias = self.weight.detach(), self.bias.detach()
        assert x.dim() == 4 and x.dtype == torch.float32
        n, c, h, w = x.shape
        g = self.NUM_GROUPS
        assert c % g == 0 and weight.shape == (c,) and bias.shape == (c,)
        cg = c // g
        y = norm_map(
            _group_norm,
            x.reshape(n, g, cg, h * w),
            [weight.reshape(1, g, cg, 1), bias.reshape(1, g, cg, 1)],
            params=(g, cg, 1.0 / (cg * h * w), self.eps),
            tile=(1, 1, 1, 16384),
            pass_size=True,
        )
        return y.reshape(n, c, h, w)
