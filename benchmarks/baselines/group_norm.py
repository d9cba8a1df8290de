"""Baseline `group_norm`: GroupNorm with G groups of CG channels on [N, G*CG, H, W]: mean and
biased variance per (sample, group) over (CG, H, W), then a per-channel affine. Pattern C
(GroupNorm): the rule book's 2-D (flat_batch, hidden) layout cannot carry the per-channel
weights, so the kernel keeps 4-D (N, G, CG, H*W) with the 4-D form of its (1, 16384) tile,
(1, 1, 1, 16384), and loops along the outermost axis N with TARGET_LOOP_COUNT = 32 (N = 16:
16 iterations of one sample). Statistics [b, G, 1, 1] stretch along two axes, so they are
expand_clone'd to [b, G, CG, 1] (one broadcast axis per op).
var = sq_sum * inv_hidden - mean * mean."""

import functools
import importlib.util
import os

import pypto
import torch

TARGET_LOOP_COUNT = 32  # rule book: loop count whenever a loop is used
MAX_TILES = 2048  # rule book: auto_tiles = prod(ceil(shape / tile)) must stay <= 2048
# Test hook only: verify.py lowers the limit to run the loop branches at small shapes.
MAX_TILES = int(os.getenv("BASELINE_MAX_TILES", MAX_TILES))


def ceil_div(a, b):
    return (a + b - 1) // b


def _run_mode():
    # AIKG_PYPTO_RUN_MODE: 0 = NPU, 1 = SIM; unset: NPU when torch_npu is installed, else SIM.
    mode = os.getenv("AIKG_PYPTO_RUN_MODE")
    if mode is None:
        has_npu = importlib.util.find_spec("torch_npu") is not None
        return pypto.RunMode.NPU if has_npu else pypto.RunMode.SIM
    return pypto.RunMode.NPU if int(mode) == 0 else pypto.RunMode.SIM


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


@functools.cache
def make_group_norm_kernel(n, g, cg, s, eps):
    tile = (1, 1, 1, 16384)
    inv_hidden = 1.0 / (cg * s)
    BASIC_BATCH = ceil_div(n, TARGET_LOOP_COUNT)
    num_iters = n // BASIC_BATCH
    rest = num_iters * BASIC_BATCH
    tail = n - rest
    assert BASIC_BATCH * g * cg * ceil_div(s, tile[3]) <= MAX_TILES

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def group_norm_kernel(
        x: pypto.Tensor((n, g, cg, s), pypto.DT_FP32),
        weight: pypto.Tensor((1, g, cg, 1), pypto.DT_FP32),
        bias: pypto.Tensor((1, g, cg, 1), pypto.DT_FP32),
        y: pypto.Tensor((n, g, cg, s), pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(*tile)
        for bi in pypto.loop(0, num_iters, 1, name="LOOP", idx_name="bi"):
            off = bi * BASIC_BATCH
            xc = pypto.view(x, [BASIC_BATCH, g, cg, s], [off, 0, 0, 0])
            yc = _group_norm(xc, weight, bias, BASIC_BATCH, g, cg, inv_hidden, eps)
            pypto.assemble(yc, [off, 0, 0, 0], y)
        if tail > 0:
            xt = pypto.view(x, [tail, g, cg, s], [rest, 0, 0, 0])
            yt = _group_norm(xt, weight, bias, tail, g, cg, inv_hidden, eps)
            pypto.assemble(yt, [rest, 0, 0, 0], y)

    return group_norm_kernel


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
        kernel = make_group_norm_kernel(n, g, cg, h * w, self.eps)
        y = torch.empty((n, g, cg, h * w), dtype=torch.float32, device=x.device)
        kernel(
            x.contiguous().reshape(n, g, cg, h * w),
            weight.contiguous().reshape(1, g, cg, 1),
            bias.contiguous().reshape(1, g, cg, 1),
            y,
        )
        return y.reshape(n, c, h, w)
